//! Awaiting a thread: [`JoinHandle`] is [`IntoFuture`], on any executor.
//!
//! The future is the handle's one joiner, as `join` is; the join slot's
//! protocol with it is in `join.rs` ("Protocol"). A poll of a thread that is
//! not done registers the poll's waker (replacing the last one unless it
//! would wake the same task) and the finishing thread wakes it; a dropped
//! future detaches the thread, as a dropped handle does. The blocking
//! `join` path is not touched: the one cost to it is the finisher's
//! compare with one more state.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::join::{forget_async_joiner, poll_done};
use super::*;

/// The future of an awaited [`JoinHandle`]: its output is
/// [`join`](JoinHandle::join)'s, `Err` carrying the panic's payload.
///
/// Made by `handle.await` (or `handle.into_future()`). Dropping it before
/// it is ready detaches the thread, as dropping the handle does.
#[must_use = "futures do nothing unless polled; dropping it detaches the thread"]
pub struct JoinFuture<T> {
    /// `None` once the result has been returned.
    handle: Option<JoinHandle<T>>,
}

// The result is never stored in the future: moving it is always fine.
impl<T> Unpin for JoinFuture<T> {}

impl<T> IntoFuture for JoinHandle<T> {
    type Output = std::thread::Result<T>;
    type IntoFuture = JoinFuture<T>;

    /// Waits for the thread without blocking the executor's thread.
    ///
    /// # Examples
    ///
    /// ```
    /// let h = weft::spawn(|| 6 * 7);
    /// let v = futures_executor::block_on(async { h.await.unwrap() });
    /// assert_eq!(v, 42);
    /// ```
    fn into_future(self) -> JoinFuture<T> {
        JoinFuture { handle: Some(self) }
    }
}

impl<T> Future for JoinFuture<T> {
    type Output = std::thread::Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let handle = self
            .handle
            .as_ref()
            .expect("weft: a JoinHandle's future polled after it returned");
        match poll_done(&handle.thread().inner, cx.waker()) {
            None => Poll::Pending,
            Some(done) => {
                let handle = self.handle.take().expect("checked above");
                Poll::Ready(handle.into_result(done))
            }
        }
    }
}

impl<T> Drop for JoinFuture<T> {
    /// Takes back the waker of a last poll, then the handle detaches the
    /// thread (its own `Drop`).
    fn drop(&mut self) {
        if let Some(h) = &self.handle {
            forget_async_joiner(&h.thread().inner);
        }
    }
}

impl<T> fmt::Debug for JoinFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinFuture")
            .field("handle", &self.handle)
            .finish()
    }
}
