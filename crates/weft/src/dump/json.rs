//! Dumps and groups as JSON, through serde: borrowed views of the
//! snapshot in the shape of JDK 25's `Thread.dump_to_file -format=json`
//! (ids and counts as strings, as the JDK writes them) and, for groups,
//! the same vocabulary around Go's `goroutine?debug=1`.

use serde::Serialize;

use super::group::{StackGroup, ThreadGroups};
use super::{Container, Dump, ThreadInfo, describe_blocker, state_name, unix_secs};
use crate::symbols::Frame;
use crate::thread::Blocker;

const RUNTIME_VERSION: &str = concat!("weft ", env!("CARGO_PKG_VERSION"));

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DumpDoc<'a> {
    thread_dump: ThreadDump<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThreadDump<'a> {
    process_id: String,
    time: String,
    runtime_version: &'static str,
    thread_containers: Vec<ContainerView<'a>>,
    deadlocks: Vec<Vec<String>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ContainerView<'a> {
    container: &'a str,
    parent: Option<&'a str>,
    owner: Option<&'a str>,
    threads: Vec<ThreadView<'a>>,
    thread_count: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThreadView<'a> {
    tid: String,
    name: &'a str,
    state: String,
    #[serde(rename = "virtual")]
    is_virtual: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    activity: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    carrier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    home_carrier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    home_stalled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    park_blocker: Option<ParkBlocker>,
    #[serde(skip_serializing_if = "Option::is_none")]
    blocked_on: Option<String>,
    owns: Vec<String>,
    stack: Vec<String>,
}

#[derive(Serialize)]
struct ParkBlocker {
    object: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
}

/// `function(file:line)`, the JDK's frame shape.
fn frame(f: &Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{}({file}:{line})", f.function),
        _ => f.function.clone(),
    }
}

fn lock_name(addr: usize) -> String {
    format!("weft::sync::Mutex@{addr:#x}")
}

impl<'a> ThreadView<'a> {
    fn of(t: &'a ThreadInfo) -> ThreadView<'a> {
        let owner = match t.blocker {
            Blocker::Lock { owner: Some(o), .. } => Some(o.to_string()),
            _ => None,
        };
        ThreadView {
            tid: t.id.as_u64().to_string(),
            name: t.name.as_deref().unwrap_or(""),
            state: state_name(t.state),
            is_virtual: t.is_virtual,
            activity: t.activity.as_deref(),
            carrier: t.carrier.map(|c| c.to_string()),
            home_carrier: t.home.map(|h| h.to_string()),
            home_stalled: t.home.map(|_| t.home_stalled),
            park_blocker: describe_blocker(&t.blocker).map(|object| ParkBlocker { object, owner }),
            blocked_on: match t.blocker {
                Blocker::Lock { addr, .. } => Some(lock_name(addr)),
                _ => None,
            },
            owns: t.owns.iter().map(|&a| lock_name(a)).collect(),
            stack: t.stack.iter().map(frame).collect(),
        }
    }
}

impl<'a> ContainerView<'a> {
    fn of(d: &'a Dump, c: &'a Container) -> ContainerView<'a> {
        ContainerView {
            container: &c.name,
            parent: c
                .parent
                .and_then(|p| d.containers.iter().find(|x| x.id == p))
                .map(|p| p.name.as_str()),
            owner: None,
            threads: c
                .threads
                .iter()
                .filter_map(|&i| d.threads.get(i))
                .map(ThreadView::of)
                .collect(),
            thread_count: c.threads.len().to_string(),
        }
    }
}

/// serde_json writes these views without error (string keys, no maps of
/// other keys, no floats); an empty object stands in should that change.
fn to_string(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "{}".into())
}

impl Dump {
    /// JSON in the shape of JDK 25's `Thread.dump_to_file -format=json`:
    /// `{"threadDump": {"processId", "time", "runtimeVersion",
    /// "threadContainers": [{"container", "parent", "owner", "threads":
    /// [{"tid", "name", "state", "virtual", "activity", "carrier",
    /// "homeCarrier", "homeStalled", "parkBlocker", "blockedOn", "owns",
    /// "stack"}], "threadCount"}], "deadlocks"}}` (optional fields are left
    /// out when they do not apply).
    pub fn to_json(&self) -> String {
        to_string(&DumpDoc {
            thread_dump: ThreadDump {
                process_id: self.pid.to_string(),
                time: format!("{:.3}", unix_secs(self.time)),
                runtime_version: RUNTIME_VERSION,
                thread_containers: self
                    .containers
                    .iter()
                    .map(|c| ContainerView::of(self, c))
                    .collect(),
                deadlocks: self
                    .deadlocks
                    .iter()
                    .map(|cyc| cyc.iter().map(|id| id.as_u64().to_string()).collect())
                    .collect(),
            },
        })
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupsDoc<'a> {
    thread_groups: GroupsView<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupsView<'a> {
    process_id: String,
    time: String,
    runtime_version: &'static str,
    thread_count: usize,
    groups: Vec<GroupView<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupView<'a> {
    count: usize,
    state: String,
    blocker: Option<&'a str>,
    first_user_frame: Option<String>,
    stack: Vec<String>,
    threads: Vec<String>,
}

impl<'a> GroupView<'a> {
    fn of(g: &'a StackGroup) -> GroupView<'a> {
        GroupView {
            count: g.count,
            state: state_name(g.state),
            blocker: g.blocker.as_deref(),
            first_user_frame: g.user_frame().map(frame),
            stack: g.stack.iter().map(frame).collect(),
            threads: g.threads.iter().map(|id| id.as_u64().to_string()).collect(),
        }
    }
}

impl ThreadGroups {
    /// `{"threadGroups": {"processId", "time", "runtimeVersion",
    /// "threadCount", "groups": [{"count", "state", "blocker",
    /// "firstUserFrame", "stack", "threads"}]}}`, largest group first;
    /// frames as in [`Dump::to_json`], thread ids as strings.
    pub fn to_json(&self) -> String {
        to_string(&GroupsDoc {
            thread_groups: GroupsView {
                process_id: self.pid.to_string(),
                time: format!("{:.3}", unix_secs(self.time)),
                runtime_version: RUNTIME_VERSION,
                thread_count: self.total,
                groups: self.groups.iter().map(GroupView::of).collect(),
            },
        })
    }
}
