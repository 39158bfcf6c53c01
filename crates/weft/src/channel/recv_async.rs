//! An async receive: [`Receiver::recv_async`], for async code on any
//! executor.
//!
//! # Protocol (no lost wake-ups)
//!
//! A pending receive registers its task's waker in the channel's
//! [`AsyncWaiters`] (FIFO, under the channel's lock), then tries to
//! receive again; a sender that makes a message available — into the
//! buffer, or parked with it in the send queue of a rendezvous channel —
//! takes the first waker off the queue in the same critical section and
//! wakes it after the lock is released. Either the sender's critical
//! section comes first, and the second try finds the message, or it comes
//! after the registration and wakes the receive. The last sender's drop
//! wakes every waiting receive (disconnection).
//!
//! One message wakes one receive. A woken receive that finds the message
//! gone (taken by another receiver) registers again; one that is dropped
//! instead hands its wake-up on to the next waiting receive if a message
//! is there, so a message never waits while a receive sleeps. A re-poll
//! replaces the registered waker unless it would wake the same task.
//!
//! Blocked (parked) receivers are served first: a sender hands a message
//! straight to one of them, as before, and the async receives wait for
//! the next. A rendezvous `try_send` succeeds only with a parked receiver,
//! not with a waiting async receive (which has no slot to hand to).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::{Inner, Receiver, RecvError, TryRecvError};

/// Async receives waiting for a message, in the order they first waited,
/// each under a key that grows with every registration (so the queue is
/// sorted by key).
pub(super) struct AsyncWaiters {
    queue: VecDeque<(u64, Waker)>,
    next_key: u64,
}

impl AsyncWaiters {
    pub(super) const fn new() -> AsyncWaiters {
        AsyncWaiters {
            queue: VecDeque::new(),
            next_key: 0,
        }
    }

    /// Takes the first waiting receive's waker, to wake once the lock is
    /// released: a message was just made available.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Waker> {
        if self.queue.is_empty() {
            return None;
        }
        self.queue.pop_front().map(|(_, w)| w)
    }

    /// Takes every waiting receive's waker (the channel is disconnected).
    pub(super) fn drain(&mut self) -> Vec<Waker> {
        self.queue.drain(..).map(|(_, w)| w).collect()
    }

    /// Registers `waker` under `*key`: in place if that entry still waits,
    /// else (first poll, or woken since) as a new entry at the back.
    fn register(&mut self, key: &mut Option<u64>, waker: &Waker) {
        if let Some(k) = *key
            && let Ok(i) = self.queue.binary_search_by_key(&k, |(k, _)| *k)
        {
            let slot = &mut self.queue[i].1;
            if !slot.will_wake(waker) {
                *slot = waker.clone();
            }
            return;
        }
        let k = self.next_key;
        self.next_key += 1;
        self.queue.push_back((k, waker.clone()));
        *key = Some(k);
    }

    /// Removes the entry under `key`; `false` if a sender took it (woke it).
    fn remove(&mut self, key: u64) -> bool {
        match self.queue.binary_search_by_key(&key, |(k, _)| *k) {
            Ok(i) => {
                self.queue.remove(i);
                true
            }
            Err(_) => false,
        }
    }
}

/// Whether a message is there for a receiver to take.
fn has_message<T>(inner: &Inner<T>) -> bool {
    !inner.buf.is_empty() || !inner.sendq.is_empty()
}

impl<T> Receiver<T> {
    /// Receives a message without blocking the thread: a future that is
    /// ready with the next message, or with
    /// [`RecvError::Disconnected`] once the channel is empty and every
    /// sender is gone. For async code on any executor (a `#[tokio::main]`
    /// program fed by virtual threads, say).
    ///
    /// Cancel it by dropping it: no message is lost (one is taken only by
    /// the poll that returns it). It never returns
    /// [`RecvError::Interrupted`]: interrupts are for parked threads.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = weft::channel::bounded(1);
    /// let producer = weft::spawn(move || {
    ///     for i in 0..10u64 {
    ///         tx.send(i).unwrap();
    ///     }
    /// });
    /// let sum = futures_executor::block_on(async {
    ///     let mut sum = 0;
    ///     while let Ok(i) = rx.recv_async().await {
    ///         sum += i;
    ///     }
    ///     sum
    /// });
    /// assert_eq!(sum, 45);
    /// producer.join().unwrap();
    /// ```
    pub fn recv_async(&self) -> RecvFuture<'_, T> {
        RecvFuture {
            rx: self,
            key: None,
        }
    }
}

/// The future of [`Receiver::recv_async`].
#[must_use = "futures do nothing unless polled"]
pub struct RecvFuture<'a, T> {
    rx: &'a Receiver<T>,
    /// Its entry in the channel's [`AsyncWaiters`], once it waited.
    key: Option<u64>,
}

impl<T> RecvFuture<'_, T> {
    /// One non-blocking receive, as the poll's result if it ends the wait.
    fn try_once(&self) -> Option<Result<T, RecvError>> {
        match self.rx.try_recv() {
            Ok(v) => Some(Ok(v)),
            Err(TryRecvError::Disconnected) => Some(Err(RecvError::Disconnected)),
            Err(TryRecvError::Empty) => None,
        }
    }

    /// Leaves the wait: removes its entry, and if a sender took it (a
    /// wake-up this receive will not use) while a message waits, wakes
    /// the next waiting receive in its place. `got` says whether this
    /// receive took a message (then the wake-up was used).
    fn leave(&mut self, got: bool) {
        let Some(key) = self.key.take() else { return };
        let next = {
            let mut inner = self.rx.chan.inner.lock();
            let woken = !inner.async_recvq.remove(key);
            if woken && !got && has_message(&inner) {
                inner.async_recvq.pop()
            } else {
                None
            }
        };
        if let Some(w) = next {
            w.wake();
        }
    }
}

impl<T> Future for RecvFuture<'_, T> {
    type Output = Result<T, RecvError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Some(r) = this.try_once() {
            this.leave(r.is_ok());
            return Poll::Ready(r);
        }
        this.rx
            .chan
            .inner
            .lock()
            .async_recvq
            .register(&mut this.key, cx.waker());
        // A message sent before the registration found no waker to wake.
        match this.try_once() {
            Some(r) => {
                this.leave(r.is_ok());
                Poll::Ready(r)
            }
            None => Poll::Pending,
        }
    }
}

impl<T> Drop for RecvFuture<'_, T> {
    fn drop(&mut self) {
        self.leave(false);
    }
}

impl<T> std::fmt::Debug for RecvFuture<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvFuture").finish_non_exhaustive()
    }
}
