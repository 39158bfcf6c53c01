//! [`Blocker`]: what a blocked thread waits for, for dumps and metrics.
//!
//! Each record holds one in a [`BlockerCell`], a sequence lock written only
//! by its own thread (around a wait: `with_blocker`, `current.rs`) and read
//! by anyone without locks. A leaf of `thread/`: it names nothing else here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// What a blocked thread waits for (shown in thread dumps, counted by
/// reason in metrics).
///
/// One rule, as Go's `waitReason`: each kind of wait has one variant that
/// says what it waits for, with what identifies the object waited on.
/// Every `weft::sync` primitive is a [`Blocker::Lock`] with its
/// [`SyncKind`], its address (waiters of one object group together) and,
/// for the primitives that have one (`Mutex`), its owner.
/// [`Blocker::Other`] is left for waits that are on no object: the
/// function's path (`weft::blocking`, `weft::block_on`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Blocker {
    /// Not blocked in a weft primitive (or not recorded).
    #[default]
    None,
    /// `sleep` until the given instant.
    Sleep(Instant),
    /// `park` / `park_timeout` called directly.
    Park,
    /// A socket or other descriptor: fd and whether it waits to read.
    Io {
        /// The file descriptor.
        fd: i32,
        /// True for a read (or accept), false for a write (or connect).
        read: bool,
    },
    /// A `weft::sync` primitive (a lock, a condition variable, a
    /// semaphore, a latch; a `Barrier` waits on its condition variable)
    /// at this address, owned by this thread id (when it has an owner).
    Lock {
        /// The kind of primitive.
        kind: SyncKind,
        /// Address of the primitive, to match waiters with owners.
        addr: usize,
        /// The owner's thread id, if the primitive has one and it is known.
        owner: Option<u64>,
    },
    /// A channel operation.
    Channel {
        /// True for `recv`, false for `send`.
        recv: bool,
    },
    /// Joining the thread with this id.
    Join(u64),
    /// A wait on no object, named by the function that waits
    /// (`"weft::blocking"`, `"weft::block_on"`).
    Other(&'static str),
    /// A libc call intercepted by the `transparent` feature (`"recv"`,
    /// `"nanosleep"`, …) and the descriptor it waits on (-1 if none).
    Call {
        /// The C function's name.
        call: &'static str,
        /// The file descriptor, or -1.
        fd: i32,
    },
}

/// The `weft::sync` primitive a [`Blocker::Lock`] waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SyncKind {
    /// `weft::sync::Mutex::lock` (and a `Condvar` wait taking the mutex
    /// back).
    Mutex,
    /// `weft::sync::RwLock::read` or `write`.
    RwLock,
    /// `weft::sync::Condvar::wait` (and `Barrier::wait`).
    Condvar,
    /// `weft::sync::Semaphore::acquire`.
    Semaphore,
    /// `weft::sync::CountDownLatch::wait`.
    CountDownLatch,
}

impl SyncKind {
    const ALL: [SyncKind; 5] = [
        SyncKind::Mutex,
        SyncKind::RwLock,
        SyncKind::Condvar,
        SyncKind::Semaphore,
        SyncKind::CountDownLatch,
    ];

    /// The type's path: `"weft::sync::Mutex"`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            SyncKind::Mutex => "weft::sync::Mutex",
            SyncKind::RwLock => "weft::sync::RwLock",
            SyncKind::Condvar => "weft::sync::Condvar",
            SyncKind::Semaphore => "weft::sync::Semaphore",
            SyncKind::CountDownLatch => "weft::sync::CountDownLatch",
        }
    }

    /// What a thread blocked on one does, before the object's name:
    /// `"waiting for"` a lock, `"waiting on"` a condition variable, ….
    pub fn verb(self) -> &'static str {
        match self {
            SyncKind::Mutex | SyncKind::RwLock => "waiting for",
            SyncKind::Condvar => "waiting on",
            SyncKind::Semaphore => "waiting for a permit of",
            SyncKind::CountDownLatch => "waiting for the count down of",
        }
    }
}

impl std::fmt::Display for SyncKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Blocker {
    /// Every [`Blocker::reason`], in a fixed order.
    pub const REASONS: [&'static str; 9] = [
        "sleep",
        "park",
        "io",
        "lock",
        "sync",
        "channel",
        "join",
        "other",
        "unrecorded",
    ];

    /// The reason a parked thread is counted under (the `reason` label of
    /// `weft_virtual_threads_parked`): `"lock"` for a `Mutex` or `RwLock`,
    /// `"sync"` for the other `weft::sync` primitives, `"io"` for a
    /// descriptor or a hooked libc call, `"unrecorded"` for
    /// [`Blocker::None`]; one of [`Blocker::REASONS`].
    pub fn reason(&self) -> &'static str {
        Self::REASONS[self.reason_index()]
    }

    pub(crate) fn reason_index(&self) -> usize {
        match self {
            Blocker::Sleep(_) => 0,
            Blocker::Park => 1,
            Blocker::Io { .. } | Blocker::Call { .. } => 2,
            Blocker::Lock {
                kind: SyncKind::Mutex | SyncKind::RwLock,
                ..
            } => 3,
            Blocker::Lock { .. } => 4,
            Blocker::Channel { .. } => 5,
            Blocker::Join(_) => 6,
            Blocker::Other(_) => 7,
            Blocker::None => 8,
        }
    }
}

/// A [`Blocker`] in atomics, written only by its own thread and read by
/// anyone (dumps) without locks: a sequence lock. The writer makes the
/// sequence odd, stores the words, makes it even again; a reader retries
/// until it sees the same even sequence before and after reading.
///
/// It also keeps when its thread began to wait (`since`), for the "waiting
/// for 12 s" of dumps, as Go's `[chan receive, 12 minutes]`: one word more
/// per thread (the cell is 40 bytes of the record: three words of
/// blocker, the sequence and `since`), and one read
/// of the kernel's coarse monotonic clock per wait (a few nanoseconds, no
/// system call: the vDSO reads a value the timer tick updates, so its
/// resolution is the tick, 1–4 ms).
#[derive(Default)]
pub(crate) struct BlockerCell {
    pub(super) seq: AtomicU64,
    pub(super) w: [AtomicU64; WORDS],
    /// When the current blocker was set, in ns of [`coarse_now_ns`]; 0
    /// while none is.
    since: AtomicU64,
}

/// The coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`), in ns; at least
/// 1 (0 means "not waiting" in [`BlockerCell`]).
pub(crate) fn coarse_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is valid
    // on every Linux (an error leaves it zero, read as "just now").
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
        .max(1)
}

impl BlockerCell {
    /// How long the thread has waited on its current blocker (coarse: to
    /// the kernel's timer tick); `None` while it waits on none.
    pub(crate) fn waited(&self) -> Option<std::time::Duration> {
        let since = self.since.load(Ordering::Relaxed);
        (since != 0).then(|| std::time::Duration::from_nanos(coarse_now_ns().saturating_sub(since)))
    }

    pub(super) fn set(&self, b: Blocker) {
        self.since.store(
            if b == Blocker::None {
                0
            } else {
                coarse_now_ns()
            },
            Ordering::Relaxed,
        );
        let words = encode(&b);
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        for (slot, v) in self.w.iter().zip(words) {
            slot.store(v, Ordering::Relaxed);
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    pub(crate) fn get(&self) -> Blocker {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let words: [u64; WORDS] = std::array::from_fn(|i| self.w[i].load(Ordering::Relaxed));
            std::sync::atomic::fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return decode(words);
            }
        }
    }
}

pub(super) fn str_words(s: &'static str) -> (u64, u64) {
    (s.as_ptr() as u64, s.len() as u64)
}

pub(super) fn words_str(ptr: u64, len: u64) -> &'static str {
    // SAFETY: (ptr, len) was produced by `str_words` from a &'static str
    // (the seqlock guarantees the pair is not torn).
    unsafe {
        std::str::from_utf8_unchecked(std::slice::from_raw_parts(ptr as *const u8, len as usize))
    }
}

/// Words of a [`BlockerCell`]: a tag word (variant in bits 0–7, a small
/// field in bits 8–15, a descriptor in bits 32–63) and two payload words.
/// Every variant fits without loss.
const WORDS: usize = 3;

/// The tag word of variant `tag` with small field `small` and descriptor `fd`.
fn tag(tag: u64, small: u64, fd: i32) -> u64 {
    tag | small << 8 | u64::from(fd as u32) << 32
}

pub(super) fn encode(b: &Blocker) -> [u64; WORDS] {
    match *b {
        Blocker::None => [0; WORDS],
        Blocker::Sleep(t) => [1, crate::clock::ns_of(t), 0],
        Blocker::Park => [2, 0, 0],
        Blocker::Io { fd, read } => [tag(3, read as u64, fd), 0, 0],
        Blocker::Lock { kind, addr, owner } => {
            [tag(4, kind as u64, 0), addr as u64, owner.unwrap_or(0)]
        }
        Blocker::Channel { recv } => [tag(5, recv as u64, 0), 0, 0],
        Blocker::Join(id) => [6, id, 0],
        Blocker::Other(s) => {
            let (p, l) = str_words(s);
            [7, p, l]
        }
        Blocker::Call { call, fd } => {
            let (p, l) = str_words(call);
            [tag(8, 0, fd), p, l]
        }
    }
}

pub(super) fn decode(w: [u64; WORDS]) -> Blocker {
    let small = (w[0] >> 8) & 0xff;
    let fd = (w[0] >> 32) as u32 as i32;
    match w[0] & 0xff {
        1 => Blocker::Sleep(crate::clock::instant_of(w[1])),
        2 => Blocker::Park,
        3 => Blocker::Io {
            fd,
            read: small != 0,
        },
        4 => Blocker::Lock {
            kind: SyncKind::ALL
                .get(small as usize)
                .copied()
                .unwrap_or(SyncKind::Mutex),
            addr: w[1] as usize,
            owner: (w[2] != 0).then_some(w[2]),
        },
        5 => Blocker::Channel { recv: small != 0 },
        6 => Blocker::Join(w[1]),
        7 => Blocker::Other(words_str(w[1], w[2])),
        8 => Blocker::Call {
            call: words_str(w[1], w[2]),
            fd,
        },
        _ => Blocker::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three words hold every variant without loss, extremes included.
    #[test]
    fn every_blocker_survives_the_cell() {
        let cases = [
            Blocker::None,
            Blocker::Park,
            Blocker::Io { fd: -1, read: true },
            Blocker::Io {
                fd: i32::MAX,
                read: false,
            },
            Blocker::Lock {
                kind: SyncKind::CountDownLatch,
                addr: usize::MAX,
                owner: Some(u64::MAX),
            },
            Blocker::Lock {
                kind: SyncKind::RwLock,
                addr: 8,
                owner: None,
            },
            Blocker::Channel { recv: true },
            Blocker::Join(u64::MAX),
            Blocker::Other("weft::blocking"),
            Blocker::Call {
                call: "recv",
                fd: i32::MIN,
            },
            Blocker::Call { call: "", fd: 0 },
        ];
        let cell = BlockerCell::default();
        for b in cases {
            cell.set(b.clone());
            assert_eq!(cell.get(), b);
        }
        // A deadline goes through the runtime's clock (`clock::ns_of`),
        // which keeps it to its own resolution.
        cell.set(Blocker::Sleep(std::time::Instant::now()));
        assert!(matches!(cell.get(), Blocker::Sleep(_)));
        assert_eq!(size_of::<BlockerCell>(), 40);
    }
}
