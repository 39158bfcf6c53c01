//! Context that follows a virtual thread: `tracing` spans entered on a
//! virtual thread are current only while it runs. Its own test binary: it
//! installs a global subscriber.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Records, for every event, its message and the names of the spans
/// current when it was emitted (innermost first).
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Seen>>>);

/// An event's message and its spans, innermost first.
type Seen = (String, Vec<String>);

struct Message(String);
impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut m = Message(String::new());
        event.record(&mut m);
        let spans = ctx
            .event_scope(event)
            .map(|scope| scope.map(|s| s.name().to_string()).collect())
            .unwrap_or_default();
        self.0.lock().unwrap().push((m.0, spans));
    }
}

#[test]
fn spans_follow_their_virtual_thread_across_parks() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(capture.clone()))
        .unwrap();
    // One carrier: the two threads interleave on one OS thread.
    let rt = weft::Runtime::builder().parallelism(1).build().unwrap();
    let names = ["request_a", "request_b"];
    let hs: Vec<_> = names
        .iter()
        .map(|&name| {
            rt.spawn(move || {
                let span = if name == "request_a" {
                    tracing::info_span!("request_a")
                } else {
                    tracing::info_span!("request_b")
                };
                let _entered = span.enter();
                for i in 0..20 {
                    tracing::info!("{name} step {i}");
                    if i % 2 == 0 {
                        weft::yield_now();
                    } else {
                        weft::sleep(Duration::from_micros(200)).unwrap();
                    }
                    let inner = tracing::info_span!("inner");
                    let _g = inner.enter();
                    tracing::info!("{name} inner {i}");
                    weft::park_timeout(Duration::from_micros(100));
                    tracing::info!("{name} inner after park {i}");
                }
            })
        })
        .collect();
    // Meanwhile a third thread on the same carrier logs with no span.
    let bare = rt.spawn(|| {
        for i in 0..40 {
            tracing::info!("bare {i}");
            weft::yield_now();
        }
    });
    for h in hs {
        common::join_within("a span thread", Duration::from_secs(60), h).unwrap();
    }
    bare.join().unwrap();
    let events = capture.0.lock().unwrap().clone();
    assert_eq!(events.len(), 2 * 20 * 3 + 40);
    for (msg, spans) in &events {
        let want: Vec<&str> = if msg.starts_with("bare") {
            vec![]
        } else {
            let owner = if msg.starts_with("request_a") {
                "request_a"
            } else {
                "request_b"
            };
            if msg.contains("inner") {
                vec!["inner", owner]
            } else {
                vec![owner]
            }
        };
        assert_eq!(spans, &want, "event {msg:?} carried the wrong spans");
    }
}
