//! One progress bar per experiment on a terminal; silent when standard
//! error is not a terminal or `CI` is set to `true`.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar counting an experiment's configurations.
pub struct Progress {
    bar: ProgressBar,
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
        Progress { bar }
    }

    /// A bar that never draws (for tests and library use).
    pub fn hidden() -> Progress {
        Progress {
            bar: ProgressBar::hidden(),
        }
    }

    /// Says which configuration runs now.
    pub fn start(&self, what: &str) {
        self.bar.set_message(what.to_string());
    }

    /// One configuration done.
    pub fn step(&self) {
        self.bar.inc(1);
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
