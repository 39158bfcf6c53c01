//! The monitor's reports, written off the monitor.
//!
//! When the monitor sees a carrier held past the stall threshold it reads
//! what only that moment can tell — who holds the carrier (and what it
//! said it was doing: the thread may have ended by the time the report is
//! written) and for how long so far, whether its OS thread runs or sleeps and in which system call,
//! its stack as return addresses (`sample.rs`), what is queued behind it —
//! and hands that here as a [`Report`]. One OS thread of the process,
//! `weft-reports`, turns it into an event:
//!
//! - it resolves the addresses to frames — the first lookup of a process
//!   reads the program's debug info: about 60 ms for Weft's own test
//!   binaries on the 2-core machine (`perf` of `examples/spawn_join 400000
//!   virtual` put 14 % of all samples in the monitor's inflate and DWARF
//!   parsing), seconds for a large program;
//! - it names the threads waiting behind the hold: a walk of the
//!   registry, O(live threads), tens of milliseconds with a million of
//!   them;
//! - it records the event (`events::record`), which logs it through
//!   `tracing` and, under `WEFT_TRACE_PINNED`, to stderr: sinks the
//!   program owns, which may be slow or block.
//!
//! None of that is the monitor's to wait for. Its own work — handing the
//! threads behind a held carrier to others, bringing in spares, firing the
//! timers of blocked carriers, fetching readiness no carrier fetched —
//! decides whether the program runs, and a report that held it up would
//! hold up exactly what a stall needs most (`tests/monitor_reports.rs`
//! blocks the log sink and checks that a second held carrier still gets
//! its spare). Nor should a report take a core the program's threads could
//! use: `weft-reports` runs at nice 10, so while every core is busy its
//! work waits, and the event, which carries the time the monitor saw the
//! hold, comes later. The first event of a process (a carrier held in
//! `std::thread::sleep`, 20 ms threshold, polled with `events::recent`)
//! was visible 95–123 ms after the monitor saw the hold on the quiet 2-core
//! machine, 1.17–1.29 s beside two busy processes (three runs each,
//! 2026-11-27); later ones find the debug info read.
//!
//! Reports and the ends of holds go through one queue, in the order the
//! monitor saw them, so the end of a hold never overtakes its report, and
//! a blocked-with-waiters event finds the stack of its hold's stall. Each
//! carries the time the monitor saw it. What is read here rather than by
//! the monitor (the threads behind the hold) is read microseconds later,
//! or after a first symbol lookup that is in progress.
//!
//! The queue holds [`PENDING_MAX`] reports; past that (a sink blocked for
//! good) the monitor drops new ones and counts them
//! (`events::Counters::reports_dropped`). A thread that cannot be started
//! leaves the reports to the monitor, as before there was one.

use std::any::Any;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, SystemTime};

use super::slot::Identity;
use crate::events::EventKind;
use crate::thread::State;

/// Reports the queue holds before the monitor drops new ones.
pub(super) const PENDING_MAX: usize = 4096;

/// A runtime, weakly (a report does not keep it alive) and by identity
/// only: the holder's `Shared`, which this file does not name (it is
/// below the monitor and the runtime's state in the import graph).
pub(super) type RuntimeRef = Weak<dyn Any + Send + Sync>;

/// What the monitor saw of a hold, for `weft-reports` to write up.
pub(super) enum Report {
    /// Carrier `carrier` held by `who` past the stall threshold.
    Stall {
        /// The holder's runtime.
        shared: RuntimeRef,
        carrier: usize,
        /// The carrier's kernel thread id.
        tid: i32,
        who: Identity,
        /// The hold so far.
        held: Duration,
        /// Whether the OS thread was running (else sleeping in the kernel).
        cpu: bool,
        /// The system call it sleeps in, when not running.
        call: Option<String>,
        /// Its stack, as return addresses, where it could be sampled.
        ips: Option<Vec<usize>>,
        /// Threads bound to the carrier were queued behind the hold.
        home_work: bool,
        at: SystemTime,
    },
    /// Carrier `carrier` held in the kernel (or a pinned wait) while
    /// threads wait behind it.
    BlockedWithWaiters {
        shared: RuntimeRef,
        carrier: usize,
        tid: i32,
        who: Identity,
        held: Duration,
        /// What it is blocked in, for the reader.
        call: String,
        /// Threads that never started, queued behind it.
        unstarted: usize,
        /// The runtime's bound on carriers.
        max: usize,
        at: SystemTime,
    },
    /// The monitor saw the hold of thread `thread_id` end, `held` long in
    /// all, at `at`.
    HoldEnded {
        thread_id: u64,
        held: Duration,
        at: SystemTime,
    },
}

/// Hands `report` to `weft-reports` (started on first use); never waits.
pub(super) fn submit(report: Report) {
    static QUEUE: OnceLock<Option<SyncSender<Report>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Report>(PENDING_MAX);
        std::thread::Builder::new()
            .name("weft-reports".into())
            .spawn(move || {
                lower_priority();
                for r in rx {
                    // A panicking `tracing` subscriber costs its event, not
                    // the thread: later reports still get written.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.write()));
                }
            })
            .ok()
            .map(|_| tx)
    });
    match queue {
        Some(tx) => match tx.try_send(report) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => crate::events::report_dropped(),
            // The thread is gone (it never ends on its own): write it here.
            Err(TrySendError::Disconnected(r)) => r.write(),
        },
        None => report.write(),
    }
}

/// The nice value of `weft-reports`: a report waits for CPU the program's
/// threads do not use (at nice 10 a thread weighs 110 against a nice-0
/// thread's 1024 in Linux's scheduler), so the first symbol lookup of a
/// process does not take a core from its carriers while they are busy.
const REPORTS_NICE: libc::c_int = 10;

/// Lowers the calling OS thread's priority to [`REPORTS_NICE`]; best
/// effort (a sandbox may refuse), and only for this thread: on Linux
/// `setpriority(PRIO_PROCESS, 0, …)` applies to the calling thread alone.
fn lower_priority() {
    // SAFETY: setpriority reads and writes no memory of ours. The raw
    // system call, so that no libc hook of the `transparent` feature
    // takes it for a virtual thread's.
    unsafe { libc::syscall(libc::SYS_setpriority, libc::PRIO_PROCESS, 0, REPORTS_NICE) };
}

impl Report {
    /// Writes the report up and records its event (on `weft-reports`).
    fn write(self) {
        match self {
            Report::Stall {
                shared,
                carrier,
                tid,
                who,
                held,
                cpu,
                call,
                ips,
                home_work,
                at,
            } => {
                let mut detail = format!("carrier {carrier}, tid {tid}");
                if let Some(call) = call {
                    let _ = write!(detail, ", in {call}");
                }
                let frames = ips.map(|ips| crate::symbols::Resolver::default().frames(&ips));
                // (A registry walk: only when something was queued behind it.)
                if home_work && let Some(shared) = shared.upgrade() {
                    let waiting = waiting_behind(&shared, carrier);
                    if !waiting.is_empty() {
                        let _ = write!(detail, "; waiting behind it: {waiting}");
                    }
                }
                let kind = if cpu {
                    EventKind::StallCpu
                } else {
                    EventKind::StallBlocked
                };
                record(&who, kind, held, detail, frames, at);
            }
            Report::BlockedWithWaiters {
                shared,
                carrier,
                tid,
                who,
                held,
                call,
                unstarted,
                max,
                at,
            } => {
                let waiting = shared
                    .upgrade()
                    .map(|s| waiting_behind(&s, carrier))
                    .unwrap_or_default();
                let mut detail = format!(
                    "carrier {carrier} (tid {tid}) is blocked in {call} while threads wait"
                );
                if !waiting.is_empty() || unstarted == 0 {
                    let _ = write!(
                        detail,
                        "; bound to it: {}. They can run only on this carrier: if the blocked \
                         call waits for one of them (for an OS-level lock one of them holds \
                         across a weft blocking call), this is a deadlock",
                        if waiting.is_empty() {
                            "(none listed)".to_string()
                        } else {
                            waiting
                        }
                    );
                }
                if unstarted > 0 {
                    let _ = write!(
                        detail,
                        "; {unstarted} that never started, queued behind it. They start only \
                         when a carrier is free or a spare comes in (at most {max} carriers): \
                         if the blocked call waits for them (a std::sync::Barrier, a lock, a \
                         message), it waits that long"
                    );
                }
                record(&who, EventKind::BlockedWithWaiters, held, detail, None, at);
            }
            Report::HoldEnded {
                thread_id,
                held,
                at,
            } => crate::events::hold_ended(thread_id, held, at),
        }
    }
}

/// Records `kind` for `who`, the thread that held its carrier.
fn record(
    who: &Identity,
    kind: EventKind,
    held: Duration,
    detail: String,
    frames: Option<Vec<crate::symbols::Frame>>,
    at: SystemTime,
) {
    crate::events::record(crate::events::Event {
        kind,
        thread_id: who.id,
        thread_name: who.name.clone(),
        duration: held,
        at,
        call_site: frames.as_ref().and_then(|f| {
            crate::symbols::first_user_frame(f).map(|i| crate::symbols::describe(&f[i]))
        }),
        stack: frames.map(|f| crate::symbols::format_stack(&f)),
        detail: Some(detail),
        activity: who.activity.clone(),
        ongoing: true,
    });
}

/// The runnable threads bound to carrier `i` of runtime `shared`, as
/// `#id 'name', …` (at most 8 named, then a count).
fn waiting_behind(shared: &Arc<dyn Any + Send + Sync>, i: usize) -> String {
    let shared = Arc::as_ptr(shared);
    let mut names = Vec::new();
    let mut n = 0usize;
    crate::thread::registry::for_each_thread(|t| {
        if t.home.load(Ordering::Relaxed) as usize == i
            && crate::thread::inner_state(t) == State::Runnable
            && t.runtime_shared()
                .is_some_and(|s| std::ptr::addr_eq(s, shared))
        {
            n += 1;
            if names.len() < 8 {
                let (name, id) = crate::thread::Thread::peek_name_id(t);
                names.push(format!("#{id} '{}'", name.unwrap_or("")));
            }
        }
    });
    let mut out = names.join(", ");
    if n > names.len() {
        let _ = write!(out, " and {} more", n - names.len());
    }
    out
}
