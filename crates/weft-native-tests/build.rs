//! Builds the C and C++ test libraries with the system compiler (`cc`,
//! `c++`, or `$CC`/`$CXX`): two linked at start-up, three for `dlopen` (two
//! with dynamic TLS, one with initial-exec TLS).

use std::path::Path;
use std::process::Command;

fn build(compiler: &str, src: &str, out: &Path, lib: &str, extra: &[&str]) {
    let so = out.join(format!("lib{lib}.so"));
    let status = Command::new(compiler)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&so)
        .arg(src)
        .args(extra)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {compiler} for {src}: {e} (install gcc and g++)"));
    assert!(status.success(), "{compiler} failed on {src}");
    println!("cargo:rerun-if-changed={src}");
}

fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    build(&cc, "c/tls_counter.c", &out, "weft_ctls", &[]);
    build(&cxx, "c/cxx_tls.cpp", &out, "weft_cxxtls", &[]);
    build(&cc, "c/dyn_tls.c", &out, "weft_dyntls", &[]);
    // The same library under another name, loaded by one test only: its
    // module id is new when that test loads it.
    build(&cc, "c/dyn_tls.c", &out, "weft_dyntls_late", &[]);
    build(
        &cc,
        "c/ie_tls.c",
        &out,
        "weft_ietls",
        &["-ftls-model=initial-exec"],
    );
    println!(
        "cargo:rustc-env=WEFT_IE_TLS_LIB={}",
        out.join("libweft_ietls.so").display()
    );
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=CXX");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=dylib=weft_ctls");
    println!("cargo:rustc-link-lib=dylib=weft_cxxtls");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", out.display());
    println!(
        "cargo:rustc-env=WEFT_DYN_TLS_LIB={}",
        out.join("libweft_dyntls.so").display()
    );
    println!(
        "cargo:rustc-env=WEFT_DYN_TLS_LATE_LIB={}",
        out.join("libweft_dyntls_late.so").display()
    );
}
