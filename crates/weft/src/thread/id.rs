//! [`ThreadId`], a thread's identity: a number never reused in the
//! process. A leaf of `thread/`: it names nothing else here, so the record
//! (`record.rs`) and the handle (`handle.rs`) both hold it from below.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

/// A unique identifier for a weft thread (virtual or OS). Never reused.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(pub(super) NonZeroU64);

impl ThreadId {
    /// The next unused id.
    pub(super) fn next() -> ThreadId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        ThreadId(NonZeroU64::new(id).expect("thread id overflow"))
    }

    /// The id as a number (stable for the thread's life, unique in the process).
    pub fn as_u64(&self) -> NonZeroU64 {
        self.0
    }
}

impl fmt::Debug for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ThreadId({})", self.0)
    }
}
