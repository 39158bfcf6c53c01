//! Async crates on Weft with nothing set up (feature `tokio`): `block_on`
//! runs futures that need Tokio's reactor, timers and `spawn` — reqwest
//! against a loopback server, a Tokio timer, `tokio::spawn` — on virtual
//! threads (with thread-locals of their own, and sharing their carrier's)
//! and on OS threads, in or out of a Tokio runtime, with no
//! nested-runtime panic. Before `tokio_context.rs` each of these panicked
//! with "there is no reactor running".
//!
//! Run: `cargo test -p weft --profile ci --features tokio --test async_tokio`.
#![cfg(feature = "tokio")]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::join_within;

/// Generous: a watchdog against hangs on a loaded machine, not a timing.
const LIMIT: Duration = Duration::from_secs(120);

/// A loopback HTTP/1.1 server on OS threads (one per connection, keep-alive),
/// answering every GET with `hello <n>`, `n` counting requests served.
fn server() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let served = Arc::new(AtomicUsize::new(0));
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(conn) = conn else { continue };
                let served = Arc::clone(&served);
                std::thread::spawn(move || serve(conn, &served));
            }
        });
        addr
    })
}

fn serve(conn: std::net::TcpStream, served: &AtomicUsize) {
    let mut out = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    loop {
        // The request line and headers, up to the blank line.
        let mut any = false;
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => any = true,
            }
        }
        if !any {
            return;
        }
        let n = served.fetch_add(1, Ordering::Relaxed);
        let body = format!("hello {n}");
        let resp = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: text/plain\r\n\r\n{body}",
            body.len()
        );
        if out.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

/// `n` GETs of the loopback server with reqwest's async client, through
/// `weft::block_on` on the calling thread; the bodies.
fn fetch(client: &reqwest::Client, n: usize) -> Vec<String> {
    let url = format!("http://{}/", server());
    (0..n)
        .map(|_| {
            weft::block_on(async {
                client
                    .get(&url)
                    .send()
                    .await
                    .expect("send")
                    .error_for_status()
                    .expect("200")
                    .text()
                    .await
                    .expect("body")
            })
        })
        .collect()
}

fn check_bodies(bodies: &[String]) {
    for b in bodies {
        assert!(b.starts_with("hello "), "unexpected body {b:?}");
    }
}

/// A Weft runtime whose virtual threads share their carriers'
/// thread-locals (Tokio's context among them).
fn carrier_locals_runtime() -> weft::Runtime {
    weft::Runtime::builder()
        .parallelism(2)
        .carrier_thread_locals()
        .build()
        .unwrap()
}

/// Many virtual threads at once, each with its own requests (a client made
/// inside `block_on`, and one shared by all), on `rt`.
fn reqwest_from_virtual_threads(rt: &weft::Runtime) {
    let shared = reqwest::Client::new();
    let threads: Vec<_> = (0..40)
        .map(|i| {
            let shared = shared.clone();
            rt.spawn(move || {
                if i % 2 == 0 {
                    fetch(&shared, 3)
                } else {
                    fetch(&reqwest::Client::new(), 3)
                }
            })
        })
        .collect();
    for t in threads {
        let bodies = join_within("a virtual thread's requests", LIMIT, t).unwrap();
        assert_eq!(bodies.len(), 3);
        check_bodies(&bodies);
    }
}

#[test]
fn reqwest_on_virtual_threads() {
    let rt = weft::Runtime::builder().parallelism(2).build().unwrap();
    reqwest_from_virtual_threads(&rt);
}

#[test]
fn reqwest_on_virtual_threads_sharing_carrier_locals() {
    reqwest_from_virtual_threads(&carrier_locals_runtime());
}

#[test]
fn reqwest_on_an_os_thread() {
    let bodies = std::thread::spawn(|| fetch(&reqwest::Client::new(), 5))
        .join()
        .unwrap();
    check_bodies(&bodies);
}

/// A Tokio timer, then a task spawned with `tokio::spawn` that sleeps too,
/// awaited: the future `block_on` runs needs the reactor, the timers and
/// `spawn`. Returns the name of the thread the task ran on.
fn timer_and_spawn(i: u64) -> (u64, Option<String>) {
    weft::block_on(async move {
        tokio::time::sleep(Duration::from_millis(1)).await;
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            (i * 2, std::thread::current().name().map(String::from))
        })
        .await
        .unwrap()
    })
}

fn timers_on(rt: &weft::Runtime) {
    let threads: Vec<_> = (0..200u64)
        .map(|i| rt.spawn(move || timer_and_spawn(i)))
        .collect();
    for (i, t) in threads.into_iter().enumerate() {
        let (v, name) = join_within("a timer", LIMIT, t).unwrap();
        assert_eq!(v, 2 * i as u64);
        let name = name.expect("Weft's Tokio threads are named");
        assert!(name.starts_with("weft-tokio-"), "task ran on {name:?}");
    }
}

#[test]
fn tokio_timer_and_spawn_on_virtual_threads() {
    timers_on(&weft::Runtime::builder().parallelism(2).build().unwrap());
}

#[test]
fn tokio_timer_and_spawn_sharing_carrier_locals() {
    timers_on(&carrier_locals_runtime());
}

#[test]
fn tokio_timer_and_spawn_on_an_os_thread() {
    let (v, name) = std::thread::spawn(|| timer_and_spawn(21)).join().unwrap();
    assert_eq!(v, 42);
    assert!(name.unwrap().starts_with("weft-tokio-"));
}

/// A multi-thread runtime with named threads, the user's own.
fn users_runtime(name: &'static str, workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(name)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_callers_runtime_is_used() {
    let tokio_rt = users_runtime("users", 2);
    // An OS thread that entered it.
    let _entered = tokio_rt.enter();
    assert_eq!(timer_and_spawn(1).1.as_deref(), Some("users"));
    // Inside its `block_on` (`#[tokio::main]`).
    let name = tokio_rt.block_on(async { timer_and_spawn(2).1 });
    assert_eq!(name.as_deref(), Some("users"));
}

/// From a task on a runtime with one worker: without `block_in_place` the
/// worker would block, and nobody would drive the timer.
#[test]
fn block_on_inside_a_tokio_task_with_one_worker() {
    let tokio_rt = users_runtime("one", 1);
    let (v, name) = tokio_rt
        .block_on(tokio_rt.spawn(async { timer_and_spawn(5) }))
        .unwrap();
    assert_eq!(v, 10);
    assert_eq!(name.as_deref(), Some("one"));
}

/// Inside a current-thread runtime's `block_on` (`#[tokio::test]`), whose
/// only driver is the blocked thread: Weft's own runtime is used, so the
/// timer fires — no hang, no panic.
#[test]
fn block_on_inside_a_current_thread_runtime() {
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (v, name) = tokio_rt.block_on(async { timer_and_spawn(7) });
    assert_eq!(v, 14);
    assert!(name.unwrap().starts_with("weft-tokio-"));
}

/// Tokio's own `block_on` inside `weft::block_on` on a virtual thread: the
/// entered context is not a runtime's `block_on`, so no nested-runtime
/// panic.
#[test]
fn tokio_block_on_inside_weft_block_on() {
    let t = weft::spawn(|| {
        let inner = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        weft::block_on(async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            inner.block_on(async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                3
            })
        })
    });
    assert_eq!(join_within("nested block_on", LIMIT, t).unwrap(), 3);
}

/// A runtime given to the Weft runtime's builder is the one its virtual
/// threads use.
#[test]
fn the_builders_runtime_is_used() {
    let tokio_rt = users_runtime("given", 1);
    let rt = weft::Runtime::builder()
        .parallelism(2)
        .tokio_handle(tokio_rt.handle().clone())
        .build()
        .unwrap();
    let threads: Vec<_> = (0..20)
        .map(|i| rt.spawn(move || timer_and_spawn(i)))
        .collect();
    for t in threads {
        let (_, name) = join_within("a timer", LIMIT, t).unwrap();
        assert_eq!(name.as_deref(), Some("given"));
    }
}

/// `WEFT_TOKIO_THREADS` sizes Weft's own runtime: its worker threads are
/// named `weft-tokio-N`, and the process exits cleanly with them.
#[test]
fn tokio_threads_knob() {
    const NAME: &str = "tokio_threads_knob";
    if common::is_child(NAME) {
        // Start the runtime and use it; then count its threads by name.
        let names = weft::spawn(|| {
            weft::block_on(async {
                let mut set = tokio::task::JoinSet::new();
                for _ in 0..64 {
                    set.spawn(async {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        std::thread::current().name().map(String::from)
                    });
                }
                let mut names = std::collections::BTreeSet::new();
                while let Some(n) = set.join_next().await {
                    names.insert(n.unwrap().unwrap());
                }
                names
            })
        })
        .join()
        .unwrap();
        let workers = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter(|t| {
                let comm = t.as_ref().unwrap().path().join("comm");
                std::fs::read_to_string(comm).is_ok_and(|c| c.starts_with("weft-tokio-"))
            })
            .count();
        println!("workers={workers} names={names:?}");
        return;
    }
    let out = common::run_child(NAME, &[("WEFT_TOKIO_THREADS", "3")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stdout.contains("workers=3 "), "{stdout}");
}
