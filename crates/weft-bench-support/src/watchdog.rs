//! A watchdog for tests and harnesses: a hang must fail loudly, not stall
//! CI.
//!
//! ```
//! use std::time::Duration;
//! use weft_bench_support::watchdog::Watchdog;
//!
//! let dog = Watchdog::new("quick work", Duration::from_secs(60), || "what to look at".into());
//! // ... the work that could hang ...
//! drop(dog); // disarmed
//! ```

use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

/// Aborts the whole process if still armed `limit` after [`Watchdog::new`],
/// after writing which work hung and what `report` returns (called only
/// then, on the watchdog's own OS thread). Dropping it disarms it.
pub struct Watchdog {
    done: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Arms a watchdog for the work named `what`.
    pub fn new(
        what: impl Into<String>,
        limit: Duration,
        report: impl FnOnce() -> String + Send + 'static,
    ) -> Watchdog {
        let what = what.into();
        let (done, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("watchdog: {what}"))
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                    // Straight to fd 2: a test harness captures eprintln!,
                    // and the abort would lose it.
                    let _ = writeln!(
                        std::io::stderr(),
                        "\nWATCHDOG: `{what}` not finished after {limit:?}; aborting the process: {}",
                        report()
                    );
                    std::process::abort();
                }
            })
            .expect("spawn watchdog");
        Watchdog {
            done: Some(done),
            thread: Some(thread),
        }
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
