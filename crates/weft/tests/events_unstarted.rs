//! Threads that never started, queued behind a held carrier that no
//! spare can relieve, raise a blocked-with-waiters event (they once raised
//! none: only threads bound to the carrier counted). The hold is ended by
//! the test (an OS-level wait it releases), not by a clock.

mod common;

use std::time::Duration;

use common::{events_of, held_thread, join_within, wait_until};
use weft::Runtime;
use weft::events::EventKind;

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn threads_that_never_started_behind_a_held_carrier_are_reported() {
    // One carrier and no spare: threads spawned while it is held cannot
    // start anywhere.
    let rt = Runtime::builder()
        .parallelism(1)
        .max_pool_size(1)
        .stall_threshold(Duration::from_millis(20))
        .build()
        .unwrap();
    let (h, release, id) = held_thread(&rt);
    let queued: Vec<_> = (0..3).map(|_| rt.spawn(|| ())).collect();
    wait_until("a blocked-with-waiters event", LIMIT, || {
        !events_of(id, EventKind::BlockedWithWaiters).is_empty()
    });
    let ev = events_of(id, EventKind::BlockedWithWaiters).remove(0);
    let detail = ev.detail.clone().unwrap_or_default();
    assert!(
        detail.contains("3 that never started, queued behind it"),
        "{ev}"
    );
    assert!(detail.contains("at most 1 carriers"), "{ev}");
    release.send(()).unwrap();
    join_within("the held thread", LIMIT, h).unwrap();
    for q in queued {
        join_within("a queued thread", LIMIT, q).unwrap();
    }
    // Its hold ended too.
    wait_until("the end of the hold", LIMIT, || {
        events_of(id, EventKind::BlockedWithWaiters)
            .iter()
            .all(|e| !e.ongoing)
    });
}
