//! Where an event goes: completed or held back, counted, logged (rate
//! limited), printed under `WEFT_TRACE_PINNED`, and kept in the ring; and
//! the end of a hold, which completes its events.

use super::counters::{
    BLOCKED_WITH_WAITERS, OWN_STALLS, PINNED, PINNED_US, SPAWN_FAILURES, STALL_HOLD_US, STALL_US,
    STALLS, STALLS_ENDED, observe_hold,
};
use super::event::{Event, EventKind};
use super::holds::{HOLDS, HOLDS_KEPT, Hold, inside_own_diagnostics};
use super::limiter::{LIMITERS, limiter_index};
use super::ring::{RING, RING_CAPACITY};
use crate::unpoison::Unpoison;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

/// `WEFT_TRACE_PINNED`: print events to stderr.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Trace {
    Off,
    Short,
    Full,
}

pub(super) fn trace_mode() -> Trace {
    static MODE: OnceLock<Trace> = OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("WEFT_TRACE_PINNED").as_deref() {
        Ok("short") => Trace::Short,
        Ok("full") | Ok("1") | Ok("true") => Trace::Full,
        Ok("") | Ok("0") | Ok("off") | Err(_) => Trace::Off,
        Ok(other) => {
            eprintln!("weft: WEFT_TRACE_PINNED={other:?} is not one of short|full; tracing off");
            Trace::Off
        }
    })
}

/// Records an event everywhere it should go.
///
/// Two kinds are completed or held back here, where every source of
/// events passes:
/// - a stall (or blocked-with-waiters) whose stack runs inside Weft's own
///   diagnostics — a dump symbolizing on a carrier, say — is Weft looking,
///   not the program blocking: it is not recorded (a debug-level trace
///   says it happened), and never names Weft's frames as the culprit;
/// - a blocked-with-waiters event that comes without a stack takes the
///   stack and call site of the stall of the same hold, sampled while the
///   carrier was blocked.
pub(crate) fn record(mut ev: Event) {
    match ev.kind {
        EventKind::StallBlocked | EventKind::StallCpu => {
            let own = inside_own_diagnostics(ev.stack.as_deref());
            let mut holds = HOLDS.lock().unpoison();
            if holds.len() == HOLDS_KEPT {
                holds.pop_front();
            }
            holds.push_back(Hold {
                thread_id: ev.thread_id,
                at: ev.at,
                began: ev.at.checked_sub(ev.duration).unwrap_or(ev.at),
                stack: ev.stack.clone(),
                call_site: ev.call_site.clone(),
                own,
                open: ev.ongoing,
            });
            drop(holds);
            if own {
                OWN_STALLS.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: "weft::events", "{ev} (Weft's own diagnostics: not recorded)");
                return;
            }
        }
        EventKind::BlockedWithWaiters if ev.stack.is_none() => {
            // The stall of this hold: same thread, recorded since the hold
            // began.
            let began = ev.at.checked_sub(ev.duration).unwrap_or(ev.at);
            let holds = HOLDS.lock().unpoison();
            if let Some(h) = holds
                .iter()
                .rev()
                .find(|h| h.thread_id == ev.thread_id && h.at >= began && h.at <= ev.at)
            {
                if h.own {
                    return;
                }
                ev.stack = h.stack.clone();
                ev.call_site = h.call_site.clone();
            }
        }
        EventKind::BlockedWithWaiters if inside_own_diagnostics(ev.stack.as_deref()) => return,
        _ => {}
    }
    let us = ev.duration.as_micros() as u64;
    match ev.kind {
        EventKind::Pinned => {
            PINNED.fetch_add(1, Ordering::Relaxed);
            PINNED_US.fetch_add(us, Ordering::Relaxed);
        }
        EventKind::StallBlocked | EventKind::StallCpu => {
            STALLS.fetch_add(1, Ordering::Relaxed);
            STALL_US.fetch_add(us, Ordering::Relaxed);
        }
        EventKind::SpawnFailed => {
            SPAWN_FAILURES.fetch_add(1, Ordering::Relaxed);
        }
        EventKind::BlockedWithWaiters => {
            BLOCKED_WITH_WAITERS.fetch_add(1, Ordering::Relaxed);
        }
    }
    // A stall goes into the histogram when it ends (`hold_ended`), with
    // its whole hold; one that was over when recorded goes in now.
    if !ev.ongoing
        && matches!(
            ev.kind,
            EventKind::Pinned | EventKind::StallBlocked | EventKind::StallCpu
        )
    {
        observe_hold(ev.duration);
    }
    // Through `tracing`, at most one warning per kind and call site per
    // second: a stalled service can record thousands of stalls a second,
    // and a log that repeats one line that often hides everything else.
    // The first warning after a quiet spell says how many were held back.
    if let Some(suppressed) = LIMITERS[limiter_index(ev.kind, ev.call_site.as_deref())]
        .admit(crate::clock::ns_of(std::time::Instant::now()))
    {
        tracing::warn!(
            target: "weft::events",
            kind = ev.kind.name(),
            thread_id = ev.thread_id,
            thread_name = ev.thread_name.as_deref().unwrap_or(""),
            duration_ms = ev.duration.as_secs_f64() * 1e3,
            suppressed,
            "{}{}",
            ev,
            if suppressed > 0 {
                format!(" ({suppressed} more like it in the last second not logged)")
            } else {
                String::new()
            }
        );
    }
    match trace_mode() {
        Trace::Off => {}
        Trace::Short => {
            let top = ev.stack.as_deref().map(short_stack).unwrap_or_default();
            eprintln!("{ev}\n{top}");
        }
        Trace::Full => match &ev.stack {
            Some(st) => eprintln!("{ev}\n{st}"),
            None => eprintln!(
                "{ev}\n    <no stack: the carrier could not be sampled (moved on, or WEFT_SAMPLE_STACKS=0)>"
            ),
        },
    }
    let mut ring = RING.lock().unpoison();
    if ring.len() == RING_CAPACITY {
        ring.pop_front();
    }
    ring.push_back(ev);
}

/// The monitor saw thread `thread_id` give back the carrier it held for
/// `held` (the whole hold): the events of that hold that are still in
/// [`recent`] (its stall, its blocked-with-waiters event) get the whole
/// hold as their duration, the stall goes into [`duration_histogram`],
/// and a line with the total is logged (`tracing`, and stderr under
/// `WEFT_TRACE_PINNED`).
///
/// The events of the hold are the ongoing ones of this thread recorded
/// since the hold began (`held` before `now`, when the monitor saw it
/// end): a thread holds at most one carrier at a time.
pub(crate) fn hold_ended(thread_id: u64, held: Duration, now: SystemTime) {
    let began = now.checked_sub(held).unwrap_or(now);
    let mut stall = None;
    {
        let mut holds = HOLDS.lock().unpoison();
        for h in holds
            .iter_mut()
            .filter(|h| h.open && h.thread_id == thread_id && h.at >= began)
        {
            h.open = false;
            if !h.own {
                stall = Some(h.began);
            }
        }
    }
    if stall.is_some() {
        STALLS_ENDED.fetch_add(1, Ordering::Relaxed);
        STALL_HOLD_US.fetch_add(held.as_micros() as u64, Ordering::Relaxed);
        observe_hold(held);
    }
    let mut ended = None;
    for ev in RING.lock().unpoison().iter_mut().rev() {
        if ev.ongoing && ev.thread_id == thread_id && ev.at >= began {
            ev.ongoing = false;
            ev.duration = ev.duration.max(held);
            if ended.is_none() || ev.kind != EventKind::BlockedWithWaiters {
                ended = Some(ev.clone());
            }
        }
    }
    let Some(ev) = ended else { return };
    if LIMITERS[limiter_index(ev.kind, ev.call_site.as_deref())]
        .admit(crate::clock::ns_of(std::time::Instant::now()))
        .is_some()
    {
        tracing::warn!(
            target: "weft::events",
            kind = ev.kind.name(),
            thread_id = ev.thread_id,
            duration_ms = ev.duration.as_secs_f64() * 1e3,
            "{ev} (ended)"
        );
    }
    if trace_mode() != Trace::Off {
        eprintln!("{ev} (ended)");
    }
}

/// The frames of a backtrace that are not weft's or std's own plumbing.
pub(super) fn short_stack(full: &str) -> String {
    full.lines()
        .filter(|l| {
            let t = l.trim_start();
            !(t.contains("std::")
                || t.contains("core::")
                || t.contains("weft::")
                || t.contains("corosensei"))
        })
        .take(16)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether stacks should be captured for pinned events. Capture costs a
/// few microseconds (symbols are resolved only when printed), paid only
/// when a pinned section actually blocks.
pub(crate) fn capture_stacks() -> bool {
    true
}
