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

#[test]
fn the_first_dump_on_a_virtual_thread_does_not_stall_its_carrier() {
    let before = weft::events::counters().own_stalls;
    // The default threshold: far below the first symbolization (about 60
    // ms here), far above the rest of a dump of 33 threads (0.3 ms), so
    // that the OS preempting the dumping carrier on a busy machine does
    // not count.
    common::first_dump_then_marker("diag-first-dump-off", Duration::from_millis(20));
    assert_eq!(
        weft::events::counters().own_stalls,
        before,
        "the dump stalled its carrier"
    );
}
