//! `clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, …)` on a virtual thread
//! parks until the real-time clock has reached the deadline (re-read
//! during the sleep, so a clock change is followed; a test cannot set the
//! clock without privileges, so only the deadline itself is checked), and
//! returns at once for a deadline already past.

use std::time::Duration;

use weft_transparent_tests::{strict_runtime, watchdog};

fn realtime() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn sleep_until(deadline: Duration) -> i32 {
    let ts = libc::timespec {
        tv_sec: deadline.as_secs() as libc::time_t,
        tv_nsec: deadline.subsec_nanos() as libc::c_long,
    };
    // SAFETY: a valid timespec; no remainder (absolute).
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_REALTIME,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    }
}

#[test]
fn an_absolute_realtime_sleep_ends_at_its_deadline() {
    let _w = watchdog(
        "an_absolute_realtime_sleep_ends_at_its_deadline",
        Duration::from_secs(60),
    );
    let rt = strict_runtime(1);
    let parks = || {
        weft::transparent::parks()
            .into_iter()
            .find(|(c, _)| *c == "clock_nanosleep")
            .map_or(0, |(_, n)| n)
    };
    let before = parks();
    let (r, deadline, after) = rt
        .spawn(|| {
            let deadline = realtime() + Duration::from_millis(30);
            let r = sleep_until(deadline);
            (r, deadline, realtime())
        })
        .join()
        .unwrap();
    assert_eq!(r, 0);
    assert!(after >= deadline, "woke at {after:?}, before {deadline:?}");
    assert!(parks() > before, "the sleep parked");
    // A deadline already past: at once, without a park.
    let before = parks();
    let r = rt
        .spawn(|| sleep_until(realtime() - Duration::from_secs(5)))
        .join()
        .unwrap();
    assert_eq!(r, 0);
    assert_eq!(parks(), before);
}
