//! Weft's own diagnostics do not report themselves as the culprit of a
//! stall (issue #30, part 3). The first thread dump of a process reads the
//! program's debug info to symbolize the stacks (tens of milliseconds on
//! a carrier, once): the monitor must not raise a stall "called from …
//! gimli … abbrev.rs" against Weft's own frames.
//!
//! One test in this file: the dump must be the process's first.

mod common;

use std::time::Duration;

use weft::events::EventKind;

#[test]
fn the_first_dump_on_a_virtual_thread_blames_no_frame_of_weft() {
    // Well below the first symbolization on a carrier (about 60 ms here):
    // a dump that did it there would be seen.
    let dumper_id = common::first_dump_then_marker("diag-first-dump", Duration::from_millis(10));
    let against_the_dump: Vec<String> = weft::events::recent()
        .into_iter()
        .filter(|e| {
            e.thread_id == dumper_id
                && matches!(
                    e.kind,
                    EventKind::StallBlocked | EventKind::StallCpu | EventKind::BlockedWithWaiters
                )
        })
        .map(|e| format!("{e}\n{}", e.stack.as_deref().unwrap_or_default()))
        .collect();
    assert!(
        against_the_dump.is_empty(),
        "stall events against Weft's own dump:\n{}",
        against_the_dump.join("\n")
    );
}
