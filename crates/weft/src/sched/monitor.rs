//! The monitor: one OS thread per runtime that watches its carriers (Go's
//! sysmon, in small).
//!
//! It never runs virtual threads. It reads the carriers' counters
//! (`switches`, `mounted`, `pinned`) without locks, fires the timers of
//! carriers that cannot (they are blocked), marks a carrier held past the
//! stall threshold as blocked (so a spare can come in), and reports a stall
//! or blocked-with-waiters event naming the thread: it reads what the
//! moment tells (who, how long, the sampled stack, the threads waiting
//! behind the hold) and hands the rest — symbols, the event sinks — to
//! `report.rs`, off this thread. Reporting is its only write outside the
//! scheduler: `events` is a sink that reads nothing back. It sleeps
//! without a timeout while no carrier is busy.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use super::report::{self, Report};
use super::rest::{Rest, Step, WINDOW, Window, cover};
use super::schedstat::{self, SchedStat};
use super::shared::Shared;
use super::slot::CarrierSlot;
use crossbeam_deque::Steal;

use crate::thread::State;

/// The monitor thread's parking spot (Go's sysmon sleeps the same way when
/// every P is idle).
pub(super) struct Monitor {
    pub(super) thread: OnceLock<std::thread::Thread>,
    /// Set while the monitor sleeps without a timeout because no carrier
    /// was busy; the first carrier to mount a thread wakes it.
    pub(super) deep_sleep: AtomicBool,
    /// A carrier poked the monitor since its last pass began: further
    /// pokes need not wake it again (one pass sees them all).
    pub(super) poked: AtomicBool,
}

/// Upper bound on the monitor's tick while any carrier is busy.
pub(super) const MONITOR_TICK: Duration = Duration::from_millis(10);
/// Quiet ticks (no carrier busy) before the monitor sleeps until woken.
pub(super) const MONITOR_QUIET_TICKS: u32 = 10;

impl Shared {
    /// Makes the monitor run a pass now (a carrier opened a blocking
    /// section with threads queued behind it: `blocked.rs`). At most one
    /// futex wake per pass, however many carriers poke; allocates nothing.
    pub(super) fn poke_monitor(&self) {
        if !self.monitor.poked.swap(true, Ordering::SeqCst)
            && let Some(t) = self.monitor.thread.get()
        {
            t.unpark();
        }
    }

    pub(super) fn wake_monitor(&self) {
        if self.monitor.deep_sleep.swap(false, Ordering::SeqCst)
            && let Some(t) = self.monitor.thread.get()
        {
            t.unpark();
        }
    }
}

/// What the monitor remembers of one carrier between ticks.
struct Watch {
    /// The carrier's switch count at the last tick.
    last: u64,
    /// When the monitor first saw the carrier on its current switch count:
    /// a carrier seen on the same count for `stall_threshold` is stalled.
    /// (Monitor-side clocks keep `Instant::now` off the carriers' hot
    /// path.)
    since: Instant,
    /// The monitor's previous look at the carrier.
    prev: Instant,
    /// The last look that saw the carrier on another switch or idle: the
    /// current hold began after it. A hold's whole length is measured from
    /// here, so that it is never less than the hold.
    began: Instant,
    /// The thread whose hold of this carrier an event reported, until the
    /// monitor sees the hold end and tells `events` its whole length.
    reported_hold: Option<u64>,
    /// The carrier's schedstat at the previous look, if that look saw it
    /// on the current hold.
    stat: Option<SchedStat>,
    /// Its time on a CPU at the first look that saw the current hold.
    run_at_first_look: Option<u64>,
    /// The current hold was judged a stall: it stays one until it ends,
    /// however the kernel schedules the carrier afterwards.
    judged: bool,
    /// The carrier's schedstat file, open between looks.
    schedstat: schedstat::Reader,
}

/// The monitor's memory across ticks. Only the monitor thread touches it.
struct Watcher {
    /// One per carrier slot (index = carrier index).
    carriers: Vec<Watch>,
    /// Ticks in a row with no carrier busy, no work queued and every
    /// carrier asleep.
    quiet: u32,
    /// The readiness source's poll count at the last tick.
    polls: u64,
    /// The start of the previous pass (at first, when the runtime was
    /// built): every hold on a carrier first seen in this pass began after
    /// it, so a new [`Watch`] takes it as its previous look. (Taking this
    /// pass's start instead measured a hold already on at the first look
    /// from that look: recorded shorter than the thread's own wait.)
    last_pass: Instant,
    /// The carriers' switch counts summed at the previous pass.
    switches: u64,
    /// Resting carriers: the rule's memory (`sched/rest.rs`).
    rest: Rest,
    /// The window being measured for it: when it began, and the schedstat
    /// of each core carrier on duty then.
    rest_window: Option<(Instant, Vec<Option<SchedStat>>)>,
}

/// Threads the other carriers must have run since the previous pass for a
/// computation holding a carrier to be lowered ([`lower_if_busy_beside`]):
/// 1,600 a second at the 10 ms tick, where a server under load runs tens
/// of thousands and a batch of computations a few.
const SHORT_RUNS_TO_LOWER: u64 = 16;

/// Body of the monitor thread. It never runs virtual threads. Each tick it
/// 1. fires due timers of carriers that are blocked (their owners cannot),
/// 2. reports a stall when a carrier has run one thread past the stall
///    threshold, counts that carrier as blocked and compensates,
/// 3. wakes an idle carrier when a busy one has work waiting behind its
///    running thread (in its `next` slot or queue), so it can be stolen.
///
/// It holds only a `Weak` reference, so it ends with the runtime, and it
/// sleeps without a timeout while no carrier is busy (an idle runtime costs
/// no CPU).
///
/// `built`: when the runtime was built, before any of its threads could
/// run.
pub(crate) fn run_monitor(weak: std::sync::Weak<Shared>, built: Instant) {
    let mut watcher = Watcher {
        carriers: Vec::new(),
        quiet: 0,
        polls: u64::MAX,
        last_pass: built,
        switches: 0,
        rest: Rest::default(),
        rest_window: None,
    };
    loop {
        let Some(shared) = weak.upgrade() else { return };
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let _ = shared.monitor.thread.set(std::thread::current());
        // Pokes from here on wake the next pass; this one sees what the
        // earlier ones were for (the poker raised its mark first).
        shared.monitor.poked.store(false, Ordering::SeqCst);
        let tick = MONITOR_TICK
            .min(shared.stall_threshold / 2)
            .max(Duration::from_millis(1));
        let any_busy = watcher.watch_carriers(&shared);
        watcher.rest_carriers(&shared);
        watcher.poll_missed_readiness();
        let queued = rescue_queued_work(&shared);
        crate::thread::trim_records();
        if watcher.quiet_tick(&shared, any_busy, queued) {
            deep_sleep(&weak, shared);
            continue;
        }
        drop(shared);
        // Until the next tick, or a poke (`Shared::poke_monitor`).
        std::thread::park_timeout(tick);
    }
}

impl Watcher {
    /// One look at every carrier; true if any was running a thread.
    fn watch_carriers(&mut self, shared: &Arc<Shared>) -> bool {
        let n = shared.carriers.len();
        let now = Instant::now();
        // The same moment on the wall clock, for the events of this pass.
        let wall = SystemTime::now();
        let first_look = self.last_pass;
        self.carriers.resize_with(n, || Watch {
            last: u64::MAX,
            since: now,
            prev: first_look,
            began: first_look,
            reported_hold: None,
            stat: None,
            run_at_first_look: None,
            judged: false,
            schedstat: schedstat::Reader::default(),
        });
        self.last_pass = now;
        // Threads run since the previous pass, on every carrier (a held
        // one adds none).
        let total = shared.carriers[..shared.slots_used.load(Ordering::Acquire)]
            .iter()
            .map(|w| w.switches.load(Ordering::Relaxed))
            .sum::<u64>();
        let ran = total.wrapping_sub(self.switches);
        self.switches = total;
        let mut any_busy = false;
        for (i, (w, watch)) in shared.carriers.iter().zip(&mut self.carriers).enumerate() {
            any_busy |= watch_carrier(shared, i, w, watch, now, wall, ran);
        }
        any_busy
    }

    /// Resting and covering carriers (`sched/rest.rs`): measures a window
    /// of the core carriers on duty and carries out the rules' decisions
    /// at its end. Rule 3 first: while a carrier is held, blocked or
    /// pinned, or a spare is on duty, every carrier serves, and none
    /// covers.
    fn rest_carriers(&mut self, shared: &Shared) {
        if !(shared.rest_on || shared.cover_on) || shared.core < 2 {
            return;
        }
        let core = &shared.carriers[..shared.core];
        let resting = shared.resting.load(Ordering::Relaxed);
        let disturbed = shared.active.load(Ordering::SeqCst) != shared.core
            || shared.blocked.get() > 0
            || core.iter().any(|w| {
                w.pinned.load(Ordering::Relaxed)
                    || w.stalled.is_set()
                    || w.handoff.is_held()
                    || w.handoff.is_blocked()
                    || w.handoff.is_demoted()
            });
        if disturbed {
            self.set_covering(shared, false);
            for i in shared.core - resting..shared.core {
                shared.end_rest(i, false);
            }
            self.rest.reset();
            self.rest_window = None;
            return;
        }
        let on_duty = shared.core - resting;
        let now = Instant::now();
        if let Some((start, prev)) = &self.rest_window
            && prev.len() == on_duty
            && now.duration_since(*start) < WINDOW
        {
            return;
        }
        let stats: Vec<Option<SchedStat>> = (0..on_duty)
            .map(|i| {
                self.carriers[i]
                    .schedstat
                    .read(core[i].tid.load(Ordering::Relaxed))
            })
            .collect();
        let window = match self.rest_window.take() {
            Some((start, prev)) if prev.len() == on_duty => {
                measure(start, now, &prev, &stats, shared.cpus)
            }
            _ => None,
        };
        self.rest_window = Some((now, stats));
        let Some(window) = window else { return };
        let covering = shared.covering.load(Ordering::Relaxed);
        self.set_covering(shared, cover(&window, covering));
        if !shared.rest_on {
            return;
        }
        match self.rest.step(window, resting, now) {
            Step::Keep => {}
            Step::Rest => {
                shared.rest_carrier(on_duty - 1);
                self.rest_window = None;
            }
            Step::Return => {
                shared.end_rest(on_duty, true);
                self.rest_window = None;
            }
        }
    }

    /// Rule 4 of `sched/rest.rs`: the carriers cover for each other, or
    /// not (unless a test set it).
    fn set_covering(&self, shared: &Shared, on: bool) {
        if shared.cover_on
            && !shared.covering_forced.load(Ordering::Relaxed)
            && shared.covering.load(Ordering::Relaxed) != on
        {
            shared.covering.store(on, Ordering::Relaxed);
        }
    }

    /// Readiness that no carrier fetched since the last tick (every one
    /// runs a thread, none waits in the source): `netpoll`, rule 3.
    fn poll_missed_readiness(&mut self) {
        if let Some(source) = crate::netpoll::get() {
            if source.polls() == self.polls {
                source.poll();
            }
            self.polls = source.polls();
        }
    }

    /// Counts a quiet tick (no carrier busy, nothing queued, every carrier
    /// asleep); true when there have been enough in a row to sleep until
    /// woken.
    fn quiet_tick(&mut self, shared: &Shared, any_busy: bool, queued: bool) -> bool {
        let all_asleep = shared.idle.num_sleepers.load(Ordering::SeqCst)
            + shared.resting.load(Ordering::SeqCst)
            >= shared.active.load(Ordering::SeqCst);
        self.quiet = if any_busy || !all_asleep || queued {
            0
        } else {
            self.quiet + 1
        };
        if self.quiet >= MONITOR_QUIET_TICKS {
            self.quiet = 0;
            return true;
        }
        false
    }
}

/// The window from `start` to `now`, from the schedstat readings at both
/// ends, for a runtime that may use `cpus` CPUs; `None` if any carrier's
/// is missing (a kernel without schedstat, a carrier's OS thread that
/// changed).
fn measure(
    start: Instant,
    now: Instant,
    prev: &[Option<SchedStat>],
    stats: &[Option<SchedStat>],
    cpus: usize,
) -> Option<Window> {
    let secs = now.duration_since(start).as_secs_f64();
    if secs <= 0.0 {
        return None;
    }
    let (mut run, mut wait) = (0u64, 0u64);
    for (a, b) in prev.iter().zip(stats) {
        let (a, b) = ((*a)?, (*b)?);
        run += b.run_ns.checked_sub(a.run_ns)?;
        wait += b.wait_ns.checked_sub(a.wait_ns)?;
    }
    Some(Window {
        on_duty: stats.len(),
        cpus,
        run: run as f64 / 1e9 / secs,
        wait: wait as f64 / 1e9 / secs,
    })
}

/// One look at carrier `i` (slot `w`); true if it is running a thread.
fn watch_carrier(
    shared: &Arc<Shared>,
    i: usize,
    w: &CarrierSlot,
    watch: &mut Watch,
    now: Instant,
    wall: SystemTime,
    ran: u64,
) -> bool {
    let sw = w.switches.load(Ordering::Relaxed);
    let busy = !w.mounted.load(Ordering::Relaxed).is_null();
    let pinned = w.pinned.load(Ordering::SeqCst);
    let same = busy && sw == watch.last;
    if !same {
        watch.since = now;
        // The hold an event reported (if any) ended since the previous
        // look: its whole length, from before it began to after this look
        // saw it end, goes to that event. After: `now` is the start of
        // this pass, and the monitor may have looked at other carriers (or
        // been preempted) since, while the hold went on.
        if let Some(id) = watch.reported_hold.take() {
            report::submit(Report::HoldEnded {
                thread_id: id,
                held: Instant::now().saturating_duration_since(watch.began),
                at: SystemTime::now(),
            });
        }
        // A new hold began after the previous look, or none is on.
        watch.began = if busy { watch.prev } else { now };
    }
    watch.prev = now;
    watch.last = sw;
    let held = hold_so_far(w, watch, same, busy, now);
    if same && held >= shared.stall_threshold && judge_held(w, watch, shared.stall_threshold) {
        // Handoff first: the threads behind the hold run elsewhere from
        // now on, whatever the events below cost.
        if mark_held(w, sw) {
            hand_off(shared, i, w);
            lower_if_busy_beside(shared, w, sw, ran);
        }
        // The hold so far, from before it began: what the events report.
        let so_far = now.saturating_duration_since(watch.began);
        if let Some(id) = check_stalled(shared, i, w, sw, so_far, pinned, wall) {
            watch.reported_hold = Some(id);
        }
    } else {
        // Not held (any more): a mark left raised is lowered (the rule of
        // `stall::Handoff`).
        w.handoff.heal();
        if w.handoff.is_blocked() {
            // Blocked in a wait it saw coming (`blocked.rs`): the threads
            // queued behind it when it blocked, and any a waker that read
            // its mark too late queued since, run elsewhere.
            hand_off(shared, i, w);
        }
    }
    if pinned || w.stalled.is_set() || w.handing_off() {
        // The owner cannot fire them. Threads that may move (and unbound
        // ones) run elsewhere at once; those that stay are runnable the
        // moment their carrier is back.
        if w.fire_timers_home(now, |t| shared.injector.push(t)) > 0 {
            shared.notify_work();
        }
    }
    if same && !shared.stealers[i].is_empty() {
        shared.notify_work();
    }
    busy
}

/// How long the thread on carrier `w` has held it, as far as the monitor
/// can tell: from the first look that saw the hold, less the time the
/// kernel left the carrier waiting for a CPU meanwhile (its schedstat,
/// read at every look while the carrier is busy). A carrier a neighbour's
/// time slice or a throttled quota kept off the CPU for 100 ms was not
/// held by its thread for those 100 ms; counting them made the monitor
/// report stalls, bring in spares and hand threads off on a loaded
/// machine where every hold was microseconds long.
fn hold_so_far(
    w: &CarrierSlot,
    watch: &mut Watch,
    same: bool,
    busy: bool,
    now: Instant,
) -> Duration {
    let stat = if busy {
        watch.schedstat.read(w.tid.load(Ordering::Relaxed))
    } else {
        None
    };
    if !same {
        watch.run_at_first_look = stat.map(|s| s.run_ns);
        watch.judged = false;
    } else if let (Some(s), Some(prev)) = (stat, watch.stat) {
        let waited = Duration::from_nanos(s.wait_ns.saturating_sub(prev.wait_ns));
        watch.since = (watch.since + waited).min(now);
    }
    watch.stat = stat;
    now.saturating_duration_since(watch.since)
}

/// Carrier `w` is held on switch `sw` past the stall threshold, and the
/// runtime's carriers ran `ran` threads since the previous pass: lowers
/// the carrier's OS thread (`demote.rs`) if the hold is a computation (the
/// kernel says `R`) beside virtual threads that run briefly — the other
/// carriers ran at least [`SHORT_RUNS_TO_LOWER`] threads since the
/// previous pass, as a server's do. A computation beside other
/// computations (a batch: a few threads run per pass) gains nothing from
/// it, and its OS thread would be replaced for nothing; one alone keeps
/// its priority too, as does everything on a runtime built with
/// `held_carrier_nice(0)` or with no room for a spare (`max_pool_size`
/// equal to the parallelism: the lowered carrier, which leaves, could not
/// be stood in for while it serves the threads that stay on it).
fn lower_if_busy_beside(shared: &Shared, w: &CarrierSlot, sw: u64, ran: u64) {
    if shared.held_nice == 0
        || shared.max == shared.core
        || ran < SHORT_RUNS_TO_LOWER
        || w.handoff.is_demoted()
    {
        return;
    }
    if kernel_state(w.tid.load(Ordering::Relaxed)) == Some('R')
        && super::demote::lower(w, sw, shared.held_nice)
    {
        shared.demoted.fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether a hold already past the threshold by [`hold_so_far`] is a
/// stall. The kernel adds a wait to the schedstat only when it ends, so a
/// carrier that is waiting for a CPU right now — runnable (`R`) and on a
/// CPU for less than half the threshold since the hold was first seen —
/// is not judged yet: its wait will be known at a later look. A thread
/// that computes is on a CPU and passes; one that sleeps in the kernel is
/// not runnable and passes. Once judged a stall, a hold stays one until it
/// ends (its threads are not handed back and forth).
fn judge_held(w: &CarrierSlot, watch: &mut Watch, threshold: Duration) -> bool {
    if watch.judged {
        return true;
    }
    if let (Some(now), Some(first)) = (watch.stat, watch.run_at_first_look) {
        let on_cpu = Duration::from_nanos(now.run_ns.saturating_sub(first));
        if on_cpu < threshold / 2 && kernel_state(w.tid.load(Ordering::Relaxed)) == Some('R') {
            return false;
        }
    }
    watch.judged = true;
    true
}

/// Carrier `i` has been on switch `sw` for `held`, past the stall
/// threshold: reports the stall (once per switch), counts the carrier as
/// blocked and compensates; and reports the pinning deadlock — held in the
/// kernel while threads wait behind it (bound ones can run nowhere else).
/// Returns the id of the holding thread if an event reported the hold.
fn check_stalled(
    shared: &Arc<Shared>,
    i: usize,
    w: &CarrierSlot,
    sw: u64,
    held: Duration,
    pinned: bool,
    wall: SystemTime,
) -> Option<u64> {
    let report = !pinned && w.reported.load(Ordering::Relaxed) != sw;
    // Read before a spare comes in and steals the unstarted ones.
    let unstarted = unstarted_behind(shared, i);
    let waiters =
        w.reported_waiters.load(Ordering::Relaxed) != sw && (w.has_home_work() || unstarted > 0);
    if !report && !waiters {
        return None;
    }
    // Who holds it, read now: by the time the stack is sampled and a spare
    // started the thread may have moved on.
    let who = w.mounted_identity(sw)?;
    let tid = w.tid.load(Ordering::Relaxed);
    let cpu = kernel_state(tid) == Some('R');
    if report {
        w.reported.store(sw, Ordering::Relaxed);
        // The stack first (the carrier may move on at any moment), the
        // symbols after compensating.
        let ips = crate::sample::sample(tid).filter(|_| w.switches.load(Ordering::SeqCst) == sw);
        count_stalled(shared, w, sw, cpu);
        report::submit(Report::Stall {
            carrier: i,
            tid,
            who: who.clone(),
            held,
            cpu,
            call: if cpu { None } else { kernel_call(tid) },
            ips,
            // (A registry walk: only when something is queued behind it.)
            waiting: if w.has_home_work() {
                waiting_behind(shared, i)
            } else {
                String::new()
            },
            at: wall,
        });
    }
    let id = who.id;
    if waiters && !cpu {
        w.reported_waiters.store(sw, Ordering::Relaxed);
        report::submit(Report::BlockedWithWaiters {
            carrier: i,
            waiting: waiting_behind(shared, i),
            tid,
            who,
            held,
            call: if pinned {
                "a pinned wait (weft::pinned)".to_string()
            } else {
                kernel_call(tid).unwrap_or_else(|| "the kernel".into())
            },
            unstarted,
            max: shared.max,
            at: wall,
        });
    }
    Some(id)
}

/// Threads that never started and wait behind carrier `i`: those in its
/// run queue, and — when every carrier on duty is stalled and no spare may
/// come in — those in the runtime's global queue. A spare may still take
/// them (unstarted threads are not bound), but while the carrier is stalled
/// they wait, and if the held thread waits for one of them (a barrier, a
/// lock, a message), that wait lasts until a spare starts it.
fn unstarted_behind(shared: &Shared, i: usize) -> usize {
    let mut n = shared.stealers.get(i).map_or(0, |s| s.len());
    let active = shared.active.load(Ordering::SeqCst);
    if active >= shared.max && shared.blocked.get() >= active {
        n += shared.injector.len();
    }
    n
}

/// Counts a stalled carrier (on switch `sw`) as blocked, which makes room
/// for a spare, and brings one in. A CPU-bound thread waits for nothing a
/// spare could help with: it is counted only while fewer than twice the
/// parallelism carriers are on duty; past that, CPU-bound stalls add no
/// carrier at all.
fn count_stalled(shared: &Shared, w: &CarrierSlot, sw: u64, cpu: bool) {
    // A carrier in a blocking section counted itself already (`blocked.rs`).
    let count =
        (!cpu || shared.active.load(Ordering::SeqCst) < 2 * shared.core) && !w.handoff.is_blocked();
    if count && shared.blocked.mark(&w.stalled) {
        // The carrier may have moved on in between; undo (whoever clears
        // the flag uncounts it, once).
        if w.switches.load(Ordering::SeqCst) != sw {
            shared.blocked.clear(&w.stalled);
        } else if cpu {
            shared.compensate_up_to(2 * shared.core);
        } else {
            shared.compensate();
        }
    }
}

/// Marks carrier `w`, seen on switch `sw` past the stall threshold, as
/// held; returns false if the hold ended meanwhile (the rule of
/// `stall::Handoff`: the carrier empties `mounted` before it lowers the
/// mark, we raise it before we read `mounted` and `switches`).
fn mark_held(w: &CarrierSlot, sw: u64) -> bool {
    w.handoff.mark_held(|| {
        !w.mounted.load(Ordering::SeqCst).is_null() && w.switches.load(Ordering::SeqCst) == sw
    })
}

/// Handoff (rule 1 in ARCHITECTURE.md, "Affinity and handoff"): the
/// threads queued for stalled carrier `i` that need not wait for it go to the
/// injector — its `next` slot and inbox (unstarted ones, and started ones
/// that may move, which bind where they next run) and its stealable queue
/// (where a busy carrier would not look). Every tick while the hold lasts:
/// a waker that read the flag before we raised it may still have queued a
/// thread here (rule 2).
fn hand_off(shared: &Shared, i: usize, w: &CarrierSlot) {
    let mut n = w.hand_off_queued(|t| shared.injector.push(t));
    loop {
        match shared.stealers[i].steal() {
            Steal::Success(t) => {
                shared.injector.push(t);
                n += 1;
            }
            Steal::Empty => break,
            Steal::Retry => {}
        }
    }
    if n > 0 {
        shared.notify_work();
    }
}

/// Safety net (Go's sysmon does the same): work queued while no carrier
/// searches gets a carrier, whatever the wake-up protocol missed. Cheap: a
/// few loads per tick. Returns whether work was queued.
fn rescue_queued_work(shared: &Shared) -> bool {
    let queued = shared.has_visible_work();
    if queued && shared.idle.searching.load(Ordering::SeqCst) == 0 {
        shared.notify_work();
    }
    queued
}

/// Sleeps until a carrier wakes the monitor (it mounts a thread) or the
/// runtime ends, unless a carrier woke meanwhile.
fn deep_sleep(weak: &std::sync::Weak<Shared>, shared: Arc<Shared>) {
    shared.monitor.deep_sleep.store(true, Ordering::SeqCst);
    // Re-check after announcing the deep sleep: a carrier that woke in
    // between left the sleeper count first and checks `deep_sleep` after
    // (both SeqCst), so one of us sees the other.
    let all_asleep =
        shared.idle.num_sleepers.load(Ordering::SeqCst) >= shared.active.load(Ordering::SeqCst);
    drop(shared);
    if all_asleep {
        std::thread::park();
    }
    if let Some(shared) = weak.upgrade() {
        shared.monitor.deep_sleep.store(false, Ordering::SeqCst);
    }
}

/// The runnable threads bound to carrier `i` of `shared`, as
/// `#id 'name', …` (at most 8 named, then a count): read while the hold
/// lasts, since by the time the report is written they may have run.
fn waiting_behind(shared: &Arc<Shared>, i: usize) -> String {
    let mut names = Vec::new();
    let mut n = 0usize;
    crate::thread::registry::for_each_thread(|t| {
        if t.home.load(Ordering::Relaxed) as usize == i
            && crate::thread::state_of(t) == State::Runnable
            && t.runtime_shared()
                .is_some_and(|s| std::ptr::eq(s, &**shared))
        {
            n += 1;
            if names.len() < 8 {
                let (name, id) = crate::thread::Thread::peek_name_id(t);
                names.push(format!("#{id} '{}'", name.unwrap_or("")));
            }
        }
    });
    let mut out = names.join(", ");
    if n > names.len() {
        let _ = write!(out, " and {} more", n - names.len());
    }
    out
}

/// The system call a kernel thread of this process sleeps in, by name
/// where we know it (`/proc/self/task/<tid>/syscall`).
pub(super) fn kernel_call(tid: i32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    let nr: i64 = s.split_whitespace().next()?.parse().ok()?;
    Some(
        match nr {
            libc::SYS_futex => "futex (a std::sync/parking_lot lock, a condvar, thread::park)",
            libc::SYS_read => "read",
            libc::SYS_write => "write",
            libc::SYS_recvfrom => "recvfrom",
            libc::SYS_sendto => "sendto",
            libc::SYS_recvmsg => "recvmsg",
            libc::SYS_accept4 => "accept4",
            libc::SYS_connect => "connect",
            libc::SYS_nanosleep => "nanosleep (std::thread::sleep)",
            libc::SYS_clock_nanosleep => "clock_nanosleep (std::thread::sleep)",
            libc::SYS_poll => "poll",
            libc::SYS_ppoll => "ppoll",
            libc::SYS_epoll_wait => "epoll_wait",
            libc::SYS_epoll_pwait => "epoll_pwait",
            libc::SYS_wait4 => "wait4",
            _ => return Some(format!("system call {nr}")),
        }
        .to_string(),
    )
}

/// State letter of a kernel thread of this process (`R`, `S`, `D`, ...).
pub(super) fn kernel_state(tid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The state follows the parenthesised command name, which may itself
    // contain spaces or parentheses: take the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(run_ns: u64, wait_ns: u64) -> Option<SchedStat> {
        Some(SchedStat { run_ns, wait_ns })
    }

    #[test]
    fn a_window_sums_the_carriers_in_cpus() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(200);
        let before = [stat(1_000_000_000, 0), stat(0, 5_000_000)];
        let after = [
            stat(1_100_000_000, 40_000_000),
            stat(50_000_000, 65_000_000),
        ];
        let w = measure(t0, t1, &before, &after, 2).unwrap();
        assert_eq!(w.on_duty, 2);
        assert_eq!(w.cpus, 2);
        assert!((w.run - 0.75).abs() < 1e-9, "{w:?}");
        assert!((w.wait - 0.5).abs() < 1e-9, "{w:?}");
    }

    #[test]
    fn a_missing_or_restarted_reading_gives_no_window() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(200);
        // A kernel without schedstat.
        assert_eq!(measure(t0, t1, &[None], &[stat(1, 1)], 2), None);
        // A new OS thread in the slot: its counts start over.
        assert_eq!(measure(t0, t1, &[stat(9, 9)], &[stat(1, 1)], 2), None);
    }
}
