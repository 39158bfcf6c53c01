//! What Weft's benchmark harnesses share, so that each measures and reports
//! the same way: `weft-bench` (`bench/`), the `core` and `echo` benches of
//! `weft`, the `http` bench of `weft-load`, the `pg` bench of `weft-pg`, and
//! the lab (`weft-lab`).
//!
//! - [`stats`]: the median of a set of runs (and min..max) — every figure a
//!   harness prints is one.
//! - [`child`]: re-running a harness (or another program) as a child
//!   process with a watchdog, and its peak RSS from `VmHWM`.
//! - [`table`]: the results as a markdown table or an aligned console table.
//! - [`svg`]: a horizontal bar chart, and readable ticks for log-scale axes.
//! - [`format`](mod@format): numbers as people read them (`1,234`, `12.3 k`, `1.21 GiB`).
//! - [`transparent`]: building a program of `tests-transparent/` (the
//!   `transparent` feature) for a harness to run as a child.
//! - [`watchdog`]: aborting a hung test or harness with a report.
//! - [`redis_server`]: a Redis server to talk to — `WEFT_REDIS_URL`, or a
//!   throwaway `redis-server` child.
//!
//! # Examples
//!
//! ```
//! use weft_bench_support::{stats, table::Table};
//!
//! let runs = [98.0, 102.5, 101.0];
//! let s = stats::summary(&runs).unwrap();
//! let mut t = Table::new(["row", "req/s (median)", "min..max"]);
//! t.row([
//!     "hello".to_string(),
//!     format!("{:.1}", s.median),
//!     format!("{:.1}..{:.1}", s.min, s.max),
//! ]);
//! assert_eq!(
//!     t.markdown(),
//!     "| row | req/s (median) | min..max |\n|---|---|---|\n| hello | 101.0 | 98.0..102.5 |\n"
//! );
//! ```

pub mod child;
pub mod format;
pub mod redis_server;
pub mod stats;
pub mod svg;
pub mod table;
pub mod transparent;
pub mod watchdog;
