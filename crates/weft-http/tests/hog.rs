//! One slow request must not take the server down (issue #39): while a
//! handler holds its carrier — computing on the CPU, or blocked in the
//! kernel by `std::thread::sleep` — every other connection is still
//! answered, new ones are accepted, and a second CPU-bound request starts
//! without waiting for the first.
//!
//! Structural, never timed: each held handler runs until the test releases
//! it (an atomic flag), after the light requests it must not stop have all
//! been answered. A server that strands them never answers, and the test
//! fails when a read times out ([`FAIL_AFTER`]) or a held handler reaches
//! its own deadline ([`HOG_DEADLINE`]); it never hangs. Before the handoff
//! of issue #39 every test in virtual mode failed so (the acceptor and the
//! keep-alive connections were homed on the held carrier); in platform
//! mode a held handler occupies one pool thread only, so they passed
//! already and guard that it stays so.
//!
//! The server runs in its default configuration, on a runtime the test
//! builds with the default settings except a small stall threshold (and,
//! where it says so, one or two carriers). weft-http's tests build `weft`
//! without its `transparent` feature, so `std::thread::sleep` blocks the
//! carrier in the kernel (it would park the virtual thread with it).

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Raw, get};
use weft_http::{Request, Response, Router, ServerConfig, ServerHandle, ThreadMode};

/// A light request not answered in this long was stranded: the test fails.
const FAIL_AFTER: Duration = Duration::from_secs(60);

/// A held handler that is not released in this long gives up and answers
/// `500`: the test fails (and does not hang) when the light requests it
/// waits for are never answered.
const HOG_DEADLINE: Duration = Duration::from_secs(120);

/// The runtime's stall threshold: the monitor looks every 2.5 ms.
const STALL_THRESHOLD: Duration = Duration::from_millis(5);

/// Light requests sent while a handler holds its carrier: over fresh
/// connections, and as many again over the keep-alive ones.
const LIGHT: usize = 200;

/// Keep-alive connections opened (and used once) before any handler holds
/// its carrier.
const KEEP_ALIVE: usize = 10;

/// What the held handlers share with the test.
#[derive(Default)]
struct Hogs {
    /// Set by the test: every held handler returns.
    release: AtomicBool,
    /// Held handlers that have begun.
    started: AtomicUsize,
    /// Set by the first CPU-bound handler when, while it still spins, it
    /// sees a second one begin.
    saw_second: AtomicBool,
    /// Set by a held handler that reached [`HOG_DEADLINE`].
    expired: AtomicBool,
}

impl Hogs {
    /// `GET /cpu`: computes (a multiply-xorshift hash) until released.
    fn cpu(&self) -> Response {
        let me = self.started.fetch_add(1, Ordering::SeqCst) + 1;
        let deadline = Instant::now() + HOG_DEADLINE;
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        loop {
            for i in 0..4096_u64 {
                x = std::hint::black_box(mix(x ^ i));
            }
            if me == 1 && self.started.load(Ordering::SeqCst) >= 2 {
                self.saw_second.store(true, Ordering::SeqCst);
            }
            if self.release.load(Ordering::SeqCst) {
                return Response::text(format!("spun {x:x}"));
            }
            if Instant::now() > deadline {
                self.expired.store(true, Ordering::SeqCst);
                return Response::error(500);
            }
        }
    }

    /// `GET /std-sleep`: blocks its carrier in `nanosleep` until released.
    fn std_sleep(&self) -> Response {
        self.started.fetch_add(1, Ordering::SeqCst);
        let deadline = Instant::now() + HOG_DEADLINE;
        while !self.release.load(Ordering::SeqCst) {
            if Instant::now() > deadline {
                self.expired.store(true, Ordering::SeqCst);
                return Response::error(500);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Response::text("slept")
    }
}

/// A step of a 64-bit multiply-xorshift hash (MurmurHash3's finalizer).
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x
}

/// Releases the held handlers when dropped, so that a failing assertion
/// does not leave them spinning for the rest of the test binary.
struct Release(Arc<Hogs>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.release.store(true, Ordering::SeqCst);
    }
}

/// Which server a test runs.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// Virtual threads on a runtime of this many carriers (`None`: the
    /// default, one per CPU).
    Virtual(Option<usize>),
    /// The default pool of OS threads (200).
    Platform,
}

/// A server of `mode` with `/hello`, `/cpu`, `/std-sleep` and `/tid` (the
/// kernel's id of the OS thread that runs the handler), and its runtime.
fn serve(mode: Mode, hogs: &Arc<Hogs>) -> (ServerHandle, weft::Runtime) {
    let mut b = weft::Runtime::builder().stall_threshold(STALL_THRESHOLD);
    if let Mode::Virtual(Some(n)) = mode {
        b = b.parallelism(n);
    }
    let rt = b.name("hog-test").build().unwrap();
    let mut config = ServerConfig::default().runtime(rt.clone());
    if let Mode::Platform = mode {
        config = config.thread_mode(ThreadMode::platform());
    }
    let (cpu, sleep) = (hogs.clone(), hogs.clone());
    let router = Router::new()
        .get("/hello", |_: &mut Request<'_>| "Hello, World!")
        .get("/cpu", move |_: &mut Request<'_>| cpu.cpu())
        .get("/std-sleep", move |_: &mut Request<'_>| sleep.std_sleep())
        .get("/tid", |_: &mut Request<'_>| {
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() }.to_string()
        });
    (common::start(config, router), rt)
}

/// A connection whose reads fail after [`FAIL_AFTER`] (`limit` for the
/// held requests, whose answers come only when the test releases them).
fn connect(addr: SocketAddr, limit: Duration) -> Raw {
    let raw = common::connect(addr);
    raw.s.set_read_timeout(Some(limit)).unwrap();
    raw
}

/// `GET /hello` over `raw`; panics naming `what` when it is not answered.
fn hello(raw: &mut Raw, what: &str) {
    raw.send(&get("/hello"));
    match raw.response_to(false) {
        Ok(r) => assert_eq!((r.status, r.text()), (200, "Hello, World!"), "{what}"),
        Err(e) => panic!(
            "{what}: not answered while a handler held its carrier ({e}): the server stranded it"
        ),
    }
}

/// Sends `GET path` on a connection of its own from an OS thread; the
/// thread returns the response's status and body once the handler is
/// released.
fn hold(addr: SocketAddr, path: &'static str) -> std::thread::JoinHandle<(u16, String)> {
    hold_on(connect(addr, FAIL_AFTER), path)
}

/// [`hold`] on the connection `raw`.
fn hold_on(mut raw: Raw, path: &'static str) -> std::thread::JoinHandle<(u16, String)> {
    raw.s
        .set_read_timeout(Some(HOG_DEADLINE + FAIL_AFTER))
        .unwrap();
    std::thread::spawn(move || {
        raw.send(&get(path));
        let r = raw.response();
        (r.status, r.text().to_owned())
    })
}

/// Polls `done` until it holds; panics with `what` after [`FAIL_AFTER`].
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < FAIL_AFTER, "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// [`KEEP_ALIVE`] connections, each used once (so that its connection
/// thread has started and waits for the next request head).
fn keep_alive(addr: SocketAddr) -> Vec<Raw> {
    (0..KEEP_ALIVE)
        .map(|i| {
            let mut raw = connect(addr, FAIL_AFTER);
            hello(
                &mut raw,
                &format!("keep-alive connection {i} before the hog"),
            );
            raw
        })
        .collect()
}

/// [`LIGHT`] requests over fresh connections, each followed by one over a
/// keep-alive connection of `kept` (in turn).
fn light_load(addr: SocketAddr, kept: &mut [Raw], during: &str) {
    for i in 0..LIGHT {
        let mut fresh = connect(addr, FAIL_AFTER);
        hello(&mut fresh, &format!("{during}: fresh connection {i}"));
        let k = i % kept.len();
        hello(
            &mut kept[k],
            &format!("{during}: keep-alive connection {k}, request {i}"),
        );
    }
}

/// Releases the held handlers and checks their answers.
fn release(hogs: &Hogs, held: Vec<std::thread::JoinHandle<(u16, String)>>, answer: &str) {
    hogs.release.store(true, Ordering::SeqCst);
    for h in held {
        let (status, body) = h.join().expect("held request's client");
        assert_eq!(status, 200, "a held handler reached its deadline: {body}");
        assert!(body.starts_with(answer), "{body}");
    }
    assert!(!hogs.expired.load(Ordering::SeqCst));
}

/// One held handler (`GET path`, which answers `answer…` once released):
/// [`LIGHT`] `/hello`s over fresh and over earlier keep-alive connections
/// are all answered before it is released.
fn one_hog(mode: Mode, path: &'static str, answer: &str, what: &str) {
    let hogs = Arc::new(Hogs::default());
    let _release = Release(hogs.clone());
    let (server, rt) = serve(mode, &hogs);
    let addr = server.local_addr();
    let mut kept = keep_alive(addr);
    let held = vec![hold(addr, path)];
    wait_for(&format!("{what}: the handler never began"), || {
        hogs.started.load(Ordering::SeqCst) == 1
    });
    light_load(addr, &mut kept, &format!("{mode:?}, {what}"));
    if let Mode::Virtual(Some(1)) = mode {
        // One carrier: the keep-alive connections' threads and the
        // acceptor were started on it, and were answered: they moved.
        assert!(rt.threads_moved() > 0, "{mode:?}, {what}");
    }
    release(&hogs, held, answer);
    server.shutdown(Duration::from_secs(10));
}

/// One CPU-bound request (see [`one_hog`]).
fn one_cpu_hog(mode: Mode) {
    one_hog(mode, "/cpu", "spun", "one CPU-bound request");
}

#[test]
fn one_cpu_bound_request_on_one_carrier_strands_no_connection() {
    one_cpu_hog(Mode::Virtual(Some(1)));
}

#[test]
fn one_cpu_bound_request_strands_no_connection() {
    one_cpu_hog(Mode::Virtual(None));
}

#[test]
fn one_cpu_bound_request_in_platform_mode_strands_no_connection() {
    one_cpu_hog(Mode::Platform);
}

/// Two keep-alive connections of `kept` whose threads ran their last
/// request on the same OS thread (by `/tid`), taken out of it: of
/// [`KEEP_ALIVE`] connections on two carriers, two share one. Without
/// such a pair (more carriers than connections), the first two.
fn same_carrier_pair(kept: &mut Vec<Raw>) -> (Raw, Raw) {
    let tids: Vec<String> = kept
        .iter_mut()
        .map(|raw| {
            raw.send(&get("/tid"));
            raw.response().text().to_owned()
        })
        .collect();
    let (i, j) = (0..tids.len())
        .flat_map(|i| (i + 1..tids.len()).map(move |j| (i, j)))
        .find(|&(i, j)| tids[i] == tids[j])
        .unwrap_or((0, 1));
    let second = kept.remove(j);
    (kept.remove(i), second)
}

/// As many CPU-bound requests as carriers (two), sent over two keep-alive
/// connections whose threads are homed on one carrier: the second begins
/// while the first still spins (the first sees it begin; before the
/// handoff it waited for the first's carrier), and [`LIGHT`] `/hello`s
/// are all answered before they are released.
fn two_cpu_hogs(mode: Mode) {
    let hogs = Arc::new(Hogs::default());
    let _release = Release(hogs.clone());
    let (server, _rt) = serve(mode, &hogs);
    let addr = server.local_addr();
    let mut kept = keep_alive(addr);
    let (first, second) = same_carrier_pair(&mut kept);
    let mut held = vec![hold_on(first, "/cpu")];
    wait_for("the first CPU-bound handler never began", || {
        hogs.started.load(Ordering::SeqCst) == 1
    });
    held.push(hold_on(second, "/cpu"));
    wait_for(
        "the second CPU-bound handler did not begin while the first spun",
        || hogs.saw_second.load(Ordering::SeqCst),
    );
    light_load(
        addr,
        &mut kept,
        &format!("{mode:?}, two CPU-bound requests"),
    );
    release(&hogs, held, "spun");
    server.shutdown(Duration::from_secs(10));
}

#[test]
fn two_cpu_bound_requests_on_two_carriers_run_at_once_and_strand_no_connection() {
    two_cpu_hogs(Mode::Virtual(Some(2)));
}

#[test]
fn two_cpu_bound_requests_in_platform_mode_run_at_once_and_strand_no_connection() {
    two_cpu_hogs(Mode::Platform);
}

/// A handler blocked in `std::thread::sleep` (see [`one_hog`]): on the
/// only carrier, new connections are still accepted and served (the
/// acceptor, started on that carrier, moved), and the keep-alive ones too.
fn std_sleep_hog(mode: Mode) {
    one_hog(
        mode,
        "/std-sleep",
        "slept",
        "a handler in std::thread::sleep",
    );
}

#[test]
fn a_std_sleep_in_a_handler_on_one_carrier_holds_no_other_connection() {
    std_sleep_hog(Mode::Virtual(Some(1)));
}

#[test]
fn a_std_sleep_in_a_handler_in_platform_mode_holds_no_other_connection() {
    std_sleep_hog(Mode::Platform);
}
