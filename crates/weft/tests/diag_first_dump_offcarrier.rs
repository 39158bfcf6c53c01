//! The first thread dump of a process, taken on a virtual thread, does not
//! stall its carrier at all (issue #30, part 3): the symbol lookup, which
//! reads the program's debug info the first time (tens of milliseconds),
//! runs off the carrier while the dumping thread parks. Not just "not
//! blamed on Weft" (`diag_first_dump.rs`): not even counted as Weft's own
//! stall.
//!
//! One test in this file: the dump must be the process's first.

mod common;

use std::time::Duration;

use common::{join_within, wait_until};

/// A known stall after the dump: once its event is in, the monitor (one
/// thread, events in order) has reported whatever it saw of the dump.
#[inline(never)]
fn marker_stall() {
    std::thread::sleep(Duration::from_millis(60));
    // Not a tail call: this frame stays on the stack in every build.
    std::hint::black_box(());
}

#[test]
fn the_first_dump_on_a_virtual_thread_does_not_stall_its_carrier() {
    let rt = weft::Runtime::builder()
        .parallelism(1)
        // The default threshold: far below the first symbolization (about
        // 60 ms here), far above the rest of a dump of 33 threads (0.3
        // ms), so that the OS preempting the dumping carrier on a busy
        // machine does not count.
        .stall_threshold(Duration::from_millis(20))
        .name("diag-first-dump-off")
        .build()
        .unwrap();
    let sleepers: Vec<_> = (0..32)
        .map(|_| rt.spawn(|| weft::sleep(Duration::from_secs(60))))
        .collect();
    wait_until("the sleepers park", Duration::from_secs(20), || {
        sleepers
            .iter()
            .all(|h| h.thread().state() == weft::State::Parked)
    });
    let before = weft::events::counters().own_stalls;
    let dumper = rt.spawn(|| weft::dump().to_string().len());
    assert!(join_within("the dump", Duration::from_secs(60), dumper).unwrap() > 0);
    let marker = rt.spawn(marker_stall);
    let marker_id = marker.thread().id().as_u64().get();
    join_within("the marker stall", Duration::from_secs(20), marker).unwrap();
    wait_until("the marker stall's event", Duration::from_secs(20), || {
        weft::events::recent().iter().any(|e| {
            e.thread_id == marker_id
                && e.call_site
                    .as_deref()
                    .is_some_and(|s| s.contains("marker_stall"))
        })
    });
    assert_eq!(
        weft::events::counters().own_stalls,
        before,
        "the dump stalled its carrier"
    );
    for h in sleepers {
        h.thread().interrupt();
        let _ = join_within("a sleeper", Duration::from_secs(20), h);
    }
}
