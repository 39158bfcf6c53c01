//! Multi-producer, multi-consumer channels whose blocking operations park
//! the virtual thread (Java's `BlockingQueue`, Go's channels).
//!
//! * [`bounded(n)`](bounded) holds at most `n` messages; `send` parks while
//!   it is full. `bounded(0)` is a **rendezvous** channel: every `send`
//!   waits for a `recv` to take its message.
//! * [`unbounded()`](unbounded) never blocks senders.
//!
//! [`Sender`] and [`Receiver`] are both `Clone + Send + Sync` (for
//! `T: Send`): any number of threads — virtual or OS — may send and
//! receive. Each message is received exactly once, in FIFO order per
//! channel. Blocked receivers are served FIFO, and so are blocked senders.
//!
//! # Disconnection (as in `std::sync::mpsc`)
//!
//! * When every `Sender` is dropped, receivers first drain the messages
//!   still buffered, then get `Disconnected`.
//! * When every `Receiver` is dropped, `send` fails with
//!   [`SendError::Disconnected`] giving the message back, senders blocked
//!   in `send` wake up with their message, and buffered messages are
//!   dropped.
//!
//! # Interrupts — where this differs from `std`
//!
//! A thread parked in `send`, `send_timeout`, `recv` or `recv_timeout`
//! returns when it is interrupted ([`Thread::interrupt`](crate::Thread::interrupt)),
//! and the interrupt flag is cleared (Java semantics). Hence the error
//! types carry an `Interrupted` case that std's do not have:
//!
//! * [`RecvError`] is an enum `{ Disconnected, Interrupted }` (std's is a
//!   unit struct); [`RecvTimeoutError`] adds `Interrupted`.
//! * [`SendError<T>`] is an enum `{ Disconnected(T), Interrupted(T) }`
//!   (std's is the tuple struct `SendError(T)`): a send interrupted while
//!   parked on a full (or rendezvous) channel gives the message back too —
//!   nothing is ever lost. [`SendTimeoutError`] likewise.
//!
//! The flag is only looked at when the call has to wait: a `recv` that
//! finds a message returns it even if the flag is set. If a message is
//! handed to a parked receiver (or taken from a parked sender) at the same
//! moment as the interrupt or the timeout, the operation succeeds and the
//! interrupt stays pending. The `try_*` methods never look at the flag.
//! [`Receiver::iter`] ends on disconnection *or* interruption.
//!
//! # Example
//!
//! ```
//! use weft::channel;
//!
//! let (tx, rx) = channel::bounded(16);
//! let producers: Vec<_> = (0..4)
//!     .map(|p| {
//!         let tx = tx.clone();
//!         weft::spawn(move || {
//!             for i in 0..1000u64 {
//!                 tx.send(p * 1000 + i).unwrap();
//!             }
//!         })
//!     })
//!     .collect();
//! drop(tx); // the receiver's iterator ends when all producers are done
//! let sum: u64 = rx.iter().sum();
//! assert_eq!(sum, (0..4000).sum::<u64>());
//! for p in producers {
//!     p.join().unwrap();
//! }
//! ```
//!
//! A rendezvous channel and a timeout:
//!
//! ```
//! use std::time::Duration;
//! use weft::channel::{self, RecvTimeoutError};
//!
//! let (tx, rx) = channel::bounded::<&str>(0);
//! assert_eq!(rx.recv_timeout(Duration::from_millis(10)), Err(RecvTimeoutError::Timeout));
//! let t = weft::spawn(move || tx.send("hello").unwrap()); // waits for the receiver
//! assert_eq!(rx.recv(), Ok("hello"));
//! t.join().unwrap();
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sync::facade::{self, AtomicUsize, Interrupts, Lock, Ordering};
use crate::sync::waitq::{WaitList, Waiter, Wake};

mod error;

pub use error::{
    RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};

/// Token: the message was handed over (to a receiver's slot, or taken from
/// a sender's slot).
const DELIVERED: usize = 1;
/// Token: the other side is gone.
const DISCONNECTED: usize = 2;

/// Creates a channel that buffers at most `cap` messages; `bounded(0)` is a
/// rendezvous channel.
///
/// # Examples
///
/// ```
/// let (tx, rx) = weft::channel::bounded(1);
/// tx.send(1).unwrap();
/// assert!(tx.try_send(2).is_err()); // full
/// assert_eq!(rx.recv(), Ok(1));
/// ```
#[must_use]
pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    new_channel(cap)
}

/// Creates a channel with an unlimited buffer: `send` never blocks.
///
/// # Examples
///
/// ```
/// let (tx, rx) = weft::channel::unbounded();
/// for i in 0..1000 {
///     tx.send(i).unwrap();
/// }
/// drop(tx);
/// assert_eq!(rx.iter().count(), 1000);
/// ```
#[must_use]
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    new_channel(usize::MAX)
}

fn new_channel<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        inner: Lock::new(Inner {
            buf: VecDeque::new(),
            sendq: WaitList::new(),
            recvq: WaitList::new(),
            senders_gone: false,
            receivers_gone: false,
        }),
        cap,
        senders: AtomicUsize::new(1),
        receivers: AtomicUsize::new(1),
    });
    (
        Sender {
            chan: Arc::clone(&chan),
        },
        Receiver { chan },
    )
}

struct Chan<T> {
    inner: Lock<Inner<T>>,
    /// `usize::MAX` for unbounded.
    cap: usize,
    senders: AtomicUsize,
    receivers: AtomicUsize,
}

struct Inner<T> {
    buf: VecDeque<T>,
    /// Senders parked on a full buffer; each slot holds its message until a
    /// receiver takes it (or it is given back on timeout/interrupt/disconnect).
    sendq: WaitList<Option<T>>,
    /// Receivers parked on an empty buffer; a sender fills the slot.
    recvq: WaitList<Option<T>>,
    senders_gone: bool,
    receivers_gone: bool,
}

/// How long an operation may wait.
#[derive(Clone, Copy)]
enum Block {
    /// `try_*`: not at all.
    No,
    /// Until the deadline (`None` = forever).
    Until(Option<Instant>),
}

impl Block {
    fn timeout(d: Duration) -> Block {
        Block::Until(facade::deadline_after(d))
    }
}

enum SendFail<T> {
    Full(T),
    Disconnected(T),
    Timeout(T),
    Interrupted(T),
}

enum RecvFail {
    Empty,
    Disconnected,
    Timeout,
    Interrupted,
}

impl<T> Chan<T> {
    fn send(&self, value: T, block: Block) -> Result<(), SendFail<T>> {
        let mut inner = self.inner.lock();
        if inner.receivers_gone {
            return Err(SendFail::Disconnected(value));
        }
        if let Some(mut r) = inner.recvq.pop_front() {
            drop(inner);
            r.with_slot(|slot| *slot = Some(value));
            r.notify(DELIVERED);
            return Ok(());
        }
        if inner.buf.len() < self.cap {
            inner.buf.push_back(value);
            return Ok(());
        }
        let deadline = match block {
            Block::No => return Err(SendFail::Full(value)),
            Block::Until(d) => d,
        };
        self.send_slow(inner, value, deadline)
    }

    #[cold]
    #[inline(never)]
    fn send_slow(
        &self,
        mut inner: facade::LockGuard<'_, Inner<T>>,
        value: T,
        deadline: Option<Instant>,
    ) -> Result<(), SendFail<T>> {
        let node = pin!(Waiter::new(Some(value)));
        // SAFETY: fresh node; we return only after `wait` returned.
        unsafe { inner.sendq.push_back(node.as_ref()) };
        drop(inner);
        let mut intr = Interrupts::interruptible();
        let wake =
            crate::thread::with_blocker(crate::thread::Blocker::Channel { recv: false }, || {
                node.as_ref().wait(deadline, &mut intr, || {
                    // SAFETY: if queued, the node is in this channel's send queue.
                    unsafe { self.inner.lock().sendq.remove(&node) }
                })
            });
        // SAFETY: `wait` returned: the node is unqueued and nobody else
        // refers to it.
        let take = || unsafe { node.with_slot(Option::take) }.expect("message still in the slot");
        match wake {
            Wake::Notified(DELIVERED) => Ok(()),
            Wake::Notified(_) => Err(SendFail::Disconnected(take())),
            Wake::TimedOut => Err(SendFail::Timeout(take())),
            Wake::Interrupted => Err(SendFail::Interrupted(take())),
        }
    }

    fn recv(&self, block: Block) -> Result<T, RecvFail> {
        let mut inner = self.inner.lock();
        if let Some(value) = inner.buf.pop_front() {
            // A slot freed up: move the first parked sender's message in.
            let sender = inner.sendq.pop_front().map(|mut s| {
                let m = s
                    .with_slot(Option::take)
                    .expect("parked sender has a message");
                inner.buf.push_back(m);
                s
            });
            drop(inner);
            if let Some(s) = sender {
                s.notify(DELIVERED);
            }
            return Ok(value);
        }
        // Empty buffer with a parked sender: rendezvous channel.
        if let Some(mut s) = inner.sendq.pop_front() {
            drop(inner);
            let value = s
                .with_slot(Option::take)
                .expect("parked sender has a message");
            s.notify(DELIVERED);
            return Ok(value);
        }
        if inner.senders_gone {
            return Err(RecvFail::Disconnected);
        }
        let deadline = match block {
            Block::No => return Err(RecvFail::Empty),
            Block::Until(d) => d,
        };
        self.recv_slow(inner, deadline)
    }

    #[cold]
    #[inline(never)]
    fn recv_slow(
        &self,
        mut inner: facade::LockGuard<'_, Inner<T>>,
        deadline: Option<Instant>,
    ) -> Result<T, RecvFail> {
        let node = pin!(Waiter::new(None));
        // SAFETY: fresh node; we return only after `wait` returned.
        unsafe { inner.recvq.push_back(node.as_ref()) };
        drop(inner);
        let mut intr = Interrupts::interruptible();
        let wake =
            crate::thread::with_blocker(crate::thread::Blocker::Channel { recv: true }, || {
                node.as_ref().wait(deadline, &mut intr, || {
                    // SAFETY: if queued, the node is in this channel's receive queue.
                    unsafe { self.inner.lock().recvq.remove(&node) }
                })
            });
        match wake {
            Wake::Notified(DELIVERED) => {
                // SAFETY: `wait` returned: the node is ours alone again.
                let value = unsafe { node.with_slot(Option::take) };
                Ok(value.expect("delivered message"))
            }
            Wake::Notified(_) => Err(RecvFail::Disconnected),
            Wake::TimedOut => Err(RecvFail::Timeout),
            Wake::Interrupted => Err(RecvFail::Interrupted),
        }
    }

    fn disconnect_senders(&self) {
        let receivers = {
            let mut inner = self.inner.lock();
            inner.senders_gone = true;
            inner.recvq.drain()
        };
        receivers.notify_all(DISCONNECTED);
    }

    fn disconnect_receivers(&self) {
        let (senders, buffered) = {
            let mut inner = self.inner.lock();
            inner.receivers_gone = true;
            (inner.sendq.drain(), std::mem::take(&mut inner.buf))
        };
        senders.notify_all(DISCONNECTED);
        // Dropped outside the lock: a message's `Drop` may do anything.
        drop(buffered);
    }

    fn len(&self) -> usize {
        self.inner.lock().buf.len()
    }

    fn capacity(&self) -> Option<usize> {
        (self.cap != usize::MAX).then_some(self.cap)
    }
}

/// The sending half of a channel. Clone it for more producers.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half of a channel. Clone it for more consumers; each
/// message goes to exactly one of them.
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

impl<T> Sender<T> {
    /// Sends `value`, parking while a bounded channel is full (for a
    /// rendezvous channel: until a receiver takes it).
    ///
    /// # Errors
    ///
    /// [`SendError::Disconnected`] if every receiver is gone (also when
    /// that happens while parked), [`SendError::Interrupted`] if the thread
    /// is interrupted while parked (flag cleared). Both give `value` back.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.chan
            .send(value, Block::Until(None))
            .map_err(|e| match e {
                SendFail::Disconnected(v) => SendError::Disconnected(v),
                SendFail::Interrupted(v) => SendError::Interrupted(v),
                SendFail::Full(_) | SendFail::Timeout(_) => unreachable!("send has no timeout"),
            })
    }

    /// Sends `value` if that is possible without waiting (rendezvous: only
    /// if a receiver is parked right now).
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] or [`TrySendError::Disconnected`], with the
    /// value.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.chan.send(value, Block::No).map_err(|e| match e {
            SendFail::Full(v) => TrySendError::Full(v),
            SendFail::Disconnected(v) => TrySendError::Disconnected(v),
            SendFail::Timeout(_) | SendFail::Interrupted(_) => unreachable!("try_send never waits"),
        })
    }

    /// Sends `value`, parking for at most `timeout` while the channel is
    /// full.
    ///
    /// # Errors
    ///
    /// [`SendTimeoutError`]: `Timeout`, `Disconnected` or `Interrupted`,
    /// each with the value.
    pub fn send_timeout(&self, value: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        self.chan
            .send(value, Block::timeout(timeout))
            .map_err(|e| match e {
                SendFail::Full(v) | SendFail::Timeout(v) => SendTimeoutError::Timeout(v),
                SendFail::Disconnected(v) => SendTimeoutError::Disconnected(v),
                SendFail::Interrupted(v) => SendTimeoutError::Interrupted(v),
            })
    }

    /// Sends `value`, parking at most until `deadline`.
    ///
    /// # Errors
    ///
    /// As [`send_timeout`](Sender::send_timeout).
    pub fn send_deadline(&self, value: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
        self.chan
            .send(value, Block::Until(Some(deadline)))
            .map_err(|e| match e {
                SendFail::Full(v) | SendFail::Timeout(v) => SendTimeoutError::Timeout(v),
                SendFail::Disconnected(v) => SendTimeoutError::Disconnected(v),
                SendFail::Interrupted(v) => SendTimeoutError::Interrupted(v),
            })
    }

    /// Number of buffered messages.
    pub fn len(&self) -> usize {
        self.chan.len()
    }

    /// No buffered messages?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Is the buffer full? (Always `true` for a rendezvous channel, never
    /// for an unbounded one.)
    pub fn is_full(&self) -> bool {
        self.capacity().is_some_and(|c| self.len() >= c)
    }

    /// The buffer size (`Some(0)` for rendezvous), `None` if unbounded.
    pub fn capacity(&self) -> Option<usize> {
        self.chan.capacity()
    }

    /// Do both handles belong to the same channel?
    pub fn same_channel(&self, other: &Sender<T>) -> bool {
        Arc::ptr_eq(&self.chan, &other.chan)
    }
}

impl<T> Receiver<T> {
    /// Receives a message, parking while the channel is empty.
    ///
    /// # Errors
    ///
    /// [`RecvError::Disconnected`] once the channel is empty and every
    /// sender is gone; [`RecvError::Interrupted`] if the thread is
    /// interrupted while parked (flag cleared).
    pub fn recv(&self) -> Result<T, RecvError> {
        self.chan.recv(Block::Until(None)).map_err(|e| match e {
            RecvFail::Disconnected => RecvError::Disconnected,
            RecvFail::Interrupted => RecvError::Interrupted,
            RecvFail::Empty | RecvFail::Timeout => unreachable!("recv has no timeout"),
        })
    }

    /// Receives a message if one is available without waiting.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] or [`TryRecvError::Disconnected`].
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.chan.recv(Block::No).map_err(|e| match e {
            RecvFail::Empty => TryRecvError::Empty,
            RecvFail::Disconnected => TryRecvError::Disconnected,
            RecvFail::Timeout | RecvFail::Interrupted => unreachable!("try_recv never waits"),
        })
    }

    /// Receives a message, parking for at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError`]: `Timeout`, `Disconnected` or `Interrupted`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_block(Block::timeout(timeout))
    }

    /// Receives a message, parking at most until `deadline`.
    ///
    /// # Errors
    ///
    /// As [`recv_timeout`](Receiver::recv_timeout).
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.recv_block(Block::Until(Some(deadline)))
    }

    fn recv_block(&self, block: Block) -> Result<T, RecvTimeoutError> {
        self.chan.recv(block).map_err(|e| match e {
            RecvFail::Empty | RecvFail::Timeout => RecvTimeoutError::Timeout,
            RecvFail::Disconnected => RecvTimeoutError::Disconnected,
            RecvFail::Interrupted => RecvTimeoutError::Interrupted,
        })
    }

    /// A blocking iterator: yields messages until the channel is
    /// disconnected and drained, or the thread is interrupted.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// A non-blocking iterator over the messages available right now.
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }

    /// Number of buffered messages.
    pub fn len(&self) -> usize {
        self.chan.len()
    }

    /// No buffered messages?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Is the buffer full? (Always `true` for a rendezvous channel, never
    /// for an unbounded one.)
    pub fn is_full(&self) -> bool {
        self.capacity().is_some_and(|c| self.len() >= c)
    }

    /// The buffer size (`Some(0)` for rendezvous), `None` if unbounded.
    pub fn capacity(&self) -> Option<usize> {
        self.chan.capacity()
    }

    /// Do both handles belong to the same channel?
    pub fn same_channel(&self, other: &Receiver<T>) -> bool {
        Arc::ptr_eq(&self.chan, &other.chan)
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.senders.fetch_add(1, Ordering::Relaxed);
        Sender {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.chan.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.chan.disconnect_senders();
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.chan.receivers.fetch_add(1, Ordering::Relaxed);
        Receiver {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        if self.chan.receivers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.chan.disconnect_receivers();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

/// Blocking iterator from [`Receiver::iter`].
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

/// Non-blocking iterator from [`Receiver::try_iter`].
#[derive(Debug)]
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

/// Owning blocking iterator (`for msg in receiver`).
#[derive(Debug)]
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        IntoIter { rx: self }
    }
}
