//! The suite end to end, on the Rust columns only (Go and a JDK may be
//! absent where the tests run): a tiny `--quick` subset, then the files it
//! writes. A missing toolchain must skip its column, not fail the run.

use std::path::Path;
use std::process::Command;

fn run_suite(out: &Path, extra_env: &[(&str, &str)], args: &[&str]) -> serde_json::Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft-bench"));
    cmd.args(["--quick", "--runs", "1", "--out"])
        .arg(out)
        .args(args);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("run weft-bench");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "weft-bench failed\n{stdout}\n{stderr}");
    let json = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    serde_json::from_str(&json).expect("valid JSON")
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("weft-bench-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn quick_subset_measures_every_selected_cell() {
    let out = tempdir("subset");
    let v = run_suite(
        &out,
        &[],
        &[
            "--only",
            "spawn,pingpong,echo-100,http-hello-100,https-hello-100",
            "--runtimes",
            "weft,tokio-mt,std",
        ],
    );
    let workloads = v["workloads"].as_array().unwrap();
    let ids: Vec<&str> = workloads
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    // `--only` selects ids that contain a name: "spawn" takes "spawn-main".
    assert_eq!(
        ids,
        [
            "spawn",
            "spawn-main",
            "pingpong",
            "pingpong-cross",
            "echo-100",
            "http-hello-100",
            "https-hello-100"
        ]
    );
    for w in workloads {
        for c in w["cells"].as_array().unwrap() {
            let col = c["column"].as_str().unwrap();
            let selected = ["weft", "tokio-mt", "std"].contains(&col);
            let runs = c["runs"].as_array().unwrap();
            assert!(c["error"].is_null(), "{} / {col}: {}", w["id"], c["error"]);
            if selected {
                assert_eq!(runs.len(), 1, "{} / {col}", w["id"]);
                let r = &runs[0];
                assert!(r["value"].as_f64().unwrap() > 0.0, "{} / {col}", w["id"]);
                assert!(r["rss_kib"].as_u64().unwrap() > 0, "{} / {col}", w["id"]);
                if w["id"].as_str().unwrap().contains("http") {
                    assert_eq!(r["errors"], 0, "{} / {col}", w["id"]);
                    assert!(r["p99_ms"].as_f64().unwrap() > 0.0);
                }
                // The https row also measures full handshakes (a new TLS
                // connection per request); the plain rows have none.
                let hs = r["handshakes_per_sec"].as_f64();
                if w["id"] == "https-hello-100" {
                    assert!(hs.unwrap() > 0.0, "{} / {col}: {r}", w["id"]);
                    assert!(r["handshake_p99_ms"].as_f64().unwrap() > 0.0);
                } else {
                    assert!(hs.is_none(), "{} / {col}: {r}", w["id"]);
                }
            } else {
                assert!(runs.is_empty(), "{} / {col} ran unselected", w["id"]);
            }
        }
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| spawn + join |"), "{md}");
    assert!(
        md.contains(
            "| HTTPS hello, 100 connections — TLS handshakes, new connection per request |"
        ),
        "{md}"
    );
    assert!(md.contains("**"), "Weft's own cells are bold");
    for id in ids {
        let svg = std::fs::read_to_string(out.join("charts").join(format!("{id}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_missing_toolchain_skips_its_column() {
    let out = tempdir("missing");
    let v = run_suite(
        &out,
        &[("WEFT_BENCH_GO", "/nonexistent/go")],
        &["--only", "spawn", "--runtimes", "weft,go"],
    );
    let go = v["columns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "go")
        .unwrap();
    assert!(go["skipped"].is_string(), "{go}");
    let cells = v["workloads"][0]["cells"].as_array().unwrap();
    let weft = cells.iter().find(|c| c["column"] == "weft").unwrap();
    assert_eq!(weft["runs"].as_array().unwrap().len(), 1);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_arguments_are_clear_errors() {
    let o = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
        .args(["--runtimes", "erlang", "--list"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown runtime \"erlang\""));
    // A missing or malformed number, and a park of no threads (it would
    // wait for the last of none forever), exit with a message.
    for (args, says) in [
        (&["spawn"][..], "missing argument"),
        (&["spawn", "many"], "argument 1 (\"many\")"),
        (&["park", "0"], "at least one thread"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
            .args(["worker", "weft"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(says),
            "{args:?}"
        );
    }
    // An https server with unreadable certificate files says so and exits
    // (it never prints `ready`).
    for rt in ["weft", "tokio-mt", "std"] {
        let o = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
            .args([
                "worker",
                rt,
                "https-server",
                "/nonexistent/cert.pem",
                "/nonexistent/key.pem",
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{rt}");
        assert!(o.stdout.is_empty(), "{rt}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("/nonexistent/cert.pem"), "{rt}: {err}");
    }
}

/// Runs a `park` worker at a tiny N and checks its result line: the memory
/// per parked thread (`value`, KiB) and the time until all are parked
/// (`parked_ms`) are positive numbers. Nothing is asserted about their size.
fn check_park_line(who: &str, cmd: &mut Command) {
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("{who}: cannot start: {e}"));
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{who}: {out}{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("{who}: not one JSON line ({e}): {out:?}"));
    assert_eq!(v["workload"], "park", "{who}: {v}");
    assert_eq!(v["unit"], "KiB", "{who}: {v}");
    for key in ["value", "parked_ms"] {
        let x = v[key].as_f64().unwrap_or(f64::NAN);
        assert!(x.is_finite() && x > 0.0, "{who}: {key} in {v}");
    }
    assert!(v["hwm_kib"].as_u64().unwrap_or(0) > 0, "{who}: {v}");
}

/// The parked-thread threads of every test: few, so the figures are only
/// checked for form.
const TINY_PARK: &str = "2000";

#[test]
fn park_workers_print_memory_per_thread_and_time_until_parked() {
    for rt in ["weft", "tokio-mt", "tokio-ct", "std"] {
        check_park_line(
            rt,
            Command::new(env!("CARGO_BIN_EXE_weft-bench")).args(["worker", rt, "park", TINY_PARK]),
        );
    }
}

/// The Go and Java `park` workers, where their toolchains are installed
/// (Go: `WEFT_BENCH_GO`, `go` on PATH or /usr/local/go; Java: a JDK >= 21
/// under `WEFT_BENCH_JAVA_HOME`, `JAVA_HOME` or /usr/lib/jvm); a missing
/// one is skipped with a note, as the suite skips its column.
#[test]
fn go_and_java_park_workers_print_the_same_line() {
    let bench = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempdir("park-peers");
    std::fs::create_dir_all(&out).unwrap();
    let go = std::env::var_os("WEFT_BENCH_GO")
        .map(std::path::PathBuf::from)
        .or_else(|| on_path("go"))
        .or_else(|| Some("/usr/local/go/bin/go".into()))
        .filter(|p| p.exists());
    match go {
        Some(go) => {
            let bin = out.join("gobench");
            let built = Command::new(go)
                .args(["build", "-o"])
                .arg(&bin)
                .arg(".")
                .current_dir(bench.join("go"))
                .status()
                .unwrap();
            assert!(built.success(), "go build");
            check_park_line("go", Command::new(&bin).args(["park", TINY_PARK]));
        }
        None => eprintln!("note: no Go toolchain; its park worker is not checked"),
    }
    match jdk21() {
        Some(home) => {
            let classes = out.join("java");
            let built = Command::new(home.join("bin/javac"))
                .arg("-d")
                .arg(&classes)
                .arg(bench.join("java/Bench.java"))
                .status()
                .unwrap();
            assert!(built.success(), "javac");
            check_park_line(
                "java",
                Command::new(home.join("bin/java"))
                    .arg("-cp")
                    .arg(&classes)
                    .args(["Bench", "park", TINY_PARK]),
            );
        }
        None => eprintln!("note: no JDK >= 21; its park worker is not checked"),
    }
    let _ = std::fs::remove_dir_all(&out);
}

fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A JDK of version 21 or later: the first of `WEFT_BENCH_JAVA_HOME`,
/// `JAVA_HOME` and /usr/lib/jvm/* whose `release` file says so.
fn jdk21() -> Option<std::path::PathBuf> {
    let mut homes: Vec<std::path::PathBuf> = ["WEFT_BENCH_JAVA_HOME", "JAVA_HOME"]
        .iter()
        .filter_map(|v| std::env::var_os(v).map(Into::into))
        .collect();
    if let Ok(rd) = std::fs::read_dir("/usr/lib/jvm") {
        homes.extend(rd.flatten().map(|e| e.path()));
    }
    homes.into_iter().find(|h| {
        let release = std::fs::read_to_string(h.join("release")).unwrap_or_default();
        let major = release
            .lines()
            .find_map(|l| l.strip_prefix("JAVA_VERSION=\""))
            .and_then(|v| v.split(['.', '"', '-']).next())
            .and_then(|m| m.parse::<u32>().ok());
        major.is_some_and(|m| m >= 21) && h.join("bin/javac").exists()
    })
}

#[test]
fn park_rows_reach_the_report() {
    let out = tempdir("park");
    let v = run_suite(&out, &[], &["--only", "park", "--runtimes", "weft,std"]);
    let workloads = v["workloads"].as_array().unwrap();
    // A quick suite has the 100k row only.
    let ids: Vec<&str> = workloads
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["park-100k"]);
    for c in workloads[0]["cells"].as_array().unwrap() {
        let col = c["column"].as_str().unwrap();
        let runs = c["runs"].as_array().unwrap();
        assert!(c["error"].is_null(), "{col}: {}", c["error"]);
        // std threads run 100k only where vm.max_map_count allows.
        if col == "weft" || (col == "std" && c["skipped"].is_null()) {
            assert_eq!(runs.len(), 1, "{col}");
            assert!(runs[0]["value"].as_f64().unwrap() > 0.0, "{col}");
            assert!(runs[0]["parked_ms"].as_f64().unwrap() > 0.0, "{col}");
        } else {
            assert!(runs.is_empty(), "{col}");
        }
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for row in ["memory per thread", "time until all are parked"] {
        assert!(
            md.contains(&format!("| 100k threads parked, from main — {row} |")),
            "{md}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
