//! SIGINT/SIGTERM for [`ServerHandle::serve_until_signal`](crate::ServerHandle::serve_until_signal).
//!
//! Signals are caught with `signal-hook`: its handler only writes to a
//! self-pipe (async-signal-safe), and a watcher thread reads the pipe
//! through `signal_hook::iterator::Signals`. Once per process a second,
//! tiny action is registered for both signals: while no
//! `serve_until_signal` is waiting for a first signal, it runs the
//! signal's default action (terminate). So the signals behave as if
//! uncaught before and after `serve_until_signal`, and a second signal
//! during the drain stops the process at once (the usual "press Ctrl-C
//! twice").

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGINT, SIGTERM};

/// The signals that stop a server.
pub(crate) const SIGNALS: [libc::c_int; 2] = [SIGINT, SIGTERM];

/// `serve_until_signal` calls still waiting for their first signal.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Runs in the signal handler: only an atomic load and
/// `emulate_default_handler`, both async-signal-safe.
fn default_unless_waiting(sig: libc::c_int) {
    if WAITING.load(Ordering::SeqCst) == 0 {
        let _ = signal_hook::low_level::emulate_default_handler(sig);
    }
}

/// Registers [`default_unless_waiting`] for [`SIGNALS`], once per process.
pub(crate) fn install_default_fallback() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), (io::ErrorKind, String)>> = OnceLock::new();
    let r = INSTALLED.get_or_init(|| {
        for sig in SIGNALS {
            // SAFETY: `register` requires an action that is
            // async-signal-safe: `default_unless_waiting` loads an atomic
            // and calls `emulate_default_handler`, which signal-hook
            // documents as async-signal-safe; it neither allocates nor
            // locks.
            let r = unsafe {
                signal_hook::low_level::register(sig, move || default_unless_waiting(sig))
            };
            r.map_err(|e| (e.kind(), e.to_string()))?;
        }
        Ok(())
    });
    r.clone().map_err(|(kind, msg)| {
        io::Error::new(
            kind,
            format!("weft-http: installing signal handlers: {msg}"),
        )
    })
}

/// One `serve_until_signal` waiting for its first signal; counted in
/// [`WAITING`] until released (or dropped).
pub(crate) struct Waiting {
    released: AtomicBool,
}

impl Waiting {
    pub(crate) fn start() -> Waiting {
        WAITING.fetch_add(1, Ordering::SeqCst);
        Waiting {
            released: AtomicBool::new(false),
        }
    }

    /// Stops counting: from now on (if no other call waits) a signal has
    /// its default effect.
    pub(crate) fn release(&self) {
        if !self.released.swap(true, Ordering::SeqCst) {
            WAITING.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.release();
    }
}
