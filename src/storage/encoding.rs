//! Compact column encodings, as plain byte-level functions (no PostgreSQL calls):
//! - `numeric(p, s)` <-> the value scaled by 10^s as an integer (i64 for p <= 18, i128 for
//!   p <= 38; Arrow's decimal128 layout), with the type's minimum value as the NaN marker;
//! - `char(n)` / `varchar(n)` <-> `width` bytes padded with NUL.
//!
//! The numeric functions read and write PostgreSQL's on-disk numeric representation (the varlena
//! payload without its length header: `n_header`/`n_sign_dscale`, optional weight, base-10000
//! digits). Decoding produces exactly the canonical bytes PostgreSQL's `make_result` produces, and
//! encoding refuses (returns None) any input that would not decode back to the same bytes, so a
//! value stored compactly always reads back identical.

pub const NAN64: i64 = i64::MIN;
pub const NAN128: i128 = i128::MIN;

const NUMERIC_SIGN_MASK: u16 = 0xC000;
const NUMERIC_NEG: u16 = 0x4000;
const NUMERIC_SHORT: u16 = 0x8000;
const NUMERIC_SPECIAL: u16 = 0xC000;
const NUMERIC_EXT_SIGN_MASK: u16 = 0xF000;
const NUMERIC_NAN: u16 = 0xC000;
const NUMERIC_SHORT_SIGN_MASK: u16 = 0x2000;
const NUMERIC_SHORT_DSCALE_MASK: u16 = 0x1F80;
const NUMERIC_SHORT_DSCALE_SHIFT: u16 = 7;
const NUMERIC_SHORT_WEIGHT_SIGN_MASK: u16 = 0x0040;
const NUMERIC_SHORT_WEIGHT_MASK: u16 = 0x003F;
const NUMERIC_DSCALE_MASK: u16 = 0x3FFF;
const NBASE: i128 = 10_000;

/// A parsed numeric: NaN, or sign + weight + dscale + base-10000 digits.
struct Parsed<'a> {
    nan: bool,
    neg: bool,
    weight: i32,
    dscale: u32,
    digits: &'a [u8], // pairs of little-endian u16
}

fn rd16(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

fn parse(p: &[u8]) -> Option<Parsed<'_>> {
    if p.len() < 2 {
        return None;
    }
    let h = rd16(p, 0);
    if h & NUMERIC_SIGN_MASK == NUMERIC_SPECIAL {
        return (h & NUMERIC_EXT_SIGN_MASK == NUMERIC_NAN && p.len() == 2).then_some(Parsed {
            nan: true,
            neg: false,
            weight: 0,
            dscale: 0,
            digits: &[],
        });
    }
    let (neg, weight, dscale, off) = if h & NUMERIC_SHORT != 0 {
        let w = (h & NUMERIC_SHORT_WEIGHT_MASK) as i32
            | if h & NUMERIC_SHORT_WEIGHT_SIGN_MASK != 0 {
                !(NUMERIC_SHORT_WEIGHT_MASK as i32)
            } else {
                0
            };
        (
            h & NUMERIC_SHORT_SIGN_MASK != 0,
            w,
            ((h & NUMERIC_SHORT_DSCALE_MASK) >> NUMERIC_SHORT_DSCALE_SHIFT) as u32,
            2,
        )
    } else {
        if p.len() < 4 {
            return None;
        }
        (
            h & NUMERIC_SIGN_MASK == NUMERIC_NEG,
            rd16(p, 2) as i16 as i32,
            (h & NUMERIC_DSCALE_MASK) as u32,
            4,
        )
    };
    if (p.len() - off) % 2 != 0 {
        return None;
    }
    Some(Parsed {
        nan: false,
        neg,
        weight,
        dscale,
        digits: &p[off..],
    })
}

fn pow10(n: u32) -> i128 {
    const P: [i128; 39] = {
        let mut p = [1i128; 39];
        let mut i = 1;
        while i < 39 {
            p[i] = p[i - 1] * 10;
            i += 1;
        }
        p
    };
    P[n as usize]
}

/// The numeric payload `p` as an integer scaled by 10^scale, if it has exactly that display scale,
/// fits `max_abs` and round-trips byte for byte; `nan` is returned for NaN.
fn to_scaled(p: &[u8], scale: u32, max_abs: i128, nan: i128) -> Option<i128> {
    let v = parse(p)?;
    if v.nan {
        return Some(nan);
    }
    if v.dscale != scale {
        return None;
    }
    let mut acc: i128 = 0;
    let n = v.digits.len() / 2;
    for i in 0..n {
        let d = rd16(v.digits, 2 * i) as i128;
        if d >= NBASE {
            return None;
        }
        // digit i stands for d * 10000^(weight - i); scaled by 10^scale
        let e10 = 4 * (v.weight - i as i32) + scale as i32;
        if e10 >= 0 {
            if e10 > 38 {
                return None;
            }
            let term = d.checked_mul(pow10(e10 as u32))?;
            acc = acc.checked_add(term)?;
            if acc > max_abs {
                return None;
            }
        } else {
            let div = pow10((-e10) as u32);
            if d % div != 0 {
                return None;
            }
            acc += d / div;
        }
    }
    if acc > max_abs {
        return None;
    }
    let r = if v.neg { -acc } else { acc };
    // only canonical inputs: what we would write back must be what we were given (into a
    // buffer kept for the backend: an allocation per value was 2% of a bulk load of numerics)
    // SAFETY: a backend is single-threaded and nothing here re-enters to_scaled
    let back = unsafe { &mut *(&raw mut TO_SCALED_BACK) };
    from_scaled(r, scale, nan, back);
    (back.as_slice() == p).then_some(r)
}

/// [`to_scaled`]'s buffer for the payload it writes back.
static mut TO_SCALED_BACK: Vec<u8> = Vec::new();

/// Appends to `rev` (from `*n` on, least significant first) the `nfrac` base-10000 digits of
/// the scaled fraction `frac`, then those of the integer part `int`; returns how many the
/// integer part took. Generic so that values fitting 64 bits avoid 128-bit division.
fn base10000<T>(mut int: T, mut frac: T, nfrac: usize, rev: &mut [u16; 32], n: &mut usize) -> usize
where
    T: Copy + PartialEq + From<u16> + std::ops::Div<Output = T> + std::ops::Rem<Output = T>,
    T: TryInto<u16>,
{
    let base = T::from(10_000);
    let zero = T::from(0);
    let digit = |x: T| (x % base).try_into().unwrap_or(0);
    for _ in 0..nfrac {
        rev[*n] = digit(frac);
        frac = frac / base;
        *n += 1;
    }
    let start = *n;
    while int != zero {
        rev[*n] = digit(int);
        int = int / base;
        *n += 1;
    }
    *n - start
}

/// The 2-byte header of a short-format numeric payload.
fn short_header(neg: bool, weight: i32, scale: u32) -> u16 {
    NUMERIC_SHORT
        | if neg { NUMERIC_SHORT_SIGN_MASK } else { 0 }
        | ((scale as u16) << NUMERIC_SHORT_DSCALE_SHIFT)
        | (weight as u16 & NUMERIC_SHORT_WEIGHT_MASK)
        | if weight < 0 {
            NUMERIC_SHORT_WEIGHT_SIGN_MASK
        } else {
            0
        }
}

/// Writes the canonical numeric payload (PostgreSQL's `make_result`) of `v / 10^scale`. No heap
/// allocation (it runs once per value a scan returns); 64-bit arithmetic when the value fits.
fn from_scaled(v: i128, scale: u32, nan: i128, out: &mut Vec<u8>) {
    out.clear();
    if v == nan {
        out.extend_from_slice(&NUMERIC_NAN.to_le_bytes());
        return;
    }
    let neg = v < 0;
    let a = v.unsigned_abs();
    // base-10000 digits, least significant first: the fraction (scale decimal digits padded on
    // the right to whole base-10000 digits), then the integer part
    let nfrac = scale.div_ceil(4) as usize;
    let mut rev = [0u16; 32];
    let mut n = 0usize;
    // (the fraction times 10^(nfrac * 4 - scale) stays below 10^(nfrac * 4) <= 10^16)
    let pad = nfrac as u32 * 4 - scale;
    let nint = if a <= u64::MAX as u128 && scale <= 16 {
        let (a, p) = (a as u64, pow10(scale) as u64);
        base10000(a / p, a % p * pow10(pad) as u64, nfrac, &mut rev, &mut n)
    } else {
        let p = pow10(scale) as u128;
        base10000(a / p, a % p * pow10(pad) as u128, nfrac, &mut rev, &mut n)
    };
    // most significant first; strip leading and trailing zero digits, as make_result does
    let mut digits = [0u16; 32];
    for k in 0..n {
        digits[k] = rev[n - 1 - k];
    }
    let mut weight = nint as i32 - 1;
    let lead = digits[..n].iter().take_while(|&&d| d == 0).count();
    weight -= lead as i32;
    let digits = &digits[lead..n];
    let m = digits.len() - digits.iter().rev().take_while(|&&d| d == 0).count();
    let digits = &digits[..m];
    let (neg, weight) = if digits.is_empty() {
        (false, 0)
    } else {
        (neg, weight)
    };
    // every value of precision <= 38 fits the short format (dscale <= 63, |weight| small)
    let header = short_header(neg, weight, scale);
    out.reserve(2 + 2 * digits.len());
    out.extend_from_slice(&header.to_le_bytes());
    for d in digits {
        out.extend_from_slice(&d.to_le_bytes());
    }
}

/// numeric(p <= 18, s) payload -> scaled i64 (`NAN64` for NaN); None if it does not fit exactly.
pub fn numeric_to_i64(p: &[u8], scale: u32) -> Option<i64> {
    to_scaled(p, scale, i64::MAX as i128, NAN64 as i128).map(|v| v as i64)
}

/// numeric(p <= 38, s) payload -> scaled i128 (`NAN128` for NaN); None if it does not fit exactly.
pub fn numeric_to_i128(p: &[u8], scale: u32) -> Option<i128> {
    to_scaled(p, scale, 10i128.pow(38) - 1, NAN128)
}

pub fn i64_to_numeric(v: i64, scale: u32, out: &mut Vec<u8>) {
    let mut p = [0u8; SHORT_PAYLOAD_MAX];
    if let Some(len) = i64_numeric_payload(v, scale, &mut p) {
        out.clear();
        out.extend_from_slice(&p[..len]);
        return;
    }
    from_scaled(
        if v == NAN64 { NAN128 } else { v as i128 },
        scale,
        NAN128,
        out,
    )
}

/// Room for [`i64_numeric_payload`]'s payload: the header and up to 5 base-10000 digits.
pub const SHORT_PAYLOAD_MAX: usize = 2 + 2 * 5;

/// The canonical numeric payload of the scaled integer `v` (`v / 10^scale`, as [`from_scaled`]
/// writes it) into `out`, returning its length, for the values most decimal columns hold:
/// not NaN, `scale <= 16` and `|v| * 10^3 < 2^64`. None: use [`from_scaled`]. Scans turn every
/// value they return into this form (heap hands out the stored bytes), so it takes no
/// variable division: `|v|` times 10^pad (the fraction padded to whole base-10000 digits)
/// splits into base-10000 digits by constant divisions alone, least significant first, digit
/// `i` at weight `i - nfrac`.
#[inline]
pub fn i64_numeric_payload(v: i64, scale: u32, out: &mut [u8; SHORT_PAYLOAD_MAX]) -> Option<usize> {
    const LIMIT: u64 = u64::MAX / 1000;
    let a = v.unsigned_abs();
    if v == NAN64 || scale > 16 || a > LIMIT {
        return None;
    }
    let nfrac = scale.div_ceil(4);
    let pad = nfrac * 4 - scale;
    let mut x = a * [1u64, 10, 100, 1000][pad as usize];
    let mut rev = [0u16; 5];
    let mut n = 0usize;
    while x != 0 {
        rev[n] = (x % 10_000) as u16;
        x /= 10_000;
        n += 1;
    }
    if n == 0 {
        // zero: no digits, weight 0, positive (make_result)
        let header = short_header(false, 0, scale);
        out[..2].copy_from_slice(&header.to_le_bytes());
        return Some(2);
    }
    // the most significant digit is not zero (the loop stops there); trailing zeros go
    let lo = rev.iter().take_while(|&&d| d == 0).count();
    let weight = n as i32 - 1 - nfrac as i32;
    let header = short_header(v < 0, weight, scale);
    out[..2].copy_from_slice(&header.to_le_bytes());
    let mut len = 2;
    for k in (lo..n).rev() {
        out[len..len + 2].copy_from_slice(&rev[k].to_le_bytes());
        len += 2;
    }
    Some(len)
}

pub fn i128_to_numeric(v: i128, scale: u32, out: &mut Vec<u8>) {
    from_scaled(v, scale, NAN128, out)
}

/// Largest payload `*_to_numeric` writes for a given precision class (header + digits).
pub const fn max_numeric_payload(int128: bool) -> usize {
    // 38 significant decimal digits need at most 11 base-10000 digits (alignment to the point)
    2 + 2 * if int128 { 12 } else { 7 }
}

/// char(n)/varchar(n): the bytes of a value stored in `width` NUL-padded bytes, or None if they do
/// not fit.
#[inline]
pub fn charn_fits(bytes: &[u8], width: usize) -> bool {
    bytes.len() <= width && !bytes.contains(&0)
}

/// The value bytes of a NUL-padded `width`-byte cell.
#[inline]
pub fn charn_len(cell: &[u8]) -> usize {
    cell.iter().position(|&b| b == 0).unwrap_or(cell.len())
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::*;
    use pgrx::prelude::*;

    /// The stored payload PostgreSQL gives `text::numeric(p,s)`.
    fn pg_payload(text: &str, p: i32, s: i32) -> Vec<u8> {
        unsafe {
            let d = Spi::get_one::<pgrx::AnyNumeric>(&format!("SELECT '{text}'::numeric({p},{s})"))
                .unwrap()
                .unwrap();
            let datum: pgrx::pg_sys::Datum = pgrx::IntoDatum::into_datum(d).unwrap();
            let v = pgrx::pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
            let len = pgrx::varlena::varsize_any_exhdr(v);
            let ptr = pgrx::varlena::vardata_any(v) as *const u8;
            std::slice::from_raw_parts(ptr, len).to_vec()
        }
    }

    /// The fast path writes what the general one writes, over values around every digit
    /// boundary and scale (and random ones), both signs.
    #[pg_test]
    fn numeric_fast_payload_matches_general() {
        let mut vals: Vec<i64> = vec![0, 1, 9, 10, 99, 100, 999, 1000, 9999, 10_000, 10_001];
        let mut p = 1i64;
        while p < i64::MAX / 10 {
            vals.extend([p - 1, p, p + 1, p * 5, p * 7 + 3]);
            p *= 10;
        }
        let mut r: u64 = 0x1234_5678_9abc_def1;
        for _ in 0..20_000 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            vals.push((r >> (r % 50)) as i64);
        }
        vals.extend([
            (u64::MAX / 1000) as i64,
            (u64::MAX / 1000) as i64 + 1,
            i64::MAX,
        ]);
        let (mut general, mut fast) = (Vec::new(), [0u8; SHORT_PAYLOAD_MAX]);
        let mut checked = 0;
        for &v in &vals {
            for neg in [false, true] {
                let v = if neg { v.wrapping_neg() } else { v };
                for scale in 0..=18u32 {
                    from_scaled(v as i128, scale, NAN128, &mut general);
                    match i64_numeric_payload(v, scale, &mut fast) {
                        Some(len) => {
                            assert_eq!(&fast[..len], &general[..], "{v} scale {scale}");
                            checked += 1;
                        }
                        None => {
                            assert!(scale > 16 || v.unsigned_abs() > u64::MAX / 1000 || v == NAN64)
                        }
                    }
                }
            }
        }
        assert!(checked > 500_000, "{checked}");
    }

    #[pg_test]
    fn numeric_roundtrip_matches_postgres() {
        let cases: &[(&str, i32, i32)] = &[
            ("0", 15, 2),
            ("0.00", 15, 2),
            ("-0.01", 15, 2),
            ("1", 15, 2),
            ("17", 15, 2),
            ("21168.23", 15, 2),
            ("-21168.23", 15, 2),
            ("0.04", 15, 2),
            ("9999999999999.99", 15, 2),
            ("-9999999999999.99", 15, 2),
            ("123456789012345678", 18, 0),
            ("-999999999999999999", 18, 0),
            ("0.000000000000000001", 18, 18),
            ("1234.5678", 8, 4),
            ("10000", 9, 0),
            ("100000000", 12, 3),
            ("NaN", 15, 2),
            ("12345678901234567890123456789012.345678", 38, 6),
            ("-99999999999999999999999999999999999999", 38, 0),
            ("0.00000000000000000000000000000000000001", 38, 38),
            ("7.1", 20, 10),
        ];
        let mut out = Vec::new();
        for &(text, p, s) in cases {
            let payload = pg_payload(text, p, s);
            if p <= 18 {
                let v = numeric_to_i64(&payload, s as u32)
                    .unwrap_or_else(|| panic!("{text} numeric({p},{s}) did not encode"));
                i64_to_numeric(v, s as u32, &mut out);
                assert_eq!(out, payload, "{text} numeric({p},{s}) as i64 {v}");
            }
            let v = numeric_to_i128(&payload, s as u32)
                .unwrap_or_else(|| panic!("{text} numeric({p},{s}) did not encode as i128"));
            i128_to_numeric(v, s as u32, &mut out);
            assert_eq!(out, payload, "{text} numeric({p},{s}) as i128 {v}");
        }
        // a different display scale does not fit
        let p = pg_payload("1.5", 10, 1);
        assert_eq!(numeric_to_i64(&p, 2), None);
        // values that need more than 18 digits do not fit i64
        let p = pg_payload("12345678901234567890", 20, 0);
        assert_eq!(numeric_to_i64(&p, 0), None);
        assert!(numeric_to_i128(&p, 0).is_some());
    }

    #[pg_test]
    fn charn_cells() {
        assert!(charn_fits(b"N", 1));
        assert!(!charn_fits("é".as_bytes(), 1));
        assert!(charn_fits(b"", 4));
        assert_eq!(charn_len(b"ab\0\0"), 2);
        assert_eq!(charn_len(b"abcd"), 4);
    }
}
