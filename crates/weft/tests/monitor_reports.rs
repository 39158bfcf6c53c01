//! The monitor never waits for a report to be written: a stall's event
//! goes through `tracing`, a sink the program owns, and a sink that blocks
//! (a full pipe, a lock in the program's logger) must not stop the monitor
//! from bringing in the spare that a second held carrier needs.
//!
//! One test in this file: it installs the process's global `tracing`
//! subscriber.

mod common;

use common::{join_within, wait_until};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Duration;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use weft::events::EventKind;

const LIMIT: Duration = Duration::from_secs(30);

/// A `tracing` subscriber whose sink blocks every warning Weft logs for
/// an event until the test opens its gate.
struct BlockingSink {
    /// Warnings that reached the sink.
    entered: Arc<AtomicUsize>,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl Subscriber for BlockingSink {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.target() == "weft::events" && *m.level() == Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let (open, cv) = &*self.gate;
        let mut open = open.lock().unwrap();
        while !*open {
            open = cv.wait(open).unwrap();
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// A virtual thread of `rt` that says it is doing `activity` and holds its
/// carrier in an OS-level wait (a `std::sync::mpsc` receive) until the
/// returned sender sends; returns once it is in the wait's way (it has said
/// so).
fn holder(
    rt: &weft::Runtime,
    activity: &'static str,
) -> (weft::JoinHandle<()>, mpsc::Sender<()>, u64) {
    let (release, wait) = mpsc::channel::<()>();
    let (started, is_started) = mpsc::channel::<()>();
    let h = rt.spawn(move || {
        weft::set_activity(activity);
        started.send(()).unwrap();
        let _ = wait.recv();
    });
    is_started.recv_timeout(LIMIT).expect("the holder started");
    let id = h.thread().id().as_u64().get();
    (h, release, id)
}

#[test]
fn a_blocked_log_sink_does_not_stop_the_monitor() {
    let entered = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    tracing::subscriber::set_global_default(BlockingSink {
        entered: entered.clone(),
        gate: gate.clone(),
    })
    .unwrap();
    // Two carriers: the monitor brings in a spare for each held carrier
    // while fewer than four are on duty, however it classifies the hold
    // (a thread preempted on its way into the wait reads as running).
    let rt = weft::Runtime::builder()
        .parallelism(2)
        .stall_threshold(Duration::from_millis(10))
        .build()
        .unwrap();
    let before = weft::events::counters();

    // A holds a carrier; its stall is reported, a spare comes in, and the
    // report's warning blocks in the sink.
    let (a, release_a, a_id) = holder(&rt, "holding A");
    wait_until("A's stall warning in the sink", LIMIT, || {
        entered.load(Ordering::SeqCst) >= 1
    });

    // C1 and C2 hold the two carriers left. D can then run only on another
    // spare, which the monitor brings in when it sees their holds: while
    // the sink still blocks.
    let (c1, release_c1, c1_id) = holder(&rt, "holding C1");
    let (c2, release_c2, c2_id) = holder(&rt, "holding C2");
    let d = rt.spawn(|| 42);
    let d_ran = join_within("D, behind three held carriers", LIMIT, d);
    assert_eq!(d_ran.unwrap(), 42);

    // The holders end before the sink opens: what their events say of them
    // was read while they held their carriers, not when written up.
    for r in [release_a, release_c1, release_c2] {
        r.send(()).unwrap();
    }
    for (what, h) in [("A", a), ("C1", c1), ("C2", c2)] {
        join_within(what, LIMIT, h).unwrap();
    }

    // The sink opens: the reports held up behind it are all written.
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    let stall_of = |id: u64| {
        weft::events::recent().into_iter().find(|e| {
            e.thread_id == id
                && matches!(e.kind, EventKind::StallBlocked | EventKind::StallCpu)
                && !e.ongoing
        })
    };
    // A's stall is the one that blocked in the sink. D ran on a spare the
    // monitor brought in for C1's or C2's hold, so that one was reported
    // too; the other may have been released before its hold was seen
    // (on a loaded machine the monitor looks late).
    let cs = [(c1_id, "holding C1"), (c2_id, "holding C2")];
    wait_until(
        "A's and a C's stall recorded, their holds ended",
        LIMIT,
        || stall_of(a_id).is_some() && cs.iter().any(|&(id, _)| stall_of(id).is_some()),
    );
    for (id, activity) in [(a_id, "holding A")].into_iter().chain(cs) {
        if let Some(ev) = stall_of(id) {
            assert_eq!(ev.activity.as_deref(), Some(activity), "{ev}");
        }
    }
    let after = weft::events::counters();
    assert!(after.stalls >= before.stalls + 2, "{after:?}");
    assert_eq!(after.reports_dropped, before.reports_dropped);
}
