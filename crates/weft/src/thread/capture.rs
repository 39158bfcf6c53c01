//! A thread dump's request that a parked virtual thread record its own
//! stack.
//!
//! Where a dump cannot unwind a parked thread's stack from outside (it
//! does on x86-64 Linux: `dump/parked.rs`; this is the fallback), it leaves
//! a [`CaptureJob`] in the thread's record (`Rare::capture_job`, a raw
//! `Arc` published with a CAS) and borrows the thread (`borrow_parked`);
//! the thread resumes inside `park`, calls [`capture_here`], which records
//! the return addresses (no symbol lookup on that path) and counts the job
//! down, and parks again. The last one to report unparks the dump.

use crate::unpoison::Unpoison;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{Thread, VThread};

/// A dump's request to parked threads, and where they put their stacks.
pub(crate) struct CaptureJob {
    /// `(thread id, return addresses)`, one per thread that reported.
    pub(crate) results: Mutex<Vec<(u64, Vec<usize>)>>,
    /// Threads yet to report, plus one for the dump itself.
    pub(crate) pending: AtomicUsize,
    /// The dumping thread, unparked by the last reporter.
    pub(crate) waiter: Thread,
}

const MAX_FRAMES: usize = 64;

/// Called by a thread that resumed inside `park` with a capture request.
///
/// Cold and never inlined: its frame (a backtrace buffer) would otherwise
/// join `park`'s, which every parked thread keeps on its stack — in the
/// page it shares with its thread-local area (`stack.rs`, "Slot size").
#[cold]
#[inline(never)]
pub(crate) fn capture_here(thread: &VThread) {
    let p = thread.take_capture_job();
    if p.is_null() {
        return;
    }
    // SAFETY: the dump put an `Arc::into_raw` here and waits for `pending`
    // to reach zero before dropping its own handle; we own this count.
    let job = unsafe { Arc::from_raw(p as *const CaptureJob) };
    let mut ips = Vec::with_capacity(32);
    backtrace::trace(|f| {
        ips.push(f.ip() as usize);
        ips.len() < MAX_FRAMES
    });
    job.results
        .lock()
        .unpoison()
        .push((Thread::peek_name_id(thread).1, ips));
    if job.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
        job.waiter.unpark();
    }
}
