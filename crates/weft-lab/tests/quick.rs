//! Runs every experiment in its `--quick` form (with 2 s windows) in this
//! process and checks each result for shape and sanity, with wide margins:
//! these are functional checks, not benchmarks. Then checks that
//! `report.html` parses and holds one chart per experiment.
//!
//! The checks hold on a loaded machine (two cores shared with other busy
//! processes): a bound is either physics (a 1 s sleep takes at least 1 s,
//! 200 threads serve at most 200 sleeps a second) or a ratio of two rows
//! of the same run, which a busy machine slows alike. How fast each mode
//! is, against its Little's-law ideal, is the lab's report to tell, not
//! this test's.
//!
//! One test on purpose: experiments share the process-wide weft runtime
//! and must not run side by side.

use std::time::Duration;

use weft_lab::experiments::{Experiment, Options};
use weft_lab::report::{ExperimentResult, Mode, Row};

fn rows(results: &[ExperimentResult], e: Experiment) -> &[Row] {
    let r = results
        .iter()
        .find(|r| r.experiment == e)
        .unwrap_or_else(|| panic!("{e:?} missing"));
    &r.rows
}

fn rps(row: &Row) -> f64 {
    assert!(row.error.is_none(), "{}: {:?}", row.label, row.error);
    row.rps
        .unwrap_or_else(|| panic!("{}: no throughput", row.label))
}

fn by(rows: &[Row], mode: Mode, contains: &str) -> Row {
    rows.iter()
        .find(|r| r.mode == mode && r.label.contains(contains))
        .unwrap_or_else(|| panic!("no {mode:?} row with {contains:?}"))
        .clone()
}

#[test]
fn quick_run_of_every_experiment() {
    let out = std::env::temp_dir().join(format!("weft-lab-test-{}", std::process::id()));
    let options = Options {
        quick: true,
        big: false,
        duration: Some(Duration::from_secs(2)),
        out: out.clone(),
    };
    let report = weft_lab::run(Experiment::ALL, &options, false).expect("report written");
    let results = &report.experiments;
    assert_eq!(results.len(), Experiment::ALL.len());

    // E1: a fixed pool of 10 needs ~10 s for 100 one-second tasks; 100
    // virtual threads ~1 s (a third of the pool's time leaves a margin
    // for load); 100,000 all finish.
    let e1 = rows(results, Experiment::E1);
    assert_eq!(e1.len(), 3);
    let fixed = &e1[0];
    assert_eq!(fixed.mode, Mode::Platform);
    assert!(fixed.latency.unwrap().max_ms > 9_000.0, "{fixed:?}");
    let virt = &e1[1];
    assert_eq!(virt.requests, 100);
    assert!(
        virt.latency.unwrap().max_ms < fixed.latency.unwrap().max_ms / 3.0,
        "{virt:?} vs {fixed:?}"
    );
    assert_eq!(e1[2].requests, 100_000);
    assert_eq!(e1[2].errors, 0);

    // E2: one carrier serves ~100 sleeping requests at once, one worker 1.
    let e2 = rows(results, Experiment::E2);
    let (p, v) = (by(e2, Mode::Platform, ""), by(e2, Mode::Virtual, ""));
    assert!(rps(&p) <= 2.5, "{p:?}");
    assert!(rps(&v) >= 10.0 * rps(&p).max(0.1), "{v:?} vs {p:?}");
    let lat = v.latency.unwrap();
    assert!(lat.p50_ms >= 900.0, "{lat:?}");

    // E3: 296 sleeping users; the 200-thread pool caps throughput.
    let e3 = rows(results, Experiment::E3);
    let (p, v) = (
        by(e3, Mode::Platform, "sleep"),
        by(e3, Mode::Virtual, "sleep"),
    );
    assert!(rps(&p) <= 240.0, "{p:?}");
    assert!(rps(&v) > 1.2 * rps(&p), "{v:?} vs {p:?}");
    for r in e3.iter().filter(|r| r.label.contains("instant")) {
        assert!(rps(r) > 100.0, "{r:?}");
    }

    // E4: 800 users on a 1 s endpoint, 100 OS threads vs virtual.
    let e4 = rows(results, Experiment::E4);
    let (p, v) = (by(e4, Mode::Platform, ""), by(e4, Mode::Virtual, ""));
    assert!(rps(&p) <= 130.0, "{p:?}");
    assert!(rps(&v) >= 3.0 * rps(&p).max(1.0), "{v:?} vs {p:?}");

    // E5: needs PostgreSQL; skipped (with instructions) without one.
    let e5 = results
        .iter()
        .find(|r| r.experiment == Experiment::E5)
        .unwrap();
    match &e5.skipped {
        Some(why) => {
            assert!(why.contains("WEFT_PG_URL") || why.contains("pg"), "{why}");
            eprintln!("E5 skipped: {why}");
        }
        None => {
            let (p, v) = (
                by(&e5.rows, Mode::Platform, ""),
                by(&e5.rows, Mode::Virtual, ""),
            );
            assert!(rps(&v) >= 3.0 * rps(&p).max(0.5), "{v:?} vs {p:?}");
        }
    }

    // E6: every client's requests complete; virtual waits less (ideal:
    // 200 vs 500 ms), or, when a busy machine makes both modes CPU-bound,
    // not notably longer.
    let e6 = rows(results, Experiment::E6);
    let (p, v) = (by(e6, Mode::Platform, ""), by(e6, Mode::Virtual, ""));
    for r in [&p, &v] {
        assert_eq!(r.requests, 500 * 4, "{r:?}");
        assert_eq!(r.errors, 0, "{r:?}");
        assert!(r.latency.unwrap().p50_ms >= 190.0, "{r:?}");
    }
    assert!(
        v.latency.unwrap().avg_ms < 1.25 * p.latency.unwrap().avg_ms,
        "{v:?} vs {p:?}"
    );

    // E7: four drivers; the in-process ones report events. The platform
    // and weft-lock drivers serve; the std-lock driver on virtual threads
    // serves (a holder parked behind its blocked carrier is handed off and
    // releases the lock) or, were a holder to stay on its carrier, hits the
    // pinning deadlock and says so; with `transparent` (its own process) it serves, std's waits
    // parking the virtual threads.
    let e7 = rows(results, Experiment::E7);
    assert_eq!(e7.len(), 4);
    for r in e7.iter().filter(|r| !r.label.contains("transparent")) {
        assert!(
            r.notes.iter().any(|n| n.contains("runtime events")),
            "{r:?}"
        );
    }
    // The platform row serves the same driver, so the rows that must serve
    // are held to a share of it.
    let platform = rps(&by(e7, Mode::Platform, "std::sync"));
    assert!(platform > 10.0);
    let pinned = by(e7, Mode::Virtual, "std::sync");
    assert!(
        rps(&pinned) > 10.0 || pinned.notes.iter().any(|n| n.contains("pinning deadlock")),
        "{pinned:?}"
    );
    assert!(rps(&by(e7, Mode::Virtual, "weft::sync")) > platform / 3.0);
    let transparent = by(e7, Mode::Virtual, "transparent");
    assert!(
        rps(&transparent) > platform / 3.0 && transparent.errors == 0,
        "{transparent:?}"
    );

    // E8: the unchanged service (ureq + redis over std::net) serves every
    // request in both modes; on virtual threads its process needs a few OS
    // threads (more when a busy machine makes the monitor add spare
    // carriers), on the pool one per worker.
    let e8 = results
        .iter()
        .find(|r| r.experiment == Experiment::E8)
        .unwrap();
    assert!(e8.skipped.is_none(), "E8 skipped: {:?}", e8.skipped);
    let peak = |r: &Row| -> usize {
        r.notes
            .iter()
            .find_map(|n| n.strip_prefix("the service process peaked at "))
            .and_then(|n| n.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no peak thread count in {r:?}"))
    };
    let (p, v) = (
        by(&e8.rows, Mode::Platform, ""),
        by(&e8.rows, Mode::Virtual, ""),
    );
    for r in [&p, &v] {
        assert_eq!(r.requests, 500 * 4, "{r:?}");
        assert_eq!(r.errors, 0, "{r:?}");
    }
    assert!(peak(&p) >= 200, "{p:?}");
    assert!(peak(&v) < peak(&p) / 2, "{v:?} vs {p:?}");

    // The report: results.json and one self-contained page that parses,
    // with one chart per experiment and no external resources.
    let json = std::fs::read_to_string(out.join("results.json")).unwrap();
    let page = std::fs::read_to_string(out.join("lab.md")).unwrap();
    assert!(page.contains("E8"), "{page}");
    assert!(json.contains("\"tool\": \"weft-lab\""));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let doc = roxmltree::Document::parse_with_options(
        &html,
        roxmltree::ParsingOptions {
            allow_dtd: true,
            ..roxmltree::ParsingOptions::default()
        },
    )
    .expect("report.html parses");
    let sections: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("section"))
        .collect();
    assert_eq!(sections.len(), Experiment::ALL.len());
    for s in &sections {
        let charts = s
            .descendants()
            .filter(|n| n.tag_name().name() == "svg")
            .count();
        assert_eq!(charts, 1, "section {:?}", s.attribute("id"));
    }
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    assert!(!html.contains("<script src"));
    let _ = std::fs::remove_dir_all(&out);
}
