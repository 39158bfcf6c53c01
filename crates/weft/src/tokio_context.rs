//! The Tokio context [`block_on`](crate::block_on) runs a future in
//! (feature `tokio`).
//!
//! Async crates built on Tokio — reqwest, sqlx, tonic, hyper's clients —
//! look for a runtime in the calling thread's Tokio context to register
//! sockets and timers with, and to `tokio::spawn` onto, and panic if they
//! find none. So `block_on` picks a runtime once per call and enters it
//! around each poll of its future:
//!
//! 1. the one the calling thread is already in (`Handle::try_current`:
//!    `#[tokio::main]`, a task, an entered runtime), if it is a
//!    multi-thread runtime, whose reactor and timers its other threads
//!    drive while this one blocks;
//! 2. else, on a virtual thread, the one given to its Weft runtime's
//!    builder ([`RuntimeBuilder::tokio_handle`](crate::RuntimeBuilder::tokio_handle));
//! 3. else Weft's own: a multi-thread Tokio runtime started by the first
//!    `block_on` of the process copy that finds neither (a `fork` child
//!    starts its own), whether or not its future needs Tokio,
//!    with `WEFT_TOKIO_THREADS` worker threads (default
//!    [`DEFAULT_TOKIO_THREADS`]) named `weft-tokio-N`.
//!
//! A current-thread runtime found in step 1 is passed over: only the thread
//! inside its `block_on` drives its reactor and timers, and that may be
//! this thread, which is about to block — a future waiting on it would wait
//! for ever (Tokio's own `Handle::block_on` panics there instead).
//!
//! The context is entered around each poll and left before the thread
//! parks: a virtual thread that shares its carrier's thread-locals
//! (`RuntimeBuilder::carrier_thread_locals`) leaves nothing of it in the
//! carrier's context for the carrier's next thread, and guards are never
//! dropped out of order. Entering nests; it is not a `block_on` of Tokio's,
//! so no "Cannot start a runtime from within a runtime" panic can come of
//! it, wherever `block_on` is called.
//!
//! On a worker thread of a multi-thread runtime (inside a task), the wait
//! goes through `tokio::task::block_in_place`: the worker's other tasks
//! and its share of driving the reactor move to another thread, so a
//! future that needs that runtime makes progress even with one worker.
//!
//! Weft's own runtime is never shut down before the process exits: it is
//! what every `block_on` of the process may be polling through, up to the
//! exit, and a Tokio runtime shut down under a pending timer or socket
//! makes its next use panic ("the timer is shutdown"). Its workers sleep
//! in the kernel while there is nothing to do; at exit they end with the
//! process, as Weft's carriers do.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::{Handle, RuntimeFlavor};

/// Worker threads of Weft's own Tokio runtime unless `WEFT_TOKIO_THREADS`
/// says otherwise. The futures of `block_on` are polled on their own
/// (virtual) threads, not there: these threads drive the reactor and
/// timers and run what the futures `tokio::spawn` (connection tasks of an
/// HTTP client's pool, say), so two are enough for most programs.
pub const DEFAULT_TOKIO_THREADS: usize = 2;

/// The Tokio runtime one `block_on` runs its future in.
pub(crate) struct TokioContext {
    /// Entered around each poll; `None` when the calling thread is in the
    /// chosen runtime's context already.
    enter: Option<Handle>,
    /// The caller is a task on a multi-thread runtime's worker: it blocks
    /// through `block_in_place`.
    in_worker: bool,
}

impl TokioContext {
    /// The calling thread's context, chosen as the module docs say.
    pub(crate) fn of_caller() -> TokioContext {
        if let Ok(h) = Handle::try_current()
            && matches!(h.runtime_flavor(), RuntimeFlavor::MultiThread)
        {
            return TokioContext {
                enter: None,
                in_worker: tokio::task::try_id().is_some(),
            };
        }
        let given = crate::runtime::current().and_then(|rt| rt.tokio_handle().cloned());
        TokioContext {
            enter: Some(given.unwrap_or_else(|| own().clone())),
            in_worker: false,
        }
    }

    /// Runs `poll` inside the runtime's context.
    #[inline]
    pub(crate) fn entered<R>(&self, poll: impl FnOnce() -> R) -> R {
        let _entered = self.enter.as_ref().map(Handle::enter);
        poll()
    }

    /// Runs `wait`, the whole blocking loop, so that it does not hold up a
    /// Tokio worker's other tasks.
    pub(crate) fn blocking<R>(&self, wait: impl FnOnce() -> R) -> R {
        if self.in_worker {
            tokio::task::block_in_place(wait)
        } else {
            wait()
        }
    }
}

/// Weft's own Tokio runtime, started at its first use in this process copy.
fn own() -> &'static Handle {
    static OWN: crate::fork::PerProcess<tokio::runtime::Runtime> = crate::fork::PerProcess::new();
    OWN.get_or_init(start).handle()
}

/// Starts Weft's own Tokio runtime. A failure (no OS thread could be
/// started) cannot be returned from `block_on`: it panics, saying why.
#[cold]
fn start() -> tokio::runtime::Runtime {
    let workers = crate::knob::count("WEFT_TOKIO_THREADS", DEFAULT_TOKIO_THREADS, 1, "threads");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name_fn(|| {
            static N: AtomicUsize = AtomicUsize::new(0);
            format!("weft-tokio-{}", N.fetch_add(1, Ordering::Relaxed))
        })
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("weft: cannot start the Tokio runtime of block_on: {e}"))
}
