//! One progress bar per experiment on a terminal; elsewhere (a pipe, a
//! log file, `CI=true`) one line on stderr per configuration as it starts,
//! with the time since the experiment began, so a long run shows where it
//! is.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar counting an experiment's configurations.
pub struct Progress {
    bar: ProgressBar,
    // Without a bar: log a line per configuration (`None`: stay silent).
    log: Option<Log>,
}

struct Log {
    id: String,
    steps: u64,
    started: Instant,
    done: AtomicU64,
}

/// Whether bars are drawn: stderr is a terminal and `CI` is not `true`.
pub fn enabled() -> bool {
    std::io::stderr().is_terminal() && std::env::var("CI").map_or(true, |v| v != "true")
}

impl Progress {
    /// A bar for `id` with `steps` configurations.
    pub fn new(id: &str, steps: u64) -> Progress {
        let bar = ProgressBar::with_draw_target(
            Some(steps),
            if enabled() {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        bar.set_style(
            ProgressStyle::with_template("{prefix:>3} [{bar:30}] {pos}/{len} {elapsed:>4} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(id.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        let log = (!enabled()).then(|| Log {
            id: id.to_string(),
            steps,
            started: Instant::now(),
            done: AtomicU64::new(0),
        });
        Progress { bar, log }
    }

    /// A bar that never draws (for tests and library use).
    pub fn hidden() -> Progress {
        Progress {
            bar: ProgressBar::hidden(),
            log: None,
        }
    }

    /// Says which configuration runs now.
    pub fn start(&self, what: &str) {
        self.bar.set_message(what.to_string());
        if let Some(log) = &self.log {
            eprintln!(
                "[{:>6.1} s] {} {}/{}: {what}",
                log.started.elapsed().as_secs_f64(),
                log.id,
                log.done.load(Ordering::Relaxed) + 1,
                log.steps
            );
        }
    }

    /// One configuration done.
    pub fn step(&self) {
        self.bar.inc(1);
        if let Some(log) = &self.log {
            log.done.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Runs `f` with the bar cleared from the screen, so that what `f`
    /// writes to the terminal (a child's output) is not drawn over.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Whether a bar is drawn (else [`Progress::start`] logs a line).
    pub fn draws(&self) -> bool {
        !self.bar.is_hidden()
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
