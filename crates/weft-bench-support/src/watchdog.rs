//! A watchdog for tests and harnesses: a hang must fail loudly, not stall
//! CI.
//!
//! A watchdog tells "stuck" from "slow" by progress, not by total time: it
//! aborts the process when `limit` passes with no progress reported, so a
//! test that runs ten times slower on a loaded machine (two cores shared
//! with other busy processes) still passes, while a lost wake-up, which
//! stops every round, still fails within `limit`. Work reports progress
//! through [`Watchdog::progress`] (one [`Progress::tick`] per completed
//! round, from any thread); work that reports none is held to `limit` in
//! total, so give such work a limit it meets on a loaded machine.
//!
//! ```
//! use std::time::Duration;
//! use weft_bench_support::watchdog::Watchdog;
//!
//! let dog = Watchdog::new("quick work", Duration::from_secs(60), || "what to look at".into());
//! let progress = dog.progress();
//! for _round in 0..3 {
//!     // ... one round of the work that could hang ...
//!     progress.tick();
//! }
//! drop(dog); // disarmed
//! ```

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Aborts the whole process if still armed `limit` after [`Watchdog::new`]
/// or after the last [`Progress::tick`], whichever is later, after writing
/// which work hung, how many rounds it completed and what `report` returns
/// (called only then, on the watchdog's own OS thread). Dropping it
/// disarms it.
pub struct Watchdog {
    done: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    progress: Progress,
}

/// Where work tells its [`Watchdog`] that it moved on: cheap to clone and
/// to send to other threads.
#[derive(Clone, Debug, Default)]
pub struct Progress(Arc<AtomicU64>);

impl Progress {
    /// Reports one completed round. A relaxed increment: the watchdog only
    /// needs to see the count change eventually, and orders nothing by it.
    pub fn tick(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Rounds reported so far.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Watchdog {
    /// Arms a watchdog for the work named `what`.
    pub fn new(
        what: impl Into<String>,
        limit: Duration,
        report: impl FnOnce() -> String + Send + 'static,
    ) -> Watchdog {
        let what = what.into();
        let progress = Progress::default();
        let seen = progress.clone();
        let (done, rx) = mpsc::channel::<()>();
        // Looks at the count ten times per `limit`, so a stall is caught
        // between `limit` and 1.1 × `limit` after the last tick.
        let look = (limit / 10).max(Duration::from_millis(10));
        let thread = std::thread::Builder::new()
            .name(format!("watchdog: {what}"))
            .spawn(move || {
                let mut last = (seen.count(), Instant::now());
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(look) {
                    let count = seen.count();
                    if count != last.0 {
                        last = (count, Instant::now());
                    } else if last.1.elapsed() >= limit {
                        // Straight to fd 2: a test harness captures
                        // eprintln!, and the abort would lose it.
                        let _ = writeln!(
                            std::io::stderr(),
                            "\nWATCHDOG: `{what}` made no progress for {limit:?} (after {count} \
                             rounds); aborting the process: {}",
                            report()
                        );
                        std::process::abort();
                    }
                }
            })
            .expect("spawn watchdog");
        Watchdog {
            done: Some(done),
            thread: Some(thread),
            progress,
        }
    }

    /// The handle through which the watched work reports progress.
    pub fn progress(&self) -> Progress {
        self.progress.clone()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in a child copy of this test binary: arm a watchdog over work
    /// that never reports progress and wait for it to abort the process.
    const STUCK_CHILD: &str = "WEFT_WATCHDOG_TEST_STUCK";

    /// Work that takes more than twice the limit in all, but reports a
    /// round every 10 ms, is slow, not stuck: the watchdog leaves it alone.
    #[test]
    fn slow_work_that_makes_progress_outlives_the_limit() {
        let limit = Duration::from_secs(1);
        let dog = Watchdog::new("slow work", limit, || "slow is not stuck".into());
        let progress = dog.progress();
        let started = Instant::now();
        while started.elapsed() < limit * 5 / 2 {
            std::thread::sleep(Duration::from_millis(10));
            progress.tick();
        }
        drop(dog);
        assert!(progress.count() > 0);
    }

    /// Work that reports no progress is aborted with a message naming it.
    #[test]
    fn stuck_work_aborts_the_process_with_its_name() {
        if std::env::var_os(STUCK_CHILD).is_some() {
            let _dog = Watchdog::new("stuck work", Duration::from_millis(100), || {
                "the report".into()
            });
            loop {
                std::thread::park();
            }
        }
        let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "watchdog::tests::stuck_work_aborts_the_process_with_its_name",
                "--nocapture",
            ])
            .env(STUCK_CHILD, "1")
            .output()
            .expect("run the child");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains("WATCHDOG: `stuck work` made no progress for 100ms")
                && stderr.contains("the report"),
            "{stderr}"
        );
    }
}
