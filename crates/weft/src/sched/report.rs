//! The monitor's reports, written off the monitor.
//!
//! When the monitor sees a carrier held past the stall threshold it reads
//! what only that moment can tell — who holds the carrier (and what it
//! said it was doing: the thread may have ended by the time the report is
//! written) and for how long so far, whether its OS thread runs or sleeps
//! and in which system call, its stack as return addresses (`sample.rs`),
//! the threads bound to the carrier that wait behind it (a walk of the
//! registry: by the time the report is written they may have run) — and
//! hands that here as a [`Report`]. One OS thread of the process,
//! `weft-reports`, turns it into an event:
//!
//! - it resolves the addresses to frames — the first lookup of a process
//!   reads the program's debug info: about 100 ms for Weft's own test
//!   binaries on the 2-core machine (`perf` of `examples/spawn_join 400000
//!   virtual` put 14 % of all samples in the monitor's inflate and DWARF
//!   parsing), seconds for a large program;
//! - it records the event (`events::record`), which logs it through
//!   `tracing` and, under `WEFT_TRACE_PINNED`, to stderr: sinks the
//!   program owns, which may be slow or block.
//!
//! None of that is the monitor's to wait for. Its own work — handing the
//! threads behind a stalled carrier to others, bringing in spares, firing the
//! timers of blocked carriers, fetching readiness no carrier fetched —
//! decides whether the program runs, and a report that held it up would
//! hold up exactly what a stall needs most (`tests/monitor_reports.rs`
//! blocks the log sink and checks that another stalled carrier still gets
//! its spare). `weft-reports` runs at the program's own priority: it takes
//! locks carriers take too (the symbol cache, for a pinned wait's or a
//! panic's stack), so a lower one would make them wait on it.
//!
//! Reports and the ends of holds go through one queue, in the order the
//! monitor saw them, so the end of a hold never overtakes its report, and
//! a blocked-with-waiters event finds the stack of its hold's stall. Each
//! carries the time of the monitor's look. Events are therefore recorded
//! in the order they are written up, not always in the order of their
//! times (a pinned event, recorded where it happens, may come first).
//!
//! At most [`pending_max`] reports wait (`WEFT_REPORT_QUEUE`, default
//! 4,096); past that (a sink blocked for good) the monitor drops new ones
//! and counts them
//! (`events::Counters::reports_dropped`). The end of a hold is never
//! dropped: it is small, one per reported hold, and a lost one would leave
//! its stall open for good. A thread that cannot be started (a thread
//! limit) leaves that report to the monitor, which tries again at the next.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, SystemTime};

use super::slot::Identity;
use crate::events::EventKind;
use crate::unpoison::Unpoison;

/// Reports that may wait to be written before the monitor drops new ones:
/// `WEFT_REPORT_QUEUE`, by default [`DEFAULT_PENDING_MAX`], read once.
fn pending_max() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| crate::knob::count("WEFT_REPORT_QUEUE", DEFAULT_PENDING_MAX, 1, "reports"))
}

/// [`pending_max`] when `WEFT_REPORT_QUEUE` is not set: a few MB of
/// reports at most.
const DEFAULT_PENDING_MAX: usize = 4096;

/// What the monitor saw of a hold, for `weft-reports` to write up.
pub(super) enum Report {
    /// Carrier `carrier` held by `who` past the stall threshold.
    Stall {
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
        /// The runnable threads bound to the carrier, as the monitor
        /// listed them (empty: none, or none looked for).
        waiting: String,
        at: SystemTime,
    },
    /// Carrier `carrier` held in the kernel (or a pinned wait) while
    /// threads wait behind it.
    BlockedWithWaiters {
        carrier: usize,
        tid: i32,
        who: Identity,
        held: Duration,
        /// What it is blocked in, for the reader.
        call: String,
        /// The runnable threads bound to the carrier, as the monitor
        /// listed them.
        waiting: String,
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

/// The queue to `weft-reports`, once that thread is running. Per process
/// copy: a `fork` child inherits the parent's queue but not its thread,
/// and starts its own (the parent's queue, and its lock, left untouched).
fn queue() -> &'static Mutex<Option<Sender<Report>>> {
    static QUEUE: crate::fork::PerProcess<Mutex<Option<Sender<Report>>>> =
        crate::fork::PerProcess::new();
    QUEUE.get_or_init(|| Mutex::new(None))
}

/// Stall and blocked-with-waiters reports queued and not yet written.
/// Per process copy: a `fork` child's count starts at 0, not at what the
/// parent's writer had still to write (it never will, here).
fn pending() -> &'static AtomicUsize {
    static PENDING: crate::fork::PerProcess<AtomicUsize> = crate::fork::PerProcess::new();
    PENDING.get_or_init(|| AtomicUsize::new(0))
}

/// Hands `report` to `weft-reports` (started on first use); waits only for
/// the queue's lock, which other monitors take as briefly.
pub(super) fn submit(report: Report) {
    let counted = report.counted();
    if counted && pending().fetch_add(1, Ordering::Relaxed) >= pending_max() {
        pending().fetch_sub(1, Ordering::Relaxed);
        crate::events::report_dropped();
        return;
    }
    let mut queue = queue().lock().unpoison();
    if queue.is_none() {
        *queue = start_writer();
    }
    let report = match queue.as_ref() {
        Some(tx) => match tx.send(report) {
            Ok(()) => return,
            // The thread is gone (it never ends on its own: only a panic
            // while a panic's payload drops); the next report starts
            // another.
            Err(e) => {
                *queue = None;
                e.0
            }
        },
        None => report,
    };
    drop(queue);
    // No thread to write it: the monitor writes this one itself.
    if counted {
        pending().fetch_sub(1, Ordering::Relaxed);
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| report.write()));
}

/// Starts `weft-reports`; `None` if the OS refuses a thread.
fn start_writer() -> Option<Sender<Report>> {
    let (tx, rx) = std::sync::mpsc::channel::<Report>();
    std::thread::Builder::new()
        .name("weft-reports".into())
        .spawn(move || {
            for r in rx {
                let counted = r.counted();
                // A panicking `tracing` subscriber costs its event, not
                // the thread: later reports still get written.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.write()));
                if counted {
                    pending().fetch_sub(1, Ordering::Relaxed);
                }
            }
        })
        .ok()
        .map(|_| tx)
}

impl Report {
    /// Whether it counts against [`pending_max`] (and may be dropped):
    /// every report but the end of a hold.
    fn counted(&self) -> bool {
        !matches!(self, Report::HoldEnded { .. })
    }

    /// Writes the report up and records its event (on `weft-reports`).
    fn write(self) {
        match self {
            Report::Stall {
                carrier,
                tid,
                who,
                held,
                cpu,
                call,
                ips,
                waiting,
                at,
            } => {
                let mut detail = format!("carrier {carrier}, tid {tid}");
                if let Some(call) = call {
                    let _ = write!(detail, ", in {call}");
                }
                let frames = ips.map(|ips| crate::symbols::Resolver::default().frames(&ips));
                if !waiting.is_empty() {
                    let _ = write!(detail, "; waiting behind it: {waiting}");
                }
                let kind = if cpu {
                    EventKind::StallCpu
                } else {
                    EventKind::StallBlocked
                };
                record(&who, kind, held, detail, frames, at);
            }
            Report::BlockedWithWaiters {
                carrier,
                tid,
                who,
                held,
                call,
                waiting,
                unstarted,
                max,
                at,
            } => {
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
    let (stack, call_site) = crate::symbols::stack_and_call_site(frames);
    crate::events::record(crate::events::Event {
        kind,
        thread_id: who.id,
        thread_name: who.name.clone(),
        duration: held,
        at,
        call_site,
        stack,
        detail: Some(detail),
        activity: who.activity.clone(),
        ongoing: true,
    });
}
