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
    let o = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
        .args(["worker", "weft", "spawn"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing argument"));
    let o = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
        .args(["worker", "weft", "spawn", "many"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("argument 1 (\"many\")"));
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
