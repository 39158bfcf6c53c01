//! Grouped thread dumps: counts, order, the first user frame, and the JSON
//! of dumps and groups read back.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use weft::sync::CountDownLatch;
use weft::{JoinHandle, State, ThreadId};

#[inline(never)]
fn groups_test_latch_waiter(l: &CountDownLatch) {
    // black_box: the call out of tail position, so this frame is on the
    // stack in every build (a tail call would replace it).
    let _ = std::hint::black_box(l.wait());
}

#[inline(never)]
fn groups_test_sleeper(ms: u64) {
    let _ = std::hint::black_box(weft::sleep(Duration::from_millis(60_000 + ms)));
}

#[inline(never)]
fn groups_test_receiver(rx: &weft::channel::Receiver<()>) {
    let _ = std::hint::black_box(rx.recv());
}

/// The tests build groups of the same stacks: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits (bounded) until every thread is parked.
fn wait_parked(hs: &[JoinHandle<()>]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for h in hs {
        while h.thread().state() != State::Parked {
            assert!(Instant::now() < deadline, "{:?} never parked", h.thread());
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn ids(hs: &[JoinHandle<()>]) -> BTreeSet<ThreadId> {
    hs.iter().map(|h| h.thread().id()).collect()
}

struct Three {
    latch: Arc<CountDownLatch>,
    tx: weft::channel::Sender<()>,
    waiters: Vec<JoinHandle<()>>,
    sleepers: Vec<JoinHandle<()>>,
    receivers: Vec<JoinHandle<()>>,
}

/// 30 threads on a latch, 20 asleep (each with its own deadline), 10 on a
/// channel: three groups of known sizes in three distinct stacks.
fn three_groups() -> Three {
    let latch = Arc::new(CountDownLatch::new(1));
    let (tx, rx) = weft::channel::unbounded::<()>();
    let waiters: Vec<_> = (0..30)
        .map(|_| {
            let l = latch.clone();
            weft::spawn(move || groups_test_latch_waiter(&l))
        })
        .collect();
    let sleepers: Vec<_> = (0..20)
        .map(|i| weft::spawn(move || groups_test_sleeper(i)))
        .collect();
    let receivers: Vec<_> = (0..10)
        .map(|_| {
            let rx = rx.clone();
            weft::spawn(move || groups_test_receiver(&rx))
        })
        .collect();
    for hs in [&waiters, &sleepers, &receivers] {
        wait_parked(hs);
    }
    Three {
        latch,
        tx,
        waiters,
        sleepers,
        receivers,
    }
}

impl Three {
    fn finish(self) {
        self.latch.count_down();
        drop(self.tx);
        for h in &self.sleepers {
            h.thread().interrupt();
        }
        for h in self
            .waiters
            .into_iter()
            .chain(self.sleepers)
            .chain(self.receivers)
        {
            h.join().unwrap();
        }
    }
}

#[test]
fn groups_count_order_and_name_the_user_frame() {
    let _serial = serial();
    let three = three_groups();
    let dump = weft::dump();
    let groups = dump.groups();
    assert_eq!(groups.total, dump.threads.len());
    assert_eq!(
        groups.groups.iter().map(|g| g.count).sum::<usize>(),
        dump.threads.len()
    );
    for w in groups.groups.windows(2) {
        assert!(w[0].count >= w[1].count, "not largest first: {groups}");
    }
    let mut positions = Vec::new();
    for (hs, func, blocker) in [
        (&three.waiters, "groups_test_latch_waiter", None),
        (&three.sleepers, "groups_test_sleeper", Some("sleeping")),
        (
            &three.receivers,
            "groups_test_receiver",
            Some("waiting to receive from a channel"),
        ),
    ] {
        let want = ids(hs);
        let (pos, g) = groups
            .groups
            .iter()
            .enumerate()
            .find(|(_, g)| g.threads.contains(want.first().unwrap()))
            .expect("grouped");
        assert_eq!(g.count, hs.len(), "{func}: {groups}");
        assert_eq!(g.threads.iter().copied().collect::<BTreeSet<_>>(), want);
        assert_eq!(g.state, State::Parked);
        if let Some(b) = blocker {
            assert_eq!(g.blocker.as_deref(), Some(b), "{func}");
        }
        let user = g.user_frame().expect("a user frame");
        assert!(user.function.contains(func), "{func}: {user:?}");
        positions.push(pos);
    }
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "30, 20, 10 not in that order: {positions:?}\n{groups}"
    );
    let text = groups.to_string();
    assert!(text.contains("\n30 threads: PARKED"), "{text}");
    assert!(text.contains("\n20 threads: PARKED, sleeping"), "{text}");
    assert!(text.contains("groups_test_receiver"), "{text}");

    // The JSON says the same.
    let v: Value = serde_json::from_str(&groups.to_json()).unwrap();
    let tg = &v["threadGroups"];
    assert_eq!(tg["threadCount"], dump.threads.len());
    assert_eq!(tg["processId"], std::process::id().to_string());
    let list = tg["groups"].as_array().unwrap();
    assert_eq!(list.len(), groups.groups.len());
    for (j, g) in list.iter().zip(&groups.groups) {
        assert_eq!(j["count"], g.count);
        assert_eq!(j["threads"].as_array().unwrap().len(), g.count);
        assert_eq!(j["stack"].as_array().unwrap().len(), g.stack.len());
    }
    let sleepers = list
        .iter()
        .find(|g| g["count"] == 20 && g["blocker"] == "sleeping")
        .expect("the sleepers' group");
    assert!(
        sleepers["firstUserFrame"]
            .as_str()
            .unwrap()
            .contains("groups_test_sleeper"),
        "{sleepers}"
    );
    let tids: BTreeSet<u64> = sleepers["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().parse().unwrap())
        .collect();
    let want: BTreeSet<u64> = ids(&three.sleepers)
        .iter()
        .map(|i| i.as_u64().get())
        .collect();
    assert_eq!(tids, want);
    three.finish();
}

/// The JDK-shaped dump read back names every thread with its state, and
/// keeps the shape (keys, strings for ids and counts).
#[test]
fn dump_json_reads_back() {
    let _serial = serial();
    let three = three_groups();
    let dump = weft::dump();
    let v: Value = serde_json::from_str(&dump.to_json()).unwrap();
    let td = &v["threadDump"];
    assert_eq!(td["processId"], std::process::id().to_string());
    assert!(td["runtimeVersion"].as_str().unwrap().starts_with("weft "));
    assert!(td["time"].as_str().unwrap().parse::<f64>().unwrap() > 0.0);
    assert!(td["deadlocks"].as_array().unwrap().is_empty());
    let containers = td["threadContainers"].as_array().unwrap();
    assert_eq!(containers[0]["container"], "<root>");
    assert!(containers[0]["parent"].is_null());
    let mut seen = 0;
    for c in containers {
        let threads = c["threads"].as_array().unwrap();
        assert_eq!(c["threadCount"], threads.len().to_string());
        for t in threads {
            seen += 1;
            let id: u64 = t["tid"].as_str().unwrap().parse().unwrap();
            let info = dump
                .threads
                .iter()
                .find(|x| x.id.as_u64().get() == id)
                .expect("a listed thread");
            assert_eq!(t["name"], info.name.as_deref().unwrap_or(""));
            assert_eq!(t["virtual"], true);
            assert_eq!(
                t["stack"].as_array().unwrap().len(),
                info.stack.len(),
                "{t}"
            );
        }
    }
    assert_eq!(seen, dump.threads.len());
    let s = three.sleepers[0].thread().id().as_u64().to_string();
    let t = containers[0]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == s.as_str())
        .expect("a sleeper");
    assert_eq!(t["state"], "PARKED");
    assert!(
        t["parkBlocker"]["object"]
            .as_str()
            .unwrap()
            .starts_with("sleeping, "),
        "{t}"
    );
    assert!(
        t["stack"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().contains("groups_test_sleeper")),
        "{t}"
    );
    three.finish();
}

/// Live views: parked threads counted by state, every core carrier listed.
#[test]
fn state_counts_and_carriers() {
    let _serial = serial();
    let three = three_groups();
    let c = weft::state_counts();
    assert!(c.parked >= 60, "{c:?}");
    assert!(c.total() >= c.parked);
    let rt = weft::default_runtime().unwrap();
    let all = weft::carriers();
    let core: Vec<_> = all.iter().filter(|c| c.runtime == 0 && !c.spare).collect();
    assert!(core.len() >= rt.parallelism(), "{all:?}");
    let homed: usize = all.iter().map(|c| c.homed).sum();
    assert!(homed >= 60, "{all:?}");
    // A named runtime's carriers carry its name.
    let named = weft::Runtime::builder()
        .parallelism(1)
        .name("groups-named")
        .build()
        .unwrap();
    let all = weft::carriers();
    assert!(
        all.iter().any(|c| c.runtime_name == "groups-named"),
        "{all:?}"
    );
    assert!(
        all.iter().any(|c| c.runtime_name == "weft-carrier"),
        "{all:?}"
    );
    drop(named);
    three.finish();
}
