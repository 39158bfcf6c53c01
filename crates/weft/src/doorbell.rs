//! A sleeping carrier's doorbell: one kick that reaches the carrier however
//! it sleeps.
//!
//! A carrier sleeps one of two ways: on its futex word, or in the process's
//! readiness source (`netpoll`, rule 2: `epoll_wait` on the outer set).
//! A kicker cannot tell which from outside, so the carrier raises a flag
//! before it sleeps in the source, and the protocol is Dekker's:
//!
//! - **kicker** ([`Doorbell::ring`]): bump the word, *then* read the flag;
//!   flag set → write the source's eventfd ([`Ring::Source`]), else wake
//!   the futex ([`Ring::Futex`]).
//! - **carrier** ([`Doorbell::enter_source`]): set the flag, *then* re-read
//!   the word; changed since it last looked → do not block.
//!
//! Both sides put a SeqCst fence between their write and their read (the
//! store-load order Dekker needs; the fences also make it checkable by
//! loom, which models SeqCst accesses as acquire/release), so at least one
//! sees the other: a carrier that blocks
//! in the source had the flag up before the kicker read it, and the
//! eventfd (a counter, which stays readable) wakes it even if written
//! before it blocked. A carrier that sleeps on the futex waits only while
//! the word still holds the value it read (`FUTEX_WAIT`'s own check).
//!
//! **One wake per sleep.** Many threads can be queued for a sleeping
//! carrier before it is back on a CPU — a poll's batch of readiness for
//! its threads, and beside busy processes its wake-up takes a while — and
//! each kick used to make a system call. Only the first kick after the
//! carrier's last look needs one: the carrier publishes the count it read
//! ([`Doorbell::seen`], then a SeqCst fence), and a kicker whose bump
//! finds the word already past that count leaves the wake to the kicker
//! that moved it, once that kicker has made its call (`rung`; until then
//! it makes one too, so that a kicker the kernel preempts between its bump
//! and its call does not hold the wake up). Never lost: a carrier blocks only with
//! the word still at the count it read; the kicker that bumped it from
//! there found the count published (the carrier's store and fence come
//! before its block's read of the word, the kicker's bump and fence before
//! its read of the count), so it rang; a later kicker that reads a stale
//! count finds it different and skips, but then the word moved past the
//! carrier's new count before the carrier could block on it.
//!
//! Model-checked with `loom` (`tests/loom_doorbell.rs` drives this code).

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering, fence};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering, fence};

/// See the module docs.
#[derive(Debug)]
pub struct Doorbell {
    /// Bumped by every kick; the futex word.
    word: AtomicU32,
    /// The count the carrier last read ([`Doorbell::seen`]): only the kick
    /// that moves the word from it wakes the carrier.
    seen: AtomicU32,
    /// The last count read from `seen` whose wake call has been made.
    rung: AtomicU32,
    /// Set while the carrier sleeps (or is about to) in the readiness source.
    in_source: AtomicBool,
}

/// How a kick must wake the carrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ring {
    /// `FUTEX_WAKE` on [`Doorbell`]'s word.
    Futex,
    /// Write the readiness source's eventfd.
    Source,
}

impl Default for Doorbell {
    fn default() -> Self {
        Self::new()
    }
}

impl Doorbell {
    /// A doorbell nobody has rung.
    pub fn new() -> Doorbell {
        Doorbell {
            word: AtomicU32::new(0),
            seen: AtomicU32::new(0),
            rung: AtomicU32::new(u32::MAX),
            in_source: AtomicBool::new(false),
        }
    }

    /// The kick count, read before the carrier looks for work: a kick
    /// after this read makes the sleep that follows return at once.
    /// Only the carrier calls it: it publishes the count for kickers
    /// (module docs, "One wake per sleep").
    pub fn seen(&self) -> u32 {
        let w = self.word.load(Ordering::SeqCst);
        self.seen.store(w, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        w
    }

    /// Kicks: bumps the word, then calls `wake` with how to wake the
    /// carrier — unless an earlier kick since the carrier's last look has
    /// made that call already (module docs, "One wake per sleep").
    pub fn ring(&self, wake: impl FnOnce(Ring)) {
        let old = self.word.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let seen = self.seen.load(Ordering::SeqCst);
        if old != seen && self.rung.load(Ordering::SeqCst) == seen {
            return;
        }
        wake(if self.in_source.load(Ordering::SeqCst) {
            Ring::Source
        } else {
            Ring::Futex
        });
        self.rung.store(seen, Ordering::SeqCst);
    }

    /// The carrier is about to block in the readiness source: raises the
    /// flag, then returns whether no kick came since `seen` (false: do not
    /// block). Call [`Doorbell::leave_source`] after, either way.
    pub fn enter_source(&self, seen: u32) -> bool {
        self.in_source.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.word.load(Ordering::SeqCst) == seen
    }

    /// The carrier is back from the readiness source.
    pub fn leave_source(&self) {
        self.in_source.store(false, Ordering::SeqCst);
    }

    /// The futex word.
    #[cfg(not(loom))]
    pub(crate) fn word(&self) -> &AtomicU32 {
        &self.word
    }

    /// The word, for the loom model's futex (its value check).
    #[cfg(loom)]
    pub fn word_now(&self) -> u32 {
        self.word.load(Ordering::SeqCst)
    }

    /// Under loom only this module's protocol is driven (by the model);
    /// the scheduler that sleeps on the word never runs.
    #[cfg(loom)]
    pub(crate) fn word(&self) -> &std::sync::atomic::AtomicU32 {
        unreachable!("the scheduler does not run under loom")
    }
}
