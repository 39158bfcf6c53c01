//! E1 — 100 tasks × `sleep(1 s)` on `weft::Executor::fixed(10)` vs
//! `weft::Executor::virtual_per_task()`; then 100,000 (and, with `--big`,
//! 1,000,000) virtual threads.
//!
//! The articles measured ~10,000 ms for the fixed pool (ten rounds of ten
//! sleeps), ~1,000 ms for 100 virtual threads and ~1,500 ms for 100,000.
//! Both executors run the *same* task, [`task`], which calls `weft::sleep`:
//! on a pool thread it blocks that OS thread, on a virtual thread it parks
//! only the virtual thread.
//!
//! Each row's "req/s" is tasks per second over the whole run (submission
//! of the first task to the end of the last), its latencies the time from
//! the first submission to the end of each task, and its max the wall time
//! the articles report.

use std::io;
use std::time::{Duration, Instant};

use super::common::Options;
use crate::progress::Progress;
use crate::report::{Mode, Row};

/// How long each task blocks.
pub const TASK_TIME: Duration = Duration::from_secs(1);
/// Tasks in the pool-vs-virtual comparison.
pub const TASKS: usize = 100;
/// OS threads in the fixed pool.
pub const POOL_THREADS: usize = 10;
/// Virtual threads in the scale run.
pub const MANY: usize = 100_000;
/// Virtual threads in the `--big` run.
pub const HUGE: usize = 1_000_000;

/// The blocking task both executors run.
pub fn task() -> io::Result<()> {
    weft::sleep(TASK_TIME)
}

/// Runs E1 and returns its rows.
pub fn run(options: &Options, progress: &Progress) -> Vec<Row> {
    let mut rows = Vec::new();
    progress.start("fixed pool of 10");
    let row = Row::new(
        "E1",
        Mode::Platform,
        format!("Executor::fixed({POOL_THREADS}), {TASKS} tasks"),
    )
    .short("fixed(10)")
    .ideal(POOL_THREADS as f64 / TASK_TIME.as_secs_f64(), 1000.0)
    .article("~10,000 ms wall");
    rows.push(measure(row, TASKS, || {
        weft::Executor::try_fixed(POOL_THREADS).map_err(|e| e.to_string())
    }));
    progress.step();

    let mut sizes = vec![(TASKS, "~1,000 ms wall"), (MANY, "~1,500 ms wall (100k)")];
    if options.big {
        sizes.push((HUGE, "-"));
    }
    for (tasks, article) in sizes {
        progress.start(&format!("{tasks} virtual threads"));
        let row = Row::new(
            "E1",
            Mode::Virtual,
            format!("Executor::virtual_per_task(), {tasks} tasks"),
        )
        .short(format!(
            "virtual {}",
            crate::report::thousands(tasks as u64)
        ))
        .ideal(tasks as f64 / TASK_TIME.as_secs_f64(), 1000.0)
        .article(article);
        rows.push(measure(row, tasks, || {
            Ok(weft::Executor::virtual_per_task())
        }));
        progress.step();
    }
    rows
}

/// Submits `tasks` tasks to the executor `make` returns, closes it, and
/// fills `row` with tasks/s and per-task completion times.
fn measure(row: Row, tasks: usize, make: impl FnOnce() -> Result<weft::Executor, String>) -> Row {
    let exec = match make() {
        Ok(e) => e,
        Err(e) => return row.failed(e),
    };
    let start = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    let mut errors = 0u64;
    let mut failure = None;
    for n in 0..tasks {
        match exec.try_submit(|| task().map(|()| Instant::now())) {
            Ok(h) => handles.push(h),
            Err(e) => {
                failure = Some(format!("submitted {n} of {tasks} tasks, then: {e}"));
                break;
            }
        }
    }
    let mut latencies = Vec::with_capacity(handles.len());
    for h in handles {
        match h.join() {
            Ok(Ok(done)) => latencies.push((done - start).as_micros() as u64),
            _ => errors += 1,
        }
    }
    exec.close();
    let wall = start.elapsed();
    let row = row
        .users(tasks as u64)
        .note(format!("wall time {:.0} ms", wall.as_secs_f64() * 1e3))
        .measured(latencies, errors, wall);
    match failure {
        Some(f) => row.failed(f),
        None => row,
    }
}
