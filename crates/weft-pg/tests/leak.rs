//! Leak detection: a connection held past `leak_detection_threshold` logs
//! exactly one warning that names the holder's thread and where it took
//! the connection. (Own test binary: it installs a global `tracing`
//! subscriber to see the warning.)

mod common;

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use weft::sync::CountDownLatch;
use weft_pg::Pool;

#[derive(Default)]
struct Capture(Mutex<Vec<(Level, String)>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

struct Sub(Arc<Capture>);

impl Subscriber for Sub {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.target().starts_with("weft_pg::leak")
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, e: &Event<'_>) {
        let mut m = Message(String::new());
        e.record(&mut m);
        self.0.0.lock().unwrap().push((*e.metadata().level(), m.0));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn capture() -> &'static Arc<Capture> {
    static CAP: OnceLock<Arc<Capture>> = OnceLock::new();
    CAP.get_or_init(|| {
        let c = Arc::new(Capture::default());
        tracing::subscriber::set_global_default(Sub(Arc::clone(&c))).unwrap();
        c
    })
}

fn logged(level: Level) -> Vec<String> {
    capture()
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(l, _)| *l == level)
        .map(|(_, m)| m.clone())
        .collect()
}

#[test]
fn a_connection_held_too_long_logs_one_warning_naming_the_thread() {
    let cap = capture();
    let pg = require_pg!();
    let threshold = Duration::from_millis(300);
    // A long housekeeping period: the warning must not wait for a tick.
    let pool = Pool::new(
        pg.config("weft-pg-leak")
            .max_size(2)
            .leak_detection_threshold(threshold)
            .housekeeping_period(Duration::from_secs(60)),
    )
    .unwrap();

    // A connection returned in time is no leak.
    drop(pool.get().unwrap());

    let release = Arc::new(CountDownLatch::new(1));
    let (p, r) = (pool.clone(), release.clone());
    let leaker = weft::Builder::new()
        .name("leaky-worker")
        .spawn(move || {
            let (mut c, line) = (p.get().unwrap(), line!());
            c.query_one("SELECT 1", &[]).unwrap();
            r.wait().unwrap();
            line
        })
        .unwrap();
    common::wait_until(Duration::from_secs(10), "the leak warning", || {
        !logged(Level::WARN).is_empty()
    });
    // Held for three more thresholds: still exactly one warning.
    weft::sleep(threshold * 3).unwrap();
    release.count_down();
    let line = leaker.join().unwrap();

    let warns = logged(Level::WARN);
    assert_eq!(warns.len(), 1, "{warns:#?}");
    let w = &warns[0];
    assert!(w.contains("connection leak detection triggered"), "{w}");
    assert!(w.contains("virtual thread 'leaky-worker'"), "{w}");
    assert!(
        w.contains(&format!("tests/leak.rs:{line}:")),
        "no get() location in: {w}"
    );
    assert!(w.contains("weft-pg-leak"), "no pool name in: {w}");
    common::wait_until(Duration::from_secs(10), "the 'returned' notice", || {
        logged(Level::INFO).iter().any(|m| {
            m.contains("previously reported leaked connection") && m.contains("leaky-worker")
        })
    });
    assert_eq!(pool.metrics().leaks, 1);
    assert_eq!(cap.0.lock().unwrap().len(), 2);
}
