//! A stall's whole hold: the event recorded while the carrier is held is
//! completed with the whole hold when the thread gives the carrier back,
//! the carriers table shows how long it has been held, and the hold
//! histogram gets the whole hold. The hold is ended by the test, not by a
//! clock: the virtual thread blocks its carrier in an OS-level wait (a
//! `std::sync::mpsc` receive: no `transparent` hooks in this crate's
//! tests) that the test ends when it has seen what it looks for. The only
//! stall of this binary (the histogram is counted exactly).

mod common;

use std::time::Duration;

use common::{events_of, held_thread, join_within, wait_until};
use weft::events::EventKind;
use weft::{CarrierState, Runtime};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn a_stall_reports_its_whole_hold_when_it_ends() {
    let threshold = Duration::from_millis(20);
    let rt = Runtime::builder()
        .parallelism(1)
        .stall_threshold(threshold)
        .build()
        .unwrap();
    let before = weft::events::counters();
    let hist_before = weft::events::duration_histogram();
    let (h, release, id) = held_thread(&rt);

    // While held: the event says so, and the carriers table says for how
    // long (at least the threshold: the stall was reported).
    let ev = events_of(id, EventKind::StallBlocked).remove(0);
    assert!(ev.ongoing, "{ev}");
    assert!(ev.to_string().contains("has held its carrier"), "{ev}");
    let mut held = None;
    wait_until("the carrier's hold in the carriers table", LIMIT, || {
        held = weft::carriers().into_iter().find_map(|c| {
            (c.state == CarrierState::Stalled
                && c.thread.as_ref().map(|t| t.0.as_u64().get()) == Some(id))
            .then_some(c.held)
            .flatten()
        });
        held.is_some()
    });
    assert!(held.unwrap() >= threshold, "{held:?}");

    // Ended by the test: the event gets the whole hold, never less than
    // what the thread itself measured of its wait.
    release.send(()).unwrap();
    let waited = join_within("the held thread", LIMIT, h).unwrap();
    wait_until("the end of the hold", LIMIT, || {
        events_of(id, EventKind::StallBlocked)
            .iter()
            .all(|e| !e.ongoing)
    });
    let ev = events_of(id, EventKind::StallBlocked).remove(0);
    assert!(
        ev.duration >= waited,
        "recorded {:?}, held at least {waited:?}",
        ev.duration
    );
    assert!(ev.to_string().contains("held its carrier for"), "{ev}");
    assert!(!ev.to_string().contains("has held"), "{ev}");

    // The histogram has the whole hold, in its own bucket.
    let after = weft::events::counters();
    assert_eq!(after.stalls_ended, before.stalls_ended + 1);
    assert!(
        after.stall_hold_us - before.stall_hold_us >= waited.as_micros() as u64,
        "{after:?}"
    );
    let hist_after = weft::events::duration_histogram();
    let b = weft::events::histogram_bucket(ev.duration);
    assert_eq!(hist_after[b], hist_before[b] + 1, "bucket {b}");
    let text = weft::metrics::prometheus();
    let sum: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("weft_carrier_hold_seconds_sum "))
        .and_then(|v| v.parse().ok())
        .expect(&text);
    assert!(sum >= waited.as_secs_f64(), "{sum} < {waited:?}");
}

#[test]
fn the_hold_histogram_reaches_seconds() {
    let bounds = weft::events::HISTOGRAM_BOUNDS_MS;
    // A 3-5 s stall lands in a bucket of its own size, not in the last
    // bucket under a second.
    let b = weft::events::histogram_bucket(Duration::from_secs(4));
    assert_eq!(bounds[b], 5_000);
    assert_eq!(
        bounds[weft::events::histogram_bucket(Duration::from_millis(20))],
        20
    );
    assert_eq!(
        bounds[weft::events::histogram_bucket(Duration::from_secs(3_600))],
        u64::MAX
    );
    let text = weft::metrics::prometheus();
    assert!(
        text.contains("weft_carrier_hold_seconds_bucket{le=\"5\"}"),
        "{text}"
    );
    assert!(
        text.contains("weft_carrier_hold_seconds_bucket{le=\"60\"}"),
        "{text}"
    );
}
