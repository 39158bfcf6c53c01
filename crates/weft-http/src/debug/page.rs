//! The live page: `GET {prefix}/` serves one self-contained HTML file
//! (`page.html`: no external script, style or font), which fetches
//! `{prefix}/live.json` every [`DebugConfig::refresh`] and draws it.
//!
//! `live.json` gathers read-only diagnostics: the carriers
//! ([`weft::carriers`]), the thread counts by state with their history, the
//! largest stack groups of a recent dump ([`weft::Dump::groups`]), the
//! recent stall / pinned / blocked-with-waiters events and the metrics.
//! The history is a ring filled by one OS thread per router (sampling
//! [`weft::state_counts`]), which ends once the router is dropped. The
//! work of a request runs on an offload thread ([`weft::blocking`]), so a
//! dump never holds the carrier that serves the page.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use weft::events::{Event, EventKind};
use weft::sync::Unpoison;
use weft::{CarrierInfo, StackGroup, StateCounts, ThreadGroups};

use super::DebugConfig;
use crate::{Request, Response};

const PAGE: &str = include_str!("page.html");

/// Shortest sampling interval and refresh: a smaller setting is raised.
const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Most samples a history keeps, whatever the settings.
const MAX_SAMPLES: usize = 100_000;
/// Frames of a group's stack sent to the page (the page shows the first
/// user frame and the stack on demand).
const MAX_FRAMES: usize = 64;

/// One router's page: its settings, history and last dump.
pub(super) struct Page {
    config: DebugConfig,
    history: Mutex<VecDeque<Sample>>,
    capacity: usize,
    dump: Mutex<Option<Taken>>,
}

#[derive(Clone, Copy)]
struct Sample {
    at: SystemTime,
    counts: StateCounts,
}

/// A dump's groups, reused for [`DebugConfig::dump_every`].
struct Taken {
    at: Instant,
    dump_ms: f64,
    groups: ThreadGroups,
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

impl Page {
    /// The page, with its sampler thread started.
    pub(super) fn start(config: DebugConfig) -> Arc<Page> {
        let every = config.sample_every.max(MIN_INTERVAL);
        let capacity = usize::try_from(config.history.as_millis() / every.as_millis().max(1))
            .unwrap_or(MAX_SAMPLES)
            .clamp(2, MAX_SAMPLES);
        let page = Arc::new(Page {
            config,
            history: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity,
            dump: Mutex::new(None),
        });
        page.sample();
        let weak = Arc::downgrade(&page);
        // An OS thread: a stalled carrier cannot delay the samples. If it
        // cannot start, the page shows the counts of its requests only.
        let _ = std::thread::Builder::new()
            .name("weft-debug-history".into())
            .spawn(move || sample_until_dropped(&weak, every));
        page
    }

    fn sample(&self) {
        let s = Sample {
            at: SystemTime::now(),
            counts: weft::state_counts(),
        };
        let mut h = self.history.lock().unpoison();
        if h.len() >= self.capacity {
            h.pop_front();
        }
        h.push_back(s);
    }

    /// `GET /`: the page, told where its data is.
    pub(super) fn html(&self, req: &Request<'_>) -> Response {
        let path = req.original_path();
        let base = if path.ends_with('/') {
            path.to_owned()
        } else {
            format!("{path}/")
        };
        let body = PAGE
            .replace("{{BASE}}", &escape_attr(&base))
            .replace("{{REFRESH_MS}}", &self.refresh().as_millis().to_string());
        Response::text(body)
            .with_header("content-type", "text/html; charset=utf-8")
            .with_header("cache-control", "no-store")
    }

    /// `GET /live.json`.
    pub(super) fn live_json(self: &Arc<Page>) -> Response {
        let me = self.clone();
        let doc = weft::blocking(move || me.live());
        Response::json(serde_json::to_string(&doc).unwrap_or_else(|_| "{}".into()))
            .with_header("cache-control", "no-store")
    }

    fn refresh(&self) -> Duration {
        self.config.refresh.max(MIN_INTERVAL)
    }

    fn live(&self) -> Live {
        let t0 = Instant::now();
        let carriers = weft::carriers().iter().map(CarrierView::of).collect();
        let counts = weft::state_counts();
        let history = self.history_view();
        let groups = self.groups_view();
        let events = events_view(self.config.recent_events);
        let metrics = metrics_view();
        Live {
            pid: std::process::id(),
            now: unix(SystemTime::now()),
            refresh_ms: self.refresh().as_millis() as u64,
            carriers,
            counts: CountsView::of(counts),
            history,
            groups,
            events,
            metrics,
            took_ms: ms(t0.elapsed()),
        }
    }

    fn history_view(&self) -> HistoryView {
        let h = self.history.lock().unpoison();
        let pick = |f: fn(&StateCounts) -> usize| h.iter().map(|s| f(&s.counts)).collect();
        HistoryView {
            every_s: self.config.sample_every.max(MIN_INTERVAL).as_secs_f64(),
            t: h.iter().map(|s| unix(s.at)).collect(),
            running: pick(|c| c.running),
            runnable: pick(|c| c.runnable),
            parked: pick(|c| c.parked),
            pinned: pick(|c| c.pinned),
            new: pick(|c| c.new),
        }
    }

    /// The groups of a dump at most [`DebugConfig::dump_every`] old (one
    /// dump at a time: concurrent requests wait for it and share it).
    fn groups_view(&self) -> GroupsView {
        let mut taken = self.dump.lock().unpoison();
        let fresh = taken
            .as_ref()
            .is_some_and(|t| t.at.elapsed() < self.config.dump_every);
        if !fresh {
            let t0 = Instant::now();
            let dump = weft::dump();
            let dump_ms = ms(t0.elapsed());
            *taken = Some(Taken {
                at: Instant::now(),
                dump_ms,
                groups: dump.groups(),
            });
        }
        let Some(t) = taken.as_ref() else {
            return GroupsView::default();
        };
        GroupsView {
            total: t.groups.total,
            count: t.groups.groups.len(),
            age_s: t.at.elapsed().as_secs_f64(),
            dump_ms: t.dump_ms,
            group_ms: ms(t.groups.took),
            list: t
                .groups
                .groups
                .iter()
                .take(self.config.top_groups)
                .map(GroupView::of)
                .collect(),
        }
    }
}

fn sample_until_dropped(page: &Weak<Page>, every: Duration) {
    loop {
        std::thread::sleep(every);
        match page.upgrade() {
            Some(p) => p.sample(),
            None => return,
        }
    }
}

/// `s` safe inside a double-quoted HTML attribute.
fn escape_attr(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            c => o.push(c),
        }
    }
    o
}

#[derive(Serialize)]
struct Live {
    pid: u32,
    now: f64,
    refresh_ms: u64,
    carriers: Vec<CarrierView>,
    counts: CountsView,
    history: HistoryView,
    groups: GroupsView,
    events: Vec<EventView>,
    metrics: Vec<(String, String)>,
    took_ms: f64,
}

#[derive(Serialize)]
struct CarrierView {
    runtime: usize,
    runtime_name: String,
    index: usize,
    spare: bool,
    state: &'static str,
    thread: Option<ThreadView>,
    homed: usize,
    queued: usize,
    /// How long a stalled carrier has been held so far, in ms.
    held_ms: Option<f64>,
}

#[derive(Serialize)]
struct ThreadView {
    id: u64,
    name: Option<String>,
    state: &'static str,
}

impl CarrierView {
    fn of(c: &CarrierInfo) -> CarrierView {
        CarrierView {
            runtime: c.runtime,
            runtime_name: c.runtime_name.clone(),
            index: c.index,
            spare: c.spare,
            state: c.state.as_str(),
            thread: c.thread.as_ref().map(|(id, name, state)| ThreadView {
                id: id.as_u64().get(),
                name: name.clone(),
                state: state.as_str(),
            }),
            homed: c.homed,
            queued: c.queued,
            held_ms: c.held.map(ms),
        }
    }
}

#[derive(Serialize)]
struct CountsView {
    new: usize,
    runnable: usize,
    running: usize,
    parked: usize,
    pinned: usize,
    total: usize,
}

impl CountsView {
    fn of(c: StateCounts) -> CountsView {
        CountsView {
            new: c.new,
            runnable: c.runnable,
            running: c.running,
            parked: c.parked,
            pinned: c.pinned,
            total: c.total(),
        }
    }
}

#[derive(Serialize)]
struct HistoryView {
    every_s: f64,
    t: Vec<f64>,
    running: Vec<usize>,
    runnable: Vec<usize>,
    parked: Vec<usize>,
    pinned: Vec<usize>,
    new: Vec<usize>,
}

#[derive(Serialize, Default)]
struct GroupsView {
    total: usize,
    count: usize,
    age_s: f64,
    dump_ms: f64,
    group_ms: f64,
    list: Vec<GroupView>,
}

#[derive(Serialize)]
struct GroupView {
    count: usize,
    state: &'static str,
    blocker: Option<String>,
    /// The longest any thread of the group has waited on its blocker, in
    /// ms.
    longest_wait_ms: Option<f64>,
    user: Option<String>,
    /// For a group of Weft's own library threads (no frame outside Weft
    /// and std): the first frame of weft-http or weft-pg, which says what
    /// they are (the acceptor, a pool's reaper).
    library: Option<String>,
    stack: Vec<String>,
    first_thread: Option<u64>,
}

fn frame(f: &weft::Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{} ({file}:{line})", f.function),
        _ => f.function.clone(),
    }
}

/// A frame of Weft's libraries above the runtime (weft-http, weft-pg).
fn is_library(f: &weft::Frame) -> bool {
    let name = f.function.trim_start_matches('<');
    ["weft_http::", "weft_pg::"]
        .iter()
        .any(|p| name.starts_with(p))
}

impl GroupView {
    fn of(g: &StackGroup) -> GroupView {
        GroupView {
            count: g.count,
            state: g.state.as_str(),
            blocker: g.blocker.clone(),
            longest_wait_ms: g.longest_wait.map(ms),
            user: g.user_frame().map(frame),
            library: g
                .user_frame()
                .is_none()
                .then(|| g.stack.iter().find(|f| is_library(f)).map(frame))
                .flatten(),
            stack: g.stack.iter().take(MAX_FRAMES).map(frame).collect(),
            first_thread: g.threads.first().map(|id| id.as_u64().get()),
        }
    }
}

#[derive(Serialize)]
struct EventView {
    kind: &'static str,
    thread: u64,
    name: Option<String>,
    ms: f64,
    /// The hold goes on: `ms` is the hold so far.
    ongoing: bool,
    at: f64,
    call_site: Option<String>,
    activity: Option<String>,
    cure: Option<&'static str>,
    detail: Option<String>,
    stack: Option<String>,
}

fn kind_name(k: EventKind) -> Option<&'static str> {
    Some(match k {
        EventKind::Pinned => "pinned",
        EventKind::StallBlocked => "stall (blocked)",
        EventKind::StallCpu => "stall (cpu)",
        EventKind::BlockedWithWaiters => "blocked with waiters",
        _ => return None,
    })
}

/// The newest `n` stall, pinned and blocked-with-waiters events, newest
/// first.
fn events_view(n: usize) -> Vec<EventView> {
    let recent: Vec<Event> = weft::events::recent();
    recent
        .into_iter()
        .rev()
        .filter_map(|e| {
            let cure = e.cure().map(|c| c.advice());
            Some(EventView {
                cure,
                kind: kind_name(e.kind)?,
                thread: e.thread_id,
                name: e.thread_name,
                ms: ms(e.duration),
                ongoing: e.ongoing,
                at: unix(e.at),
                activity: e.activity,
                call_site: e.call_site,
                detail: e.detail,
                stack: e.stack,
            })
        })
        .take(n)
        .collect()
}

/// The runtime's metrics as (series, value) rows: the samples of
/// [`weft::metrics::Metrics::series`], the table `/metrics` writes, with
/// their labels (`weft_carriers{runtime="weft-carrier"}`); a histogram as
/// its `_count` and `_sum`.
fn metrics_view() -> Vec<(String, String)> {
    weft::metrics::snapshot()
        .series()
        .iter()
        .flat_map(|s| {
            s.samples
                .iter()
                .filter(|x| x.suffix != "_bucket")
                .map(move |x| (x.key(s.name), x.value.to_string()))
        })
        .collect()
}
