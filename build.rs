//! Compiles the C parts: the shim (src/ffi/shim.c: PG_TRY/PG_CATCH around PostgreSQL calls whose
//! errors must reach the client unchanged (CONTEXT lines, constraint names, ...), which pgrx's own
//! FFI boundary would flatten; executor and EXPLAIN hooks) and the ScootScan, ScootAgg and
//! ScootPreAgg custom scans (src/exec/customscan.c, customagg.c, custompreagg.c), the hash-table build of a
//! ScootScan under a Hash node (src/exec/hashbuild.c) and hash joins' outer read-ahead (src/exec/readahead.c). Uses the same pg_config as cargo-pgrx.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/ffi/shim.c");
    println!("cargo:rerun-if-changed=src/exec/customscan.c");
    println!("cargo:rerun-if-changed=src/exec/customagg.c");
    println!("cargo:rerun-if-changed=src/exec/custompreagg.c");
    println!("cargo:rerun-if-changed=src/exec/customunique.c");
    println!("cargo:rerun-if-changed=src/exec/customshare.c");
    println!("cargo:rerun-if-changed=src/exec/olapparallel.c");
    println!("cargo:rerun-if-changed=src/exec/exprstats.c");
    println!("cargo:rerun-if-changed=src/exec/joinest.c");
    println!("cargo:rerun-if-changed=src/exec/distinctagg.c");
    println!("cargo:rerun-if-changed=src/exec/aggnode.h");
    println!("cargo:rerun-if-changed=src/exec/childplan.h");
    println!("cargo:rerun-if-changed=src/exec/hashbuild.c");
    println!("cargo:rerun-if-changed=src/exec/readahead.c");
    println!("cargo:rerun-if-changed=src/exec/hashbuild.h");
    // set by scripts/lib.sh: clones share one build cache, and the files above count as changed
    // only when newer than the last run of this script, whichever clone ran it
    println!("cargo:rerun-if-env-changed=SCOOT_C_DIGEST");
    println!("cargo:rerun-if-env-changed=PGRX_PG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PG_CONFIG");
    let pg_config = std::env::var("PGRX_PG_CONFIG_PATH")
        .or_else(|_| std::env::var("PG_CONFIG"))
        .unwrap_or_else(|_| "pg_config".into());
    let out = Command::new(&pg_config)
        .arg("--includedir-server")
        .output()
        .unwrap_or_else(|e| panic!("running {pg_config} --includedir-server: {e}"));
    assert!(
        out.status.success(),
        "{pg_config} --includedir-server failed"
    );
    let inc = String::from_utf8(out.stdout).unwrap().trim().to_string();
    cc::Build::new()
        .file("src/ffi/shim.c")
        .file("src/exec/customscan.c")
        .file("src/exec/customagg.c")
        .file("src/exec/custompreagg.c")
        .file("src/exec/customunique.c")
        .file("src/exec/customshare.c")
        .file("src/exec/olapparallel.c")
        .file("src/exec/exprstats.c")
        .file("src/exec/joinest.c")
        .file("src/exec/distinctagg.c")
        .file("src/exec/hashbuild.c")
        .file("src/exec/readahead.c")
        .include(&inc)
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-missing-field-initializers")
        .flag_if_supported("-fno-omit-frame-pointer")
        .compile("scoot_shim");
}
