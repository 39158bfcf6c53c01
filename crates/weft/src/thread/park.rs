//! Parking: [`park`], [`sleep`], [`yield_now`] and the switch to the
//! carrier ([`suspend`]), on which every other blocking call is built.
//!
//! A virtual thread parks by moving its park word RUNNING → PARKING
//! (`crate::park`) and switching to its carrier with a [`Suspend`] request;
//! the carrier publishes PARKED after the switch. A parked thread may be
//! *borrowed* by a thread dump ([`borrow_parked`]): it then resumes here,
//! answers the dump's capture request (`capture.rs`) and parks again.
//! Inside `weft::pinned` the thread parks its carrier's OS thread instead
//! (`pinned.rs`).

use super::record_ref::RecordArc;
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::*;

/// Blocks until the current thread's permit is available (then consumes
/// it), it is interrupted, or spuriously. See `std::thread::park`.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let ready = Arc::new(AtomicBool::new(false));
/// let r = ready.clone();
/// let waiter = weft::spawn(move || {
///     // Spurious wake-ups are allowed: park in a loop on a condition.
///     while !r.load(Ordering::Acquire) {
///         weft::park();
///     }
/// });
/// ready.store(true, Ordering::Release);
/// waiter.thread().unpark();
/// waiter.join().unwrap();
/// ```
pub fn park() {
    park_deadline(None)
}

/// Like [`park`], returning after at most `dur`.
pub fn park_timeout(dur: Duration) {
    with_blocker(Blocker::Park, || {
        park_deadline(crate::clock::now().checked_add(dur))
    })
}

/// Parks until unparked, `deadline`, or interrupt; spurious wakeups possible.
pub(crate) fn park_deadline(deadline: Option<Instant>) {
    park_deadline_after(deadline, None)
}

/// [`park_deadline`] for a caller that has just read the clock (`now`):
/// one clock read fewer per timed park on a virtual thread.
fn park_deadline_after(deadline: Option<Instant>, now: Option<Instant>) {
    match current_virtual() {
        Some(thread) => {
            if thread.interrupted.load(Ordering::SeqCst) {
                return;
            }
            if deadline.is_some_and(|d| d <= now.unwrap_or_else(crate::clock::now)) {
                return;
            }
            // A simulation's one carrier cannot be held: a pinned thread
            // parks like any other there (unmounting is always sound).
            if thread.pin_depth.get() > 0 && !crate::clock::is_virtual() {
                super::pinned_park(thread, deadline);
                return;
            }
            let begin = thread.park.begin_park();
            if begin == crate::park::BeginPark::Consumed {
                return;
            }
            thread.state.store(State::Parking as u8, Ordering::Relaxed);
            let mut s = match deadline {
                None => Suspend::Park,
                Some(d) => Suspend::ParkUntil(d),
            };
            loop {
                suspend(thread, s);
                // Only a thread dump that moved us out of PARKED sets this
                // (before it schedules us), so anything else that resumed
                // us was a real wake-up: never park again for a dump then,
                // or that wake-up is lost.
                if !thread.dump_borrowed.load(Ordering::Acquire) {
                    // A dump may still have left a request we did not
                    // serve; answer it so the dump does not wait for us.
                    if thread.capture_requested() {
                        super::capture::capture_here(thread);
                    }
                    break;
                }
                thread.dump_borrowed.store(false, Ordering::Relaxed);
                // Borrowed by a thread dump: record the stack, park again
                // (our timer, if any, is still pending), unless a real
                // unpark arrived meanwhile.
                super::capture::capture_here(thread);
                if thread.park.begin_park() == crate::park::BeginPark::Consumed {
                    break;
                }
                thread.state.store(State::Parking as u8, Ordering::Relaxed);
                s = Suspend::Park;
            }
            if deadline.is_some() {
                thread.timer_seq.fetch_add(1, Ordering::Relaxed);
            }
        }
        None => with_os_thread(|t| {
            if t.is_interrupted() {
                return;
            }
            t.set_state(State::Parked);
            match deadline {
                None => std::thread::park(),
                Some(d) => {
                    let now = crate::clock::now();
                    if d > now {
                        std::thread::park_timeout(d - now);
                    }
                }
            }
            t.set_state(State::Running);
        }),
    }
}

/// Switches from the virtual thread to its carrier, handing it `s`.
#[inline(never)]
pub(crate) fn suspend(thread: &VThread, s: Suspend) {
    let marker = 0u8;
    let sp = &marker as *const u8 as usize;
    thread.note_sp(sp);
    // Per-OS-thread context (tracing spans, registered hooks) leaves the
    // carrier with us and comes back when we do.
    let context = crate::context::unmount();
    // A panic being unwound belongs to the OS thread's panic count, which
    // the other virtual threads of this carrier see while we are away (on
    // an area of its own the thread's panic count is its own).
    let unwinding = if !std::thread::panicking() || crate::tls::isolated() {
        thread.unwinding.set(false);
        false
    } else {
        thread
            .scheduler()
            .is_some_and(|s| s.suspend_unwinding(thread))
    };
    // errno is per thread (POSIX): what this thread last set survives the
    // switch, whatever the carrier and its other threads set meanwhile
    // (libc's thread state, errno included, is the carrier's: `tls/`).
    // Read before the switch and written after it, each on the OS thread
    // running this code then: `crate::errno` finds the slot afresh, where
    // an address kept across the switch could be another carrier's.
    let errno = crate::errno::get();
    let y = thread.yielder.get();
    // SAFETY: `yielder` was set when this coroutine started and points into
    // its own stack, which is the stack we are running on now; it is valid
    // for the coroutine's whole life.
    unsafe {
        crate::switching::set_switching(true);
        (*y).suspend(s);
        crate::switching::set_switching(false);
    }
    crate::errno::set(errno);
    if unwinding && let Some(s) = thread.scheduler() {
        s.resume_unwinding();
    }
    crate::context::mount(context);
}

/// Whether the calling thread is unwinding a panic: `std::thread::panicking`
/// for the calling *virtual* thread.
///
/// Rust counts panics per OS thread. A virtual thread that blocks while it
/// unwinds (a `Drop` that takes a contended [`weft::sync::Mutex`](crate::sync::Mutex))
/// leaves that count raised on its carrier, so `std::thread::panicking()`
/// answers `true` to every other virtual thread that runs there meanwhile.
/// This function subtracts the carrier's suspended unwinders; weft's locks
/// use it for poisoning. When two virtual threads of one carrier unwind at
/// once, the one not suspended may be reported as not panicking (its
/// locks are then not poisoned), never the other way round.
pub fn panicking() -> bool {
    if !std::thread::panicking() {
        return false;
    }
    if crate::tls::isolated() {
        return true; // the thread's own panic count
    }
    match current_virtual() {
        None => true,
        Some(thread) => {
            thread.unwinding.get()
                || thread
                    .scheduler()
                    .is_none_or(|s| s.suspended_unwinders() == 0)
        }
    }
}

/// Takes a PARKED virtual thread off its park for a thread dump and
/// schedules it; false if it was not parked (then nothing happened).
pub(crate) fn borrow_parked(t: &RecordArc) -> bool {
    let Kind::Virtual { sched, .. } = &t.kind else {
        return false;
    };
    if !t.park.borrow_parked() {
        return false;
    }
    // Before scheduling: the thread reads it when it resumes.
    t.dump_borrowed.store(true, Ordering::Release);
    set_state_of(t, State::Runnable);
    // SAFETY: moving the thread out of PARKED made the count its carrier
    // leaked at park ours (as in `Thread::unpark`).
    let thread = unsafe { RecordArc::from_raw(RecordArc::as_ptr(t)) };
    sched.schedule(thread);
    true
}

/// Puts the current thread to sleep for at least `dur`.
///
/// Unlike `std::thread::sleep` this returns a `Result`: if the thread is
/// interrupted (before or during the sleep) it returns
/// `Err(ErrorKind::Interrupted)` and clears the flag.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let h = weft::spawn(|| {
///     let start = Instant::now();
///     weft::sleep(Duration::from_millis(20)).unwrap();
///     start.elapsed()
/// });
/// assert!(h.join().unwrap() >= Duration::from_millis(20));
/// ```
pub fn sleep(dur: Duration) -> io::Result<()> {
    // Two clock reads per sleep that parks once: here and on waking.
    let mut now = crate::clock::now();
    let Some(deadline) = now.checked_add(dur) else {
        // Effectively forever.
        loop {
            park();
            if take_interrupt() {
                return Err(interrupted_error());
            }
        }
    };
    loop {
        if take_interrupt() {
            return Err(interrupted_error());
        }
        if now >= deadline {
            return Ok(());
        }
        with_blocker(Blocker::Sleep(deadline), || {
            park_deadline_after(Some(deadline), Some(now))
        });
        now = crate::clock::now();
    }
}

/// Like [`sleep`], until `deadline`.
pub fn sleep_until(deadline: Instant) -> io::Result<()> {
    sleep(deadline.saturating_duration_since(crate::clock::now()))
}

/// Gives up the carrier: the current virtual thread goes to the back of the
/// run queue. On an OS thread, `std::thread::yield_now`.
pub fn yield_now() {
    match current_virtual() {
        // Inside `weft::pinned` the thread keeps its carrier.
        Some(thread) if thread.pin_depth.get() == 0 => {
            thread.state.store(State::Yielding as u8, Ordering::Relaxed);
            suspend(thread, Suspend::Yield);
        }
        _ => std::thread::yield_now(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `timer_seq` is 32 bits: timed parks keep working as it wraps, with
    /// stale timers (parks ended early by an unpark) pending across the
    /// wrap. Were a timer's sequence and the thread's compared wrongly,
    /// a sleep here would never end.
    #[test]
    fn timed_parks_work_across_the_timer_sequence_wrap() {
        let h = crate::spawn(|| {
            let me = current_virtual().expect("a virtual thread");
            me.timer_seq.store(u32::MAX - 3, Ordering::Relaxed);
            let mut seqs = Vec::new();
            for _ in 0..8 {
                // Ended early by another thread: leaves a stale timer.
                let t = current();
                let waker = crate::spawn(move || {
                    while t.state() != State::Parked {
                        yield_now();
                    }
                    t.unpark();
                });
                park_timeout(Duration::from_secs(3600));
                waker.join().unwrap();
                // Ended by its own timer.
                sleep(Duration::from_millis(1)).unwrap();
                seqs.push(me.timer_seq.load(Ordering::Relaxed));
            }
            seqs
        });
        let seqs = h.join().unwrap();
        assert!(
            seqs.windows(2).any(|w| w[1] < w[0]),
            "the sequence wrapped: {seqs:?}"
        );
    }
}
