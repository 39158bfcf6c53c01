//! Building a program of `tests-transparent/` — the crate outside the
//! workspace whose binaries enable `weft`'s `transparent` feature (the
//! hooks are linked into every binary of a build that enables it, so the
//! workspace's own harnesses cannot). `weft-bench`'s `weft-std` column and
//! the lab's E8 run such programs as children.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds example `name` of `<workspace>/tests-transparent` with `cargo
/// build --release` into `<workspace>/target/transparent` (its own target
/// dir and lock file) and returns the executable's path. Uses the `cargo`
/// that runs the harness (`$CARGO`), else `cargo` on `PATH`. Cargo's own
/// progress goes to stderr; the first build takes a minute or two.
pub fn build_example(workspace: &Path, name: &str) -> Result<PathBuf, String> {
    let manifest = workspace.join("tests-transparent/Cargo.toml");
    if !manifest.is_file() {
        return Err(format!("{} not found", manifest.display()));
    }
    let target = workspace.join("target/transparent");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "--release", "--example", name])
        .arg("--manifest-path")
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(&cargo).display()))?;
    if !status.success() {
        return Err(format!(
            "cargo build --release --example {name} in tests-transparent/ failed ({status})"
        ));
    }
    Ok(target.join("release/examples").join(name))
}
