//! Builds the C library of `tests/c_cond.rs` (a lock shaped like CPython's
//! GIL, `crates/weft-native-tests/c/gil.c`) with the system compiler, as a
//! shared library the tests link (its pthread calls go through the
//! dynamic linker, to Weft's definitions, as a real C library's do).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let src = "../crates/weft-native-tests/c/gil.c";
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let so = out.join("libweft_gil.so");
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&so)
        .arg(src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cc} for {src}: {e} (install gcc)"));
    assert!(status.success(), "{cc} failed on {src}");
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", out.display());
}
