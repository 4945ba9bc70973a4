#!/usr/bin/env bash
# Install everything pg_scoot needs on a Debian 12 machine, as root. Idempotent; a no-op (~1 s)
# when everything is present.
#   apt: postgresql-15 (+ client, contrib, server-dev), libclang-dev, clang, pkg-config, sudo, make,
#        openssl, strace, iproute2 (the Arrow transport scenario: a TLS certificate, send calls, ss)
#   cargo-pgrx 0.18.1 (exactly), `cargo pgrx init --pg15 <pg_config>`,
#   python: psycopg[binary], pyarrow (for whichever python3 is on PATH),
#   the unprivileged `postgres` OS user (servers refuse to run as root).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export DEBIAN_FRONTEND=noninteractive

[ "$(id -u)" = 0 ] || die "setup.sh must run as root"

step "setup: system packages"
APT_PKGS=(postgresql-$PG_MAJOR postgresql-client-$PG_MAJOR postgresql-server-dev-$PG_MAJOR
          libclang-dev clang pkg-config sudo make openssl strace iproute2)
# Debian 12 has no separate postgresql-contrib-15 (contrib ships in postgresql-15);
# take it only where such a package exists.
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing: ${missing[*]}"
  apt-get update -qq
  if apt-cache show postgresql-contrib-$PG_MAJOR >/dev/null 2>&1; then missing+=(postgresql-contrib-$PG_MAJOR); fi
  # NB: server-dev pulls postgresql-15 / libpq5 up to the newest 15.x point release; harmless
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "all apt packages present"
fi

step "setup: postgres OS user"
if ! id postgres >/dev/null 2>&1; then
  useradd --system --user-group --home-dir /var/lib/postgresql --create-home --shell /bin/bash postgres
  log "created user postgres"
fi

step "setup: rust + cargo-pgrx $PGRX_VERSION"
if ! command -v cargo >/dev/null 2>&1; then
  log "cargo missing: installing rustup toolchain 1.95.0"
  command -v curl >/dev/null || { apt-get update -qq; apt-get install -y -qq curl ca-certificates >/dev/null; }
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain 1.95.0
  export PATH=$HOME/.cargo/bin:$PATH
fi
if [ "$(cargo pgrx --version 2>/dev/null || true)" != "cargo-pgrx $PGRX_VERSION" ]; then
  log "installing cargo-pgrx $PGRX_VERSION (~5 min on 2 cores)"
  cargo install --locked cargo-pgrx --version "$PGRX_VERSION"
else
  log "cargo-pgrx $PGRX_VERSION present"
fi

step "setup: cargo pgrx init"
resolve_pg_config
"$PG_CONFIG" --version | grep -q "PostgreSQL $PG_MAJOR\." || die "$PG_CONFIG is not PostgreSQL $PG_MAJOR"
if grep -qx "pg$PG_MAJOR = \"$PG_CONFIG\"" "${PGRX_HOME:-$HOME/.pgrx}/config.toml" 2>/dev/null; then
  log "pgrx already knows pg$PG_MAJOR = $PG_CONFIG"
else
  cargo pgrx init --pg$PG_MAJOR "$PG_CONFIG"
fi

step "setup: python packages"
# matplotlib draws the benchmark plots (bench/olap_bench.py); pytest, pandas, polars and duckdb
# run the Arrow export tests (python/tests, scenario 90_arrow_export)
if python3 -c 'import psycopg, pyarrow, matplotlib, pytest, pandas, polars, duckdb' >/dev/null 2>&1; then
  log "psycopg + pyarrow + matplotlib + pytest + pandas + polars + duckdb present ($(command -v python3))"
else
  pyargs=(-m pip install -q --disable-pip-version-check 'psycopg[binary]' pyarrow matplotlib pytest pandas polars duckdb)
  python3 "${pyargs[@]}" || python3 "${pyargs[@]}" --break-system-packages
  python3 -c 'import psycopg, pyarrow, matplotlib, pytest, pandas, polars, duckdb; print("psycopg", psycopg.__version__, "pyarrow", pyarrow.__version__, "pandas", pandas.__version__, "polars", polars.__version__, "duckdb", duckdb.__version__)'
fi

step "setup: done"
