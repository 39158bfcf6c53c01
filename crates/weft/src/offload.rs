//! The offload pool: OS threads that run [`crate::blocking`] closures while
//! the virtual thread that asked waits parked.
//!
//! A started virtual thread runs on one carrier for its whole life, so a
//! call that blocks the carrier's OS thread (a file read, `getaddrinfo`, a
//! C library) would stall every other thread bound to that carrier. Such a
//! call is handed here instead: the caller parks — its carrier runs the
//! others — and one of these threads runs the closure and unparks it.
//!
//! # Shape
//!
//! Tokio's blocking pool, in small: one queue under one mutex; idle threads
//! wait on a condvar; a job that finds more queued jobs than idle threads
//! starts a new thread, up to `WEFT_MAX_BLOCKING_THREADS` (default
//! [`DEFAULT_MAX_THREADS`], Tokio's default too); past that, jobs wait in
//! the queue. A thread idle for [`KEEPALIVE`] exits. Threads are named
//! `weft-blocking-N`.
//!
//! Nothing here knows about virtual threads: a job is a boxed closure that
//! must not unwind (the caller in `blocking.rs` wraps it in
//! `catch_unwind`).

use crate::unpoison::Unpoison;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// A unit of offloaded work. It must not panic.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// Default bound on offload threads.
pub const DEFAULT_MAX_THREADS: usize = 512;

/// How long an idle offload thread waits for work before it exits.
pub(crate) const KEEPALIVE: Duration = Duration::from_secs(10);

struct Pool {
    state: Mutex<State>,
    work: Condvar,
    max: usize,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Threads waiting on the condvar (they decrement it when they wake).
    idle: usize,
    /// Threads alive.
    threads: usize,
    /// Names threads.
    spawned: usize,
}

/// The pool of this process copy: a `fork` child starts its own, as the
/// parent's threads did not survive the fork (`fork.rs`).
fn pool() -> &'static Pool {
    static POOL: crate::fork::PerProcess<Pool> = crate::fork::PerProcess::new();
    POOL.get_or_init(|| Pool {
        state: Mutex::new(State::default()),
        work: Condvar::new(),
        max: max_threads(),
    })
}

fn max_threads() -> usize {
    crate::knob::count(
        "WEFT_MAX_BLOCKING_THREADS",
        DEFAULT_MAX_THREADS,
        1,
        "threads",
    )
}

/// Queues `job` for an offload thread. Gives it back when no thread can
/// run it: none is alive and none can be started (the caller then runs it
/// itself, blocking its carrier, rather than wait for ever).
pub(crate) fn submit(job: Job) -> Result<(), Job> {
    let pool = pool();
    let mut st = pool.state.lock().unpoison();
    let start = st.queue.len() >= st.idle && st.threads < pool.max;
    if start {
        st.spawned += 1;
        let name = format!("weft-blocking-{}", st.spawned);
        match std::thread::Builder::new().name(name).spawn(run) {
            Ok(_) => st.threads += 1,
            Err(_) if st.threads == 0 => return Err(job),
            // Others are alive: they will get to it.
            Err(_) => {}
        }
    }
    st.queue.push_back(job);
    drop(st);
    pool.work.notify_one();
    Ok(())
}

/// Body of an offload thread.
fn run() {
    let pool = pool();
    let mut st = pool.state.lock().unpoison();
    loop {
        if let Some(job) = st.queue.pop_front() {
            drop(st);
            job();
            st = pool.state.lock().unpoison();
            continue;
        }
        st.idle += 1;
        let (guard, timeout) = pool.work.wait_timeout(st, KEEPALIVE).unpoison();
        st = guard;
        st.idle -= 1;
        if timeout.timed_out() && st.queue.is_empty() {
            st.threads -= 1;
            return;
        }
    }
}

/// Offload threads alive and jobs waiting for one (metrics).
pub(crate) fn stats() -> (usize, usize) {
    let st = pool().state.lock().unpoison();
    (st.threads, st.queue.len())
}
