//! The JSON report (histogram and series), `weft-load merge` end to end
//! (two agents at once against one server, merged; checked against the
//! server's count and the runs' own histograms), malformed reports, and
//! the HTML report.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use weft_http::{Response, Router, Server, ServerConfig, ServerHandle};
use weft_load::{Config, Report, run};

fn server() -> ServerHandle {
    Server::bind("127.0.0.1:0", ServerConfig::default())
        .unwrap()
        .serve(
            Router::new()
                .get("/hello", |_req| Response::text("hello"))
                .get("/missing", |_req| Response::error(404)),
        )
        .unwrap()
}

fn weft_load(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft-load"))
        .args(args)
        .output()
        .unwrap()
}

/// A fresh directory for this test's files.
fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_runs_series_adds_up_to_its_totals() {
    let h = server();
    let r = run(&Config {
        url: format!("http://{}/hello", h.local_addr()),
        concurrency: 4,
        duration: Some(Duration::from_millis(400)),
        interval: Duration::from_millis(50),
        ..Config::default()
    })
    .unwrap();
    assert!(r.requests > 0);
    assert!(!r.series.is_empty());
    assert_eq!(r.series.iter().map(|i| i.requests).sum::<u64>(), r.requests);
    let mut sum = r.series[0].histogram().unwrap();
    for (k, i) in r.series.iter().enumerate() {
        // Nominal starts: k × interval.
        assert_eq!(i.start, Duration::from_millis(50) * k as u32);
        if k > 0 {
            sum.add(i.histogram().unwrap()).unwrap();
        }
    }
    // The run's histogram is the sum of its intervals'.
    assert_eq!(sum, r.histogram);
    let total: Duration = r.series.iter().map(|i| i.duration).sum();
    assert!((total.as_secs_f64() - r.duration_secs).abs() < 1e-3);
    // JSON round trip keeps everything that is measured.
    let back = Report::from_json(&r.to_json()).unwrap();
    assert_eq!(back.histogram, r.histogram);
    assert_eq!(back.series.len(), r.series.len());
    assert_eq!(back.requests, r.requests);
    assert_eq!(back.latency, r.latency);
}

#[test]
fn two_agents_merged_equal_their_union() {
    let h = server();
    let url = format!("http://{}/hello", h.local_addr());
    let d = dir("two_agents");
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    // Two agents at once, as two machines would run them.
    let agents: Vec<_> = [&a, &b]
        .iter()
        .map(|p| {
            Command::new(env!("CARGO_BIN_EXE_weft-load"))
                .args(["-q", "-c", "3", "-n", "600", "--interval", "100ms"])
                .arg(format!("--json={}", p.display()))
                .arg(&url)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let agents: Vec<Output> = agents
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for out in &agents {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // --json=FILE still prints the table.
        assert!(String::from_utf8_lossy(&out.stdout).contains("GET /hello"));
    }
    let (merged_json, html) = (d.join("merged.json"), d.join("report.html"));
    let out = weft_load(&[
        "merge",
        s(&a),
        s(&b),
        "--json",
        s(&merged_json),
        "--html",
        s(&html),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1200"));

    let read = |p: &Path| Report::from_json(&std::fs::read_to_string(p).unwrap()).unwrap();
    let (ra, rb, m) = (read(&a), read(&b), read(&merged_json));
    assert_eq!(m.requests, 1200);
    assert_eq!(m.requests, h.stats().requests);
    assert_eq!(m.successes, 1200);
    assert_eq!(m.runs, 2);
    assert_eq!(m.concurrency, 6);
    assert_eq!(m.series.iter().map(|i| i.requests).sum::<u64>(), 1200);
    // The merged histogram is the union of the agents' samples: every
    // percentile equals that of one histogram holding both runs.
    let mut union = ra.histogram.clone();
    union.add(&rb.histogram).unwrap();
    assert_eq!(m.histogram, union);
    for q in [0.5, 0.9, 0.99, 0.999] {
        assert_eq!(
            m.histogram.value_at_quantile(q),
            union.value_at_quantile(q),
            "q {q}"
        );
    }
    assert_eq!(m.latency.p99_ms, union.value_at_quantile(0.99) as f64 / 1e3);

    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("2 runs merged"));
    // The lines (a series of one interval is a dot).
    assert!(page.contains("<polyline") || page.contains("<circle"));
    let rows = page.matches("<tr><td>").count();
    assert!(
        rows >= m.series.len(),
        "{rows} rows for {} intervals",
        m.series.len()
    );

    // `--json -` prints the merged JSON instead of the table.
    let out = weft_load(&["merge", s(&a), s(&b), "--json", "-"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["requests"], 1200);
    assert_eq!(v["format"], "weft-load-report");
}

#[test]
fn json_report_carries_histogram_and_series() {
    let h = server();
    let url = format!("http://{}/missing", h.local_addr());
    let out = weft_load(&["-c", "2", "-n", "50", "--json", &url]);
    // Every request failed (404): exit code 1, the report all the same.
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["format"], "weft-load-report");
    assert_eq!(v["version"], weft_load::VERSION);
    assert_eq!(v["requests"], 50);
    assert_eq!(v["interval_ms"], 1000);
    assert!(v["histogram"].as_str().unwrap().starts_with("HISTF"));
    let series = v["series"].as_array().unwrap();
    assert!(!series.is_empty());
    let n: u64 = series.iter().map(|i| i["requests"].as_u64().unwrap()).sum();
    assert_eq!(n, 50);
    assert!(series[0]["p99_ms"].as_f64().is_some());
    // Status failures keep their latency.
    let r = Report::from_json(std::str::from_utf8(&out.stdout).unwrap()).unwrap();
    assert_eq!(r.histogram.len(), 50);
    assert_eq!(r.errors.status[&404], 50);
}

#[test]
fn malformed_reports_are_clear_errors() {
    let h = server();
    let d = dir("malformed");
    let good = d.join("good.json");
    let out = weft_load(&[
        "-q",
        "-n",
        "20",
        &format!("--json={}", good.display()),
        &format!("http://{}/hello", h.local_addr()),
    ]);
    assert!(out.status.success());
    let text = std::fs::read_to_string(&good).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();

    let mut cases: Vec<(&str, String, &str)> = vec![
        ("garbage", "{not json".into(), "not JSON"),
        ("array", "[1, 2]".into(), "not a JSON object"),
        (
            "old",
            r#"{"name": "GET /", "requests": 5}"#.into(),
            "without a schema version",
        ),
    ];
    v["version"] = 2.into();
    cases.push(("version", v.to_string(), "version 2 is not supported"));
    v["version"] = 1.into();
    let hist = v["histogram"].as_str().unwrap().to_owned();
    v["histogram"] = format!("{}AAAA{}", &hist[..20], &hist[24..]).into();
    cases.push(("corrupt", v.to_string(), "histogram"));
    v["histogram"] = "!!!".into();
    cases.push(("base64", v.to_string(), "histogram: not base64"));
    v["histogram"] = hist.into();
    v["series"][0]["requests"] = "many".into();
    cases.push(("type", v.to_string(), "series[0].requests"));

    for (name, body, expect) in cases {
        let p = d.join(format!("{name}.json"));
        std::fs::write(&p, body).unwrap();
        let out = weft_load(&["merge", s(&good), s(&p)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(expect), "{name}: {err}");
        assert!(err.contains(&format!("{name}.json")), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    // No files, a missing file.
    let out = weft_load(&["merge"]);
    assert!(!out.status.success());
    let out = weft_load(&["merge", s(&d.join("absent.json"))]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("absent.json"));
}

#[test]
fn html_report_of_a_run() {
    let h = server();
    let d = dir("html");
    let page = d.join("run.html");
    let out = weft_load(&[
        "-q",
        "-c",
        "2",
        "-n",
        "100",
        "--html",
        s(&page),
        &format!("http://{}/hello", h.local_addr()),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    for part in [
        "Throughput, requests/s",
        "Latency, ms",
        "<th>p99.9</th>",
        "<table id=\"series\">",
    ] {
        assert!(html.contains(part), "missing {part}");
    }
    // The lines (a series of one interval is a dot).
    assert!(html.contains("<polyline") || html.contains("<circle"));
    // Self-contained: nothing loaded from elsewhere.
    assert!(!html.contains("<script"));
    assert!(!html.contains("<link"));
    assert!(!html.contains("url("));
}

#[test]
fn every_intervals_requests_are_its_histograms_count() {
    // Many short intervals under a steady load: the sampler cuts the
    // series while users record, so a count and a histogram read at
    // different moments would disagree in some interval.
    let h = server();
    let r = run(&Config {
        url: format!("http://{}/hello", h.local_addr()),
        concurrency: 32,
        duration: Some(Duration::from_millis(1500)),
        interval: weft_load::MIN_INTERVAL,
        ..Config::default()
    })
    .unwrap();
    assert_eq!(r.failures, 0);
    assert!(r.series.len() > 10, "{} intervals", r.series.len());
    for (k, i) in r.series.iter().enumerate() {
        assert_eq!(
            i.requests,
            i.histogram().unwrap().len(),
            "interval {k} of {}",
            r.series.len()
        );
    }
    assert_eq!(r.requests, r.histogram.len());
}

/// Runs `weft-load -q -n 20 ARGS URL` and checks it succeeded.
fn agent(url: &str, args: &[&str]) -> Output {
    let mut all = vec!["-q", "-n", "20"];
    all.extend_from_slice(args);
    all.push(url);
    let out = weft_load(&all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A failed merge: exit code 2, no panic; its message.
fn refused(args: &[&str]) -> String {
    let out = weft_load(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn merge_refuses_a_run_twice_and_runs_apart_naming_the_files() {
    let h = server();
    let url = format!("http://{}/hello", h.local_addr());
    let d = dir("refusals");
    let (a, b, c) = (d.join("a.json"), d.join("b.json"), d.join("c.json"));
    agent(&url, &["--json", s(&a)]);
    agent(&url, &["--json", s(&b)]);
    agent(&url, &["--json", s(&c), "--interval", "500ms"]);

    // One file twice, or a copy of it under another name.
    let err = refused(&["merge", s(&a), s(&a)]);
    assert!(err.contains("hold the same run"), "{err}");
    assert_eq!(err.matches("a.json").count(), 2, "{err}");
    let copy = d.join("copy.json");
    std::fs::copy(&a, &copy).unwrap();
    let err = refused(&["merge", s(&a), s(&copy)]);
    assert!(
        err.contains("a.json and ") && err.contains("copy.json hold the same run"),
        "{err}"
    );
    let out = weft_load(&["merge", "--allow-duplicates", s(&a), s(&a), "--json", "-"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["requests"], 40);

    // b moved an hour later: it never overlapped a.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    v["started_at_unix_ms"] = (v["started_at_unix_ms"].as_u64().unwrap() + 3_600_000).into();
    let later = d.join("later.json");
    std::fs::write(&later, v.to_string()).unwrap();
    let err = refused(&["merge", s(&a), s(&later)]);
    assert!(err.contains("a.json (from "), "{err}");
    assert!(
        err.contains("overlaps no other report in time: the nearest, "),
        "{err}"
    );
    assert!(err.contains("later.json, is 36"), "{err}");
    for flag in ["--allow-disjoint", "--align=offset"] {
        let out = weft_load(&["merge", flag, s(&a), s(&later)]);
        assert!(
            out.status.success(),
            "{flag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Different intervals: the files by name.
    let err = refused(&["merge", "--align", "offset", s(&a), s(&c)]);
    assert!(err.contains("a.json: 1000 ms"), "{err}");
    assert!(err.contains("c.json: 500 ms"), "{err}");

    // The output is one of the inputs: refused before it is overwritten.
    let before = std::fs::read(&a).unwrap();
    let err = refused(&["merge", s(&a), s(&b), "--json", s(&a)]);
    assert!(err.contains("one of the reports to merge"), "{err}");
    assert_eq!(std::fs::read(&a).unwrap(), before);
    // Endless input: refused at the limit, not read until memory runs out.
    let err = refused(&["merge", "--max-report-bytes", "100000", "/dev/zero"]);
    assert!(err.contains("/dev/zero: larger than 100000 bytes"), "{err}");
    // Standard output closed (`| head`): an error, not a panic.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_weft-load"))
        .args(["merge", s(&a), "--json", "-"])
        .stdout(writer)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("writing to standard output"), "{err}");
}

#[test]
fn json_takes_its_file_either_way_in_run_and_merge() {
    let h = server();
    let url = format!("http://{}/hello", h.local_addr());
    let d = dir("spellings");
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    // A run: `--json FILE` and `--json=FILE` write FILE and print the
    // table.
    for out in [
        agent(&url, &["--json", s(&a)]),
        agent(&url, &[&format!("--json={}", s(&b))]),
    ] {
        assert!(String::from_utf8_lossy(&out.stdout).contains("GET /hello"));
    }
    let read = |p: &Path| Report::from_json(&std::fs::read_to_string(p).unwrap()).unwrap();
    assert_eq!(read(&a).requests, 20);
    assert_eq!(read(&b).requests, 20);
    // `--json` alone before the URL or an option, and `--json -`: the
    // report on standard output.
    for args in [
        vec!["-q", "-n", "20", "--json", &url],
        vec!["--json", "-q", "-n", "20", &url],
        vec!["-q", "-n", "20", "--json", "-", &url],
    ] {
        let out = weft_load(&args);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(v["requests"], 20);
    }
    // merge: both spellings too (the runs were one after the other: by
    // offset).
    let (m1, m2) = (d.join("m1.json"), d.join("m2.json"));
    let m2_arg = format!("--json={}", s(&m2));
    for args in [
        ["merge", "--align=offset", s(&a), s(&b), "--json", s(&m1)].as_slice(),
        ["merge", "--align=offset", s(&a), s(&b), &m2_arg].as_slice(),
    ] {
        let out = weft_load(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(read(&m1).requests, 40);
    assert_eq!(read(&m2).requests, 40);
    // One help text for both.
    for help in [weft_load(&["--help"]), weft_load(&["merge", "--help"])] {
        let text = String::from_utf8_lossy(&help.stdout);
        assert!(
            text.contains("Write the report as JSON to FILE (`--json FILE` or `--json=FILE`; `-`: standard output"),
            "{text}"
        );
    }
}
