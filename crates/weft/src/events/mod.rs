//! Runtime events: pinned carriers, stalls, failed spawns — as `tracing`
//! events, optionally printed to stderr (`WEFT_TRACE_PINNED=short|full`, in
//! the spirit of `-Djdk.tracePinnedThreads`), and kept in a bounded ring
//! with counters for programs and thread dumps to read.
//!
//! ```
//! let before = weft::events::counters();
//! weft::spawn(|| weft::pinned(|| weft::sleep(std::time::Duration::from_millis(30)).unwrap()))
//!     .join()
//!     .unwrap();
//! let after = weft::events::counters();
//! assert!(after.pinned > before.pinned);
//! assert!(weft::events::recent().iter().any(|e| e.kind == weft::events::EventKind::Pinned));
//! ```
//!
//! # Files, bottom up
//!
//! `event.rs` (what an event is) names `cure.rs` (what to do about a
//! blocked carrier); `counters.rs` (totals and the hold histogram),
//! `ring.rs` (the recent events), `holds.rs` (the holds the stalls saw)
//! and `limiter.rs` (one warning per kind and site per second) are what
//! `sink.rs` (where an event goes, and the end of a hold) writes.

mod counters;
mod cure;
mod event;
mod holds;
mod limiter;
mod ring;
mod sink;

pub(crate) use counters::report_dropped;
pub use counters::{
    Counters, HISTOGRAM_BOUNDS_MS, HISTOGRAM_BUCKETS, counters, duration_histogram,
    histogram_bucket,
};
pub use cure::Cure;
#[cfg_attr(not(feature = "transparent"), allow(unused_imports))]
pub(crate) use cure::note_transparent_off;
pub use event::{Event, EventKind};
pub(crate) use holds::holding;
pub use ring::{RING_CAPACITY, recent};
pub(crate) use sink::{capture_stacks, hold_ended, record};

#[cfg(test)]
mod tests {
    use super::cure::Cure;
    use super::limiter::Limiter;
    use super::*;
    use crate::symbols::{Frame, format_stack};
    use std::time::{Duration, SystemTime};

    fn fr(function: &str, file: Option<&str>) -> Frame {
        Frame {
            function: function.into(),
            file: file.map(Into::into),
            line: file.map(|_| 17),
        }
    }

    fn event(kind: EventKind, frames: Option<&[Frame]>, detail: &str) -> Event {
        Event {
            kind,
            thread_id: 7,
            thread_name: None,
            duration: Duration::from_millis(30),
            at: SystemTime::now(),
            stack: frames.map(format_stack),
            call_site: frames.and_then(|f| {
                crate::symbols::first_user_frame(f).map(|i| crate::symbols::describe(&f[i]))
            }),
            detail: Some(detail.into()),
            activity: Some("GET /exp/std-sleep".into()),
            ongoing: true,
        }
    }

    const STD: &str = "/rustc/x/library/std/src";

    #[test]
    fn the_cure_follows_the_blocking_call() {
        let user = fr("app::handler::{{closure}}", Some("src/experiments.rs"));
        let sleep = [
            fr(
                "__GI___clock_nanosleep",
                Some("./sysdeps/clock_nanosleep.c"),
            ),
            fr("sleep", Some(&format!("{STD}/thread/functions.rs"))),
            user.clone(),
        ];
        let lock = [
            fr("syscall", None),
            fr(
                "std::sys::sync::mutex::futex::Mutex::lock_contended",
                Some(&format!("{STD}/sys/sync/mutex/futex.rs")),
            ),
            user.clone(),
        ];
        let read = [
            fr("__libc_recv", None),
            fr(
                "<std::net::tcp::TcpStream as std::io::Read>::read",
                Some(&format!("{STD}/net/tcp.rs")),
            ),
            user.clone(),
        ];
        // A sleep further out than the call site does not count: the
        // frames between the blocking call and the user's code decide.
        let spin_lock_then_sleep = [
            fr("syscall", None),
            fr("std::sync::poison::mutex::Mutex<T>::lock", None),
            user.clone(),
            fr("std::thread::sleep", None),
        ];
        for (frames, cure) in [
            (&sleep[..], Cure::Sleep),
            (&lock[..], Cure::Lock),
            (&read[..], Cure::Transparent),
            (&spin_lock_then_sleep[..], Cure::Lock),
        ] {
            for kind in [EventKind::StallBlocked, EventKind::BlockedWithWaiters] {
                let ev = event(kind, Some(frames), "carrier 0, tid 1");
                assert_eq!(ev.cure(), Some(cure), "{frames:?}");
                let text = ev.to_string();
                assert!(
                    text.contains(&format!("; cure: {}", cure.advice())),
                    "{text}"
                );
                assert!(
                    text.contains(
                        "called from app::handler::{{closure}} at src/experiments.rs:17; \
                         activity: GET /exp/std-sleep; cure: "
                    ),
                    "{text}"
                );
            }
        }
        // A third-party lock is where the call site points; it still
        // names the cure.
        let parking_lot = [
            fr("syscall", None),
            fr(
                "lock_slow",
                Some("/home/u/.cargo/registry/src/index/parking_lot-0.12.3/src/raw_mutex.rs"),
            ),
            user.clone(),
        ];
        let ev = event(
            EventKind::StallBlocked,
            Some(&parking_lot),
            "carrier 0, tid 1",
        );
        assert_eq!(ev.cure(), Some(Cure::Lock));
        assert!(Cure::Sleep.advice().contains("weft::sleep"));
        assert!(Cure::Lock.advice().contains("weft::sync"));
        assert!(Cure::Transparent.advice().contains("weft::blocking"));
        // CPU stalls and pinned events get none.
        assert_eq!(event(EventKind::StallCpu, Some(&sleep), "").cure(), None);
        assert_eq!(event(EventKind::Pinned, Some(&lock), "").cure(), None);
    }

    #[test]
    fn without_a_stack_the_system_call_decides() {
        let cure = |detail: &str| event(EventKind::BlockedWithWaiters, None, detail).cure();
        assert_eq!(
            cure("carrier 0 (tid 9) is blocked in clock_nanosleep (std::thread::sleep) while …"),
            Some(Cure::Sleep)
        );
        assert_eq!(
            cure("carrier 0 (tid 9) is blocked in futex (a std::sync/parking_lot lock, …) while …"),
            Some(Cure::Lock)
        );
        assert_eq!(
            cure("carrier 0 (tid 9) is blocked in recvfrom while …"),
            Some(Cure::Transparent)
        );
        assert_eq!(
            cure("carrier 0 (tid 9) is blocked in a pinned wait (weft::pinned) while …"),
            None
        );
        assert_eq!(
            cure("carrier 0 (tid 9) is blocked in the kernel while …"),
            None
        );
        let stall = event(EventKind::StallBlocked, None, "carrier 1, tid 4, in read");
        assert_eq!(stall.cure(), Some(Cure::Transparent));
    }

    #[test]
    fn weft_s_own_diagnostics_are_not_recorded_and_a_hold_s_stack_is_shared() {
        // A stall inside a dump's symbol lookup: not an event.
        let own = [
            fr("gimli::read::abbrev::Abbreviations::insert", None),
            fr(
                "frames",
                Some("/home/u/.cargo/registry/src/index/weft-0.1.0/src/symbols.rs"),
            ),
            fr("weft::dump::dump", None),
            fr("app::debug_page", Some("src/debug.rs")),
        ];
        let mut ev = event(EventKind::StallBlocked, Some(&own), "carrier 0, tid 1");
        ev.thread_id = 1_000_001;
        record(ev.clone());
        // Its blocked-with-waiters twin goes the same way.
        let mut bww = event(
            EventKind::BlockedWithWaiters,
            None,
            "carrier 0 (tid 1) is …",
        );
        bww.thread_id = 1_000_001;
        record(bww);
        assert!(recent().iter().all(|e| e.thread_id != 1_000_001));
        assert!(counters().own_stalls >= 1);

        // A user's stall is recorded, and the blocked-with-waiters event of
        // the same hold gets its stack and call site.
        let user = [
            fr("clock_nanosleep", None),
            fr("app::handler", Some("src/experiments.rs")),
        ];
        let mut ev = event(EventKind::StallBlocked, Some(&user), "carrier 0, tid 1");
        ev.thread_id = 1_000_002;
        record(ev);
        let mut bww = event(
            EventKind::BlockedWithWaiters,
            None,
            "carrier 0 (tid 1) is …",
        );
        bww.thread_id = 1_000_002;
        record(bww);
        let got: Vec<Event> = recent()
            .into_iter()
            .filter(|e| e.thread_id == 1_000_002)
            .collect();
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[1].call_site.as_deref(),
            Some("app::handler at src/experiments.rs:17")
        );
        assert_eq!(got[1].cure(), Some(Cure::Sleep));
    }

    #[test]
    fn one_per_window_and_a_count_of_the_rest() {
        let l = Limiter::new(1_000);
        assert_eq!(l.admit(5), Some(0));
        for t in 6..1_005 {
            assert_eq!(l.admit(t), None, "at {t}");
        }
        assert_eq!(l.admit(1_005), Some(999));
        assert_eq!(l.admit(1_006), None);
        assert_eq!(l.admit(5_000), Some(1));
        assert_eq!(l.admit(9_000), Some(0));
    }
}
