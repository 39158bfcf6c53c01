//! # weft-lab
//!
//! The Weft laboratory: reproduces, end to end and on localhost, the
//! "platform threads vs virtual threads" experiments of the articles Weft
//! started from (E1–E8, each module's docs name its article figure), in
//! both thread modes, and shows beside every
//! measured figure the Little's-law ideal (throughput = concurrency /
//! latency) and the article's figure.
//!
//! | id | what |
//! |----|------|
//! | `E1` | 100 × `sleep(1 s)` on `Executor::fixed(10)` vs `Executor::virtual_per_task()`; 100,000 (`--big`: 1,000,000) virtual threads |
//! | `E2` | weft-http, 1 worker thread vs 1 carrier, 100 users, handler sleeps 1 s |
//! | `E3` | 296 users, 200 platform threads vs virtual; sleep 1 s / instant |
//! | `E4` | a 1 s blocking endpoint, 800 users, 100 platform threads vs virtual |
//! | `E5` | `SELECT pg_sleep(0.5)` through a weft-pg pool of 100; 4 platform threads vs virtual |
//! | `E6` | 2 downstream calls of 100 ms + a database write; 500 clients |
//! | `E7` | pinning: a driver lock (`std::sync::Mutex` vs `weft::sync::Mutex`) around a 20 ms block; the std driver again in a `transparent` service, where std's waits park (JEP 491's parallel) |
//! | `E8` | one switch, unchanged code: E6 built from `ureq` and `redis` over `std::net`, with `weft`'s `transparent` feature |
//!
//! PostgreSQL (E5, and E6's database write) comes through weft-pg, the
//! default feature `pg`; without it (`--no-default-features`), or with no
//! server to reach, E5 is skipped and E6 writes to memory, both said in
//! the output.
//!
//! Everything runs in this process (servers, downstream service, load
//! users) except PostgreSQL and Redis, started and stopped by the lab when
//! `WEFT_PG_URL` / `WEFT_REDIS_URL` are unset (see [`pg`],
//! [`weft_bench_support::redis_server`]), and E8's service, which enables the `transparent`
//! feature and so is its own binary (`tests-transparent/examples/unchanged.rs`,
//! built by the lab on first use), as is E7's `transparent` row
//! (`tests-transparent/examples/pinning.rs`).
//!
//! ```text
//! cargo run --release                    # every experiment, < 5 min
//! cargo run --release -- --quick         # every experiment, < 2 min
//! cargo run --release -- E2 E7 --duration 20s
//! ```
//!
//! Output: a table per experiment on stdout and a one-line-per-experiment
//! summary (the verdict and virtual req/s as a multiple of platform req/s),
//! a progress bar per experiment on a terminal (elsewhere a log line per
//! configuration on stderr), `target/weft-lab/report.html` (the summary,
//! then a chart per experiment), `target/weft-lab/results.json` and
//! `target/weft-lab/lab.md` (the markdown page); only with `--update-docs`
//! does it rewrite the tracked `docs/lab.md`, the page the README links
//! to, so a run leaves the checkout clean.

pub mod experiments;
pub mod html;
pub mod load;
pub mod pg;
pub mod progress;
pub mod report;

use std::time::Instant;

use experiments::{Experiment, Options};
use report::{ExperimentResult, Report};

/// Runs `experiments` (deduplicated, in the given order) with `options`,
/// printing each table to stdout unless `quiet`; writes `report.html`,
/// `results.json` and `lab.md` (the markdown page) into `options.out` and
/// returns the report.
pub fn run(experiments: &[Experiment], options: &Options, quiet: bool) -> std::io::Result<Report> {
    let started = Instant::now();
    let mut chosen: Vec<Experiment> = Vec::new();
    for e in experiments {
        if !chosen.contains(e) {
            chosen.push(*e);
        }
    }
    let mut results = Vec::new();
    for e in chosen {
        let t = Instant::now();
        let bar = progress::Progress::new(e.id(), e.steps(options));
        let outcome = e.run(options, &bar);
        bar.finish();
        let (rows, skipped) = match outcome {
            Ok(rows) => (rows, None),
            Err(why) => (Vec::new(), Some(why)),
        };
        let result = ExperimentResult {
            experiment: e,
            title: e.title(),
            skipped,
            rows,
            seconds: t.elapsed().as_secs_f64(),
        };
        if !quiet {
            println!("\n{} — {} ({:.1} s)", e.id(), e.title(), result.seconds);
            match &result.skipped {
                Some(why) => println!("  SKIPPED: {why}"),
                None => print!("{}", report::table(&result.rows)),
            }
        }
        results.push(result);
    }
    pg::shutdown();
    weft_bench_support::redis_server::shutdown();
    let report = Report::new(options, results, started.elapsed());
    report.write_json(&options.out.join("results.json"))?;
    html::write(&report, &options.out.join("report.html"))?;
    std::fs::write(options.out.join("lab.md"), report::markdown(&report))?;
    Ok(report)
}
