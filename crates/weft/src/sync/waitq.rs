//! The wait queue shared by every blocking primitive.
//!
//! # Shape
//!
//! A [`Waiter`] is a node that lives **on the blocked thread's own stack**
//! (virtual-thread stacks stay put while parked), pinned for the duration of
//! the wait. A [`WaitList`] is an intrusive doubly-linked list of such nodes;
//! it is always stored inside the owning primitive's short internal
//! [`Lock`](super::facade::Lock), so every list operation happens with that
//! lock held and is O(1) (enqueue at either end, dequeue at the head, removal
//! of an arbitrary node on timeout/interrupt). No allocation, ever.
//!
//! # Protocol (no lost wake-ups)
//!
//! * A waiter links its node while holding the owner's lock, releases the
//!   lock, then loops: `state != WAITING`? done : park.
//! * A notifier, holding the lock, unlinks the node ([`WaitList::pop_front`]
//!   / [`WaitList::drain`]), which yields a [`Notifier`]; from that moment
//!   the node is *detached*: only the notifier touches it (it may fill the
//!   node's slot, e.g. hand over a channel message). After releasing the
//!   lock the notifier clones the thread handle, publishes a non-zero token
//!   with a `Release` store to `state` — after which the node may vanish —
//!   and unparks the clone. The park permit makes the unpark stick even if
//!   the waiter has not parked yet.
//! * A waiter that gives up (deadline, interrupt) takes the lock and tries
//!   to unlink itself. If its node is still queued it leaves empty-handed.
//!   If not, a notifier already owns it: the notification is in flight and
//!   *must be accepted* (a permit, the lock, a message was handed to it), so
//!   the waiter waits for the token, which comes promptly because notifiers
//!   never block between detaching and notifying.
//!
//! Every internal lock is released before any `park`.

use std::cell::UnsafeCell as StdUnsafeCell;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::ptr::NonNull;
use std::time::Instant;

use super::facade::{self, AtomicUsize, Interrupts, Ordering, Thread, UnsafeCell};

/// `Waiter::state` while the waiter has not been notified.
const WAITING: usize = 0;

/// Why [`Waiter::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A notifier detached the node and published this (non-zero) token.
    Notified(usize),
    /// The deadline passed and the waiter removed itself from the queue.
    TimedOut,
    /// The thread was interrupted (the flag has been cleared) and the waiter
    /// removed itself from the queue.
    Interrupted,
}

struct Links<P> {
    prev: Option<NonNull<Waiter<P>>>,
    next: Option<NonNull<Waiter<P>>>,
    queued: bool,
}

/// One blocked thread. Lives on that thread's stack, pinned while queued.
pub(crate) struct Waiter<P> {
    /// `WAITING`, or the token a notifier published.
    state: AtomicUsize,
    /// Whom to unpark.
    thread: Thread,
    /// List links; only touched with the owning queue's lock held (or, once
    /// detached, by the notifier that detached the node).
    links: StdUnsafeCell<Links<P>>,
    /// Data exchanged with the notifier (a channel message, a lock mode).
    slot: UnsafeCell<P>,
    _pin: PhantomPinned,
}

impl<P> Waiter<P> {
    /// A fresh, unqueued node for the current thread.
    pub(crate) fn new(slot: P) -> Self {
        Waiter {
            state: AtomicUsize::new(WAITING),
            thread: facade::current(),
            links: StdUnsafeCell::new(Links {
                prev: None,
                next: None,
                queued: false,
            }),
            slot: UnsafeCell::new(slot),
            _pin: PhantomPinned,
        }
    }

    /// Makes a notified node reusable for another wait.
    ///
    /// Only called by the owning thread after `wait` returned `Notified`:
    /// the node is then unqueued and no notifier refers to it any more.
    pub(crate) fn reset(&self) {
        self.state.store(WAITING, Ordering::Relaxed);
    }

    /// Accesses the slot from the waiting thread.
    ///
    /// # Safety
    ///
    /// The node must be neither queued nor detached-but-not-yet-notified:
    /// i.e. before it was pushed, or after `wait` returned.
    pub(crate) unsafe fn with_slot<R>(&self, f: impl FnOnce(&mut P) -> R) -> R {
        // SAFETY: per the contract nobody else can reach the node now.
        self.slot.with_mut(|p| f(unsafe { &mut *p }))
    }

    /// Blocks until notified, until `deadline`, or (if `intr` says so) until
    /// interrupted.
    ///
    /// `cancel` is called at most once, when giving up: it must take the
    /// owner's lock and return `true` if it unlinked this node (it was still
    /// queued), `false` if the node had already been detached by a notifier,
    /// in which case `wait` waits for that notification and returns it.
    pub(crate) fn wait(
        self: Pin<&Self>,
        deadline: Option<Instant>,
        intr: &mut Interrupts,
        cancel: impl FnOnce() -> bool,
    ) -> Wake {
        // If the thread unwinds out of here (a virtual thread whose suspended
        // coroutine is dropped is force-unwound from its park), the node must
        // not stay linked: it is about to be freed with the stack.
        let mut guard = UnwindGuard {
            waiter: &self,
            cancel: Some(cancel),
        };
        loop {
            let token = self.state.load(Ordering::Acquire);
            if token != WAITING {
                return Wake::Notified(token);
            }
            if facade::interrupt_pending() {
                if intr.is_interruptible() {
                    if guard.cancel() {
                        facade::take_interrupt();
                        return Wake::Interrupted;
                    }
                    return Wake::Notified(self.wait_in_flight());
                }
                intr.swallow();
                continue;
            }
            if deadline.is_some_and(facade::expired) {
                if guard.cancel() {
                    return Wake::TimedOut;
                }
                return Wake::Notified(self.wait_in_flight());
            }
            facade::park(deadline);
        }
    }

    /// The node was detached by a notifier that has not published its token
    /// yet; it will do so (and unpark us) without blocking.
    #[cold]
    fn wait_in_flight(&self) -> usize {
        loop {
            let token = self.state.load(Ordering::Acquire);
            if token != WAITING {
                return token;
            }
            if facade::interrupt_pending() {
                // `park` would return at once: this is a short spin until
                // the notifier's store lands.
                facade::relax();
            } else {
                facade::park(None);
            }
        }
    }

    fn links(&self) -> *mut Links<P> {
        self.links.get()
    }
}

/// Unlinks the waiter if its thread unwinds while it is queued.
struct UnwindGuard<'a, P, F: FnOnce() -> bool> {
    waiter: &'a Waiter<P>,
    cancel: Option<F>,
}

impl<P, F: FnOnce() -> bool> UnwindGuard<'_, P, F> {
    /// Runs the cancel closure (once).
    fn cancel(&mut self) -> bool {
        match self.cancel.take() {
            Some(c) => c(),
            None => false,
        }
    }
}

impl<P, F: FnOnce() -> bool> Drop for UnwindGuard<'_, P, F> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        // Unwinding: if still queued, unlink; if a notifier detached the
        // node, wait (without parking) until it is done with it. Whatever it
        // handed over is lost with the dying thread, but memory stays safe.
        if self.cancel.is_some() && !self.cancel() {
            while self.waiter.state.load(Ordering::Acquire) == WAITING {
                facade::relax();
            }
        }
    }
}

/// An intrusive FIFO of [`Waiter`]s. Always lives inside the owning
/// primitive's internal lock; `&mut WaitList` therefore means "lock held".
pub(crate) struct WaitList<P> {
    head: Option<NonNull<Waiter<P>>>,
    tail: Option<NonNull<Waiter<P>>>,
    len: usize,
}

// SAFETY: the list only holds pointers to nodes whose threads are blocked in
// `Waiter::wait`; it is only reachable through the owner's lock, and the
// payloads moved through it are `Send`.
unsafe impl<P: Send> Send for WaitList<P> {}

impl<P> WaitList<P> {
    /// An empty list.
    pub(crate) const fn new() -> Self {
        WaitList {
            head: None,
            tail: None,
            len: 0,
        }
    }

    /// No waiters?
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// Number of queued waiters.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends `w`.
    ///
    /// # Safety
    ///
    /// `w` must not be queued anywhere, and must stay alive and pinned until
    /// it has either been unlinked by [`remove`](Self::remove) (returning
    /// `true`) or detached and notified by a notifier — which is guaranteed
    /// when its thread goes on to call [`Waiter::wait`] and only returns
    /// from the enclosing function after `wait` returned.
    pub(crate) unsafe fn push_back(&mut self, w: Pin<&Waiter<P>>) {
        let node = NonNull::from(w.get_ref());
        // SAFETY: we hold the lock; `w` is not queued, so nobody else
        // touches its links; `tail` is a live queued node.
        unsafe {
            let l = &mut *node.as_ref().links();
            debug_assert!(!l.queued);
            l.queued = true;
            l.next = None;
            l.prev = self.tail;
            match self.tail {
                Some(t) => (*t.as_ref().links()).next = Some(node),
                None => self.head = Some(node),
            }
        }
        self.tail = Some(node);
        self.len += 1;
    }

    /// Prepends `w` (a waiter that lost a race and keeps its place).
    ///
    /// # Safety
    ///
    /// As for [`push_back`](Self::push_back).
    pub(crate) unsafe fn push_front(&mut self, w: Pin<&Waiter<P>>) {
        let node = NonNull::from(w.get_ref());
        // SAFETY: as in `push_back`.
        unsafe {
            let l = &mut *node.as_ref().links();
            debug_assert!(!l.queued);
            l.queued = true;
            l.prev = None;
            l.next = self.head;
            match self.head {
                Some(h) => (*h.as_ref().links()).prev = Some(node),
                None => self.tail = Some(node),
            }
        }
        self.head = Some(node);
        self.len += 1;
    }

    /// Unlinks `w` if it is still queued; `false` if a notifier detached it.
    ///
    /// # Safety
    ///
    /// If `w` is queued, it must be queued in `self`.
    pub(crate) unsafe fn remove(&mut self, w: &Waiter<P>) -> bool {
        // SAFETY: lock held; `w` is alive (the caller is its own thread);
        // neighbours are live queued nodes of this list.
        unsafe {
            let l = &mut *w.links();
            if !l.queued {
                return false;
            }
            l.queued = false;
            match l.prev {
                Some(p) => (*p.as_ref().links()).next = l.next,
                None => self.head = l.next,
            }
            match l.next {
                Some(n) => (*n.as_ref().links()).prev = l.prev,
                None => self.tail = l.prev,
            }
            l.prev = None;
            l.next = None;
        }
        self.len -= 1;
        true
    }

    /// Looks at the head's slot.
    pub(crate) fn peek_front<R>(&self, f: impl FnOnce(&P) -> R) -> Option<R> {
        // SAFETY: lock held; slots of queued nodes are only accessed with
        // the lock held (the waiter touches its slot only while unqueued).
        self.head
            .map(|h| unsafe { h.as_ref() }.slot.with(|p| f(unsafe { &*p })))
    }

    /// Detaches the head.
    pub(crate) fn pop_front(&mut self) -> Option<Notifier<P>> {
        let node = self.head?;
        // SAFETY: lock held; `node` is the live head of this list.
        unsafe {
            let l = &mut *node.as_ref().links();
            self.head = l.next;
            match l.next {
                Some(n) => (*n.as_ref().links()).prev = None,
                None => self.tail = None,
            }
            l.queued = false;
            l.prev = None;
            l.next = None;
        }
        self.len -= 1;
        Some(Notifier { node })
    }

    /// Detaches every waiter, in FIFO order. O(n) with the lock held (one
    /// store per node); the wake-ups happen after the lock is released.
    pub(crate) fn drain(&mut self) -> NotifyAll<P> {
        let head = self.head.take();
        self.tail = None;
        self.len = 0;
        let mut tail = None;
        let mut cur = head;
        while let Some(n) = cur {
            // SAFETY: lock held; `n` is a live node of this list.
            unsafe {
                let l = &mut *n.as_ref().links();
                l.queued = false;
                l.prev = None;
                cur = l.next;
            }
            tail = Some(n);
        }
        NotifyAll { head, tail }
    }
}

impl<P> Drop for WaitList<P> {
    fn drop(&mut self) {
        // A waiter borrows the primitive it waits on, so the list cannot be
        // dropped while anybody is queued.
        debug_assert!(self.is_empty(), "wait list dropped with waiters");
    }
}

/// A detached waiter that has not been woken yet. Must be [`notify`]d
/// exactly once (preferably after the owner's lock is released); until
/// then its thread stays blocked and the node stays alive.
///
/// [`notify`]: Notifier::notify
#[must_use = "a detached waiter must be notified"]
pub(crate) struct Notifier<P> {
    node: NonNull<Waiter<P>>,
}

impl<P> Notifier<P> {
    /// Accesses the waiter's slot (e.g. to hand it a message or take one).
    pub(crate) fn with_slot<R>(&mut self, f: impl FnOnce(&mut P) -> R) -> R {
        // SAFETY: the node is detached and not yet notified: its thread is
        // blocked in `wait` (it never touches the slot before the token is
        // published) and no list refers to it, so we have exclusive access.
        unsafe { self.node.as_ref() }
            .slot
            .with_mut(|p| f(unsafe { &mut *p }))
    }

    /// Publishes `token` (non-zero) and unparks the waiter.
    pub(crate) fn notify(self, token: usize) {
        debug_assert_ne!(token, WAITING);
        // SAFETY: the node is alive until the waiter observes the token.
        let w = unsafe { self.node.as_ref() };
        let thread = w.thread.clone();
        w.state.store(token, Ordering::Release);
        // `w` may be gone from here on: only the cloned handle is used.
        facade::unpark(&thread);
    }
}

/// A chain of detached waiters (from [`WaitList::drain`] or collected with
/// [`NotifyAll::push`]), to be woken after the owner's lock is released.
#[must_use = "detached waiters must be notified"]
pub(crate) struct NotifyAll<P> {
    head: Option<NonNull<Waiter<P>>>,
    tail: Option<NonNull<Waiter<P>>>,
}

impl<P> NotifyAll<P> {
    /// An empty chain.
    pub(crate) const fn new() -> Self {
        NotifyAll {
            head: None,
            tail: None,
        }
    }

    /// Appends a detached waiter.
    pub(crate) fn push(&mut self, n: Notifier<P>) {
        let node = n.node;
        // SAFETY: `node` is detached and owned by us (we hold its
        // Notifier); `tail` likewise.
        unsafe {
            (*node.as_ref().links()).next = None;
            match self.tail {
                Some(t) => (*t.as_ref().links()).next = Some(node),
                None => self.head = Some(node),
            }
        }
        self.tail = Some(node);
    }

    /// Takes the next waiter off the chain.
    pub(crate) fn pop(&mut self) -> Option<Notifier<P>> {
        let node = self.head?;
        // SAFETY: detached nodes of this chain are ours until notified.
        unsafe {
            self.head = (*node.as_ref().links()).next.take();
        }
        if self.head.is_none() {
            self.tail = None;
        }
        Some(Notifier { node })
    }

    /// Wakes every waiter on the chain with `token`.
    pub(crate) fn notify_all(mut self, token: usize) {
        while let Some(n) = self.pop() {
            n.notify(token);
        }
    }
}
