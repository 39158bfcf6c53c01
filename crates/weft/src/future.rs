//! Futures from blocking code: [`block_on`].
//!
//! Inside a virtual thread, `block_on` parks the thread (freeing its
//! carrier) until the future's waker fires; on an OS thread it blocks that
//! thread. There is no nested-runtime check to trip over: weft has no
//! "inside the runtime" context that forbids blocking, so an async library
//! can be called from any virtual thread. With the `tokio` feature it runs
//! the future inside a Tokio runtime's context (the caller's, or one Weft
//! starts: `tokio_context.rs`), so futures that need Tokio's reactor,
//! timers or `spawn` work with nothing set up; weft's own sockets
//! implement `futures-io`/`tokio` I/O traits driven by weft's poller (cargo
//! features `futures-io`, `tokio`).

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::thread::{Thread, current, park_deadline, take_interrupt};

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on the current thread, parking it (virtual)
/// or blocking it (OS) while the future is pending.
///
/// With the `tokio` feature the future runs inside a Tokio runtime's
/// context — the caller's multi-thread runtime if it is in one, else the
/// one given to `RuntimeBuilder::tokio_handle`, else one Weft starts at
/// the first such call — so reqwest, sqlx or a tonic client work with
/// nothing set up (see [`async_interop`](crate::async_interop)).
///
/// Not interruptible: an interrupt that arrives while waiting is kept (the
/// flag stays set for the next interruptible call) and the wait goes on.
///
/// # Examples
///
/// ```
/// let v = weft::spawn(|| {
///     weft::block_on(async {
///         let a = async { 20 };
///         a.await + 22
///     })
/// })
/// .join()
/// .unwrap();
/// assert_eq!(v, 42);
/// ```
pub fn block_on<F: Future>(fut: F) -> F::Output {
    #[cfg(feature = "tokio")]
    {
        let tokio = crate::tokio_context::TokioContext::of_caller();
        tokio.blocking(|| park_on(fut, |f, cx| tokio.entered(|| f.poll(cx))))
    }
    #[cfg(not(feature = "tokio"))]
    park_on(fut, |f, cx| f.poll(cx))
}

/// [`block_on`]'s loop: polls `fut` through `poll` until it is ready,
/// parking between polls.
fn park_on<F: Future>(
    fut: F,
    mut poll: impl FnMut(Pin<&mut F>, &mut Context<'_>) -> Poll<F::Output>,
) -> F::Output {
    let me = current();
    let waker = Waker::from(Arc::new(ThreadWaker(me.clone())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    let mut interrupted = false;
    let out = loop {
        if let Poll::Ready(v) = poll(fut.as_mut(), &mut cx) {
            break v;
        }
        // Clear a pending interrupt so `park` cannot return at once in a
        // loop; it is restored below.
        interrupted |= take_interrupt();
        crate::thread::with_blocker(crate::thread::Blocker::Other("block_on"), || {
            park_deadline(None)
        });
    };
    if interrupted {
        me.interrupt_flag_restore();
    }
    out
}
