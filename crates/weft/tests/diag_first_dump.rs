//! Weft's own diagnostics do not report themselves as the culprit of a
//! stall (issue #30, part 3). The first thread dump of a process reads the
//! program's debug info to symbolize the stacks (tens of milliseconds on
//! a carrier, once): the monitor must not raise a stall "called from …
//! gimli … abbrev.rs" against Weft's own frames.
//!
//! One test in this file: the dump must be the process's first.

mod common;

use std::time::Duration;

use common::{join_within, wait_until};
use weft::events::{Event, EventKind};

/// A known stall after the dump: once its event is in, the monitor (one
/// thread, events in order) has reported whatever it saw of the dump.
#[inline(never)]
fn marker_stall() {
    std::thread::sleep(Duration::from_millis(60));
    // Not a tail call: this frame stays on the stack in every build.
    std::hint::black_box(());
}

#[test]
fn the_first_dump_on_a_virtual_thread_blames_no_frame_of_weft() {
    let rt = weft::Runtime::builder()
        .parallelism(1)
        // Well below the first symbolization on a carrier (about 60 ms
        // here): a dump that did it there would be seen.
        .stall_threshold(Duration::from_millis(10))
        .name("diag-first-dump")
        .build()
        .unwrap();
    // Parked threads with stacks for the dump to symbolize.
    let sleepers: Vec<_> = (0..32)
        .map(|_| rt.spawn(|| weft::sleep(Duration::from_secs(60))))
        .collect();
    wait_until("the sleepers park", Duration::from_secs(20), || {
        sleepers
            .iter()
            .all(|h| h.thread().state() == weft::State::Parked)
    });
    let dumper = rt.spawn(|| {
        let d = weft::dump();
        d.to_string().len()
    });
    let dumper_id = dumper.thread().id().as_u64().get();
    assert!(join_within("the dump", Duration::from_secs(60), dumper).unwrap() > 0);
    let is_stall = |e: &Event| {
        matches!(
            e.kind,
            EventKind::StallBlocked | EventKind::StallCpu | EventKind::BlockedWithWaiters
        )
    };
    let marker = rt.spawn(marker_stall);
    let marker_id = marker.thread().id().as_u64().get();
    join_within("the marker stall", Duration::from_secs(20), marker).unwrap();
    wait_until("the marker stall's event", Duration::from_secs(20), || {
        // By thread, not by frame name: a build without link-time
        // optimisation may name the call site after the closure.
        weft::events::recent()
            .iter()
            .any(|e| e.thread_id == marker_id && is_stall(e))
    });
    let against_the_dump: Vec<String> = weft::events::recent()
        .into_iter()
        .filter(|e| is_stall(e) && e.thread_id == dumper_id)
        .map(|e| format!("{e}\n{}", e.stack.as_deref().unwrap_or_default()))
        .collect();
    assert!(
        against_the_dump.is_empty(),
        "stall events against Weft's own dump:\n{}",
        against_the_dump.join("\n")
    );
    for h in sleepers {
        h.thread().interrupt();
        let _ = join_within("a sleeper", Duration::from_secs(20), h);
    }
}
