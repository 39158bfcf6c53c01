//! The live debug page (`weft_http::debug`), rendered by a real headless
//! Chromium while 10,000 virtual threads are parked and one carrier is
//! stalled: the largest stack group, the stalled carrier, the chart and the
//! stall event must be in the rendered DOM.
//!
//! Chromium is Debian's package at `/usr/bin/chromium`: with `CI=true` its
//! absence fails the test, elsewhere it is skipped with a message.
//! Screenshots (1280×800 and the whole page) go to
//! `$WEFT_DEBUG_SCREENSHOTS` if set (the docs' are made with
//! `WEFT_DEBUG_SCREENSHOTS=docs/img`), else to the target's temp dir.
//! `--nocapture` prints how long the page took to load and render.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use weft::sync::CountDownLatch;
use weft::{CarrierState, State};
use weft_http::Client;
use weft_http::debug::DebugConfig;

const CHROMIUM: &str = "/usr/bin/chromium";
const PARKED: usize = 10_000;

#[inline(never)]
fn debug_page_parked_worker(l: &CountDownLatch) {
    // black_box: the call out of tail position, so this frame is on the
    // stack in every build (a tail call would replace it).
    let _ = std::hint::black_box(l.wait());
}

/// The other test's threads, in a stack of their own (a body of its own
/// too: identical functions may be folded into one).
#[inline(never)]
fn debug_page_json_worker(rx: &weft::channel::Receiver<()>) {
    let _ = std::hint::black_box(rx.recv());
}

/// Holds its carrier (a `std` sleep, not weft's) until released.
#[inline(never)]
fn debug_page_staller(release: &AtomicBool) {
    while !release.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `cond`, checking every few milliseconds, at most `limit`.
fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn chromium() -> Option<&'static Path> {
    let p = Path::new(CHROMIUM);
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{CHROMIUM} is missing (CI installs Debian's `chromium`)"
    );
    eprintln!("skipping the browser test: {CHROMIUM} is missing (apt-get install chromium)");
    None
}

/// Runs headless Chromium on `url` with `args`, in a fresh profile; its
/// standard output, and how long it ran. Killed after two minutes.
fn run_chromium(chrome: &Path, url: &str, args: &[String]) -> (String, Duration) {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let profile = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "chromium-profile-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&profile);
    let out_path = profile.with_extension("out");
    let out = std::fs::File::create(&out_path).unwrap();
    let t0 = Instant::now();
    let mut child = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within two minutes on {url}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = t0.elapsed();
    assert!(status.success(), "chromium failed: {status}");
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_dir_all(&profile);
    (text, took)
}

/// The value of attribute `name` on the element with `id="{id}"`.
fn attr(dom: &str, id: &str, name: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    let tag = &dom[start..end];
    let key = format!("{name}=\"");
    let v = tag.find(&key)? + key.len();
    Some(tag[v..v + tag[v..].find('"')?].to_owned())
}

struct Scene {
    latch: Arc<CountDownLatch>,
    parked: Vec<weft::JoinHandle<()>>,
    release: Arc<AtomicBool>,
    staller: weft::JoinHandle<()>,
    _runtimes: (weft::Runtime, weft::Runtime),
}

/// 10,000 threads parked in one stack on a one-carrier runtime, spawned in
/// batches (so the chart shows them arrive), then a two-carrier runtime
/// with one carrier stalled by a thread that sleeps with `std`.
fn scene() -> Scene {
    // Its carrier resumes 10,000 threads for each dump: on a loaded
    // machine the OS can preempt it past the default stall threshold
    // (20 ms), and a carrier marked stalled has its threads listed without
    // stacks. The stall under test is the other runtime's.
    let parked_rt = weft::Runtime::builder()
        .parallelism(1)
        .stall_threshold(Duration::from_secs(10))
        .name("parked")
        .build()
        .unwrap();
    let latch = Arc::new(CountDownLatch::new(1));
    let mut parked = Vec::with_capacity(PARKED);
    for _ in 0..10 {
        for _ in 0..PARKED / 10 {
            let l = latch.clone();
            parked.push(parked_rt.spawn(move || debug_page_parked_worker(&l)));
        }
        wait_for("a batch to park", Duration::from_secs(60), || {
            parked.iter().all(|h| h.thread().state() == State::Parked)
        });
    }
    let app = weft::Runtime::builder()
        .parallelism(2)
        .name("app")
        .build()
        .unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let staller = weft::Builder::new()
        .name("stalled-handler")
        .spawn_on(&app, move || debug_page_staller(&r))
        .unwrap();
    let id = staller.thread().id();
    wait_for(
        "the monitor to mark the carrier stalled",
        Duration::from_secs(30),
        || {
            weft::carriers().iter().any(|c| {
                c.state == CarrierState::Stalled && c.thread.as_ref().is_some_and(|t| t.0 == id)
            })
        },
    );
    wait_for("the stall event", Duration::from_secs(30), || {
        weft::events::recent()
            .iter()
            .any(|e| e.thread_id == id.as_u64().get() && e.stack.is_some())
    });
    Scene {
        latch,
        parked,
        release,
        staller,
        _runtimes: (parked_rt, app),
    }
}

impl Scene {
    fn end(self) {
        self.release.store(true, Ordering::SeqCst);
        self.staller.join().unwrap();
        self.latch.count_down();
        for h in self.parked {
            h.join().unwrap();
        }
    }
}

fn screenshot_dir() -> PathBuf {
    match std::env::var_os("WEFT_DEBUG_SCREENSHOTS") {
        Some(d) => {
            let d = PathBuf::from(d);
            if d.is_absolute() {
                d
            } else {
                // Relative to the workspace root, not this crate.
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(d)
            }
        }
        None => PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
    }
}

#[test]
fn live_page_in_chromium_shows_groups_stalled_carrier_and_chart() {
    let Some(chrome) = chromium() else {
        return;
    };
    // A fresh dump for every refresh: the worst case.
    let config = DebugConfig {
        sample_every: Duration::from_millis(100),
        dump_every: Duration::ZERO,
        ..DebugConfig::default()
    };
    let server = weft_http::debug::serve("127.0.0.1:0", config).unwrap();
    let url = format!("http://{}/debug/weft/", server.local_addr());
    let scene = scene();

    // The page's data in real time, first (the first dump symbolizes) and
    // second.
    let c = Client::new();
    for round in ["first", "second"] {
        let t = Instant::now();
        let live: serde_json::Value = c
            .get(&format!("{url}live.json"))
            .send()
            .unwrap()
            .json()
            .unwrap();
        eprintln!(
            "{round} live.json under a stall: {:.1} ms (built in {} ms: dump {} ms, grouping {} ms)",
            t.elapsed().as_secs_f64() * 1e3,
            live["took_ms"],
            live["groups"]["dump_ms"],
            live["groups"]["group_ms"],
        );
    }
    // Chromium's own start and stop, on a blank page, for comparison.
    let budget = "--virtual-time-budget=3000".to_string();
    let (_, blank) = run_chromium(
        chrome,
        "data:text/html,<p>blank</p>",
        &[budget.clone(), "--dump-dom".into()],
    );
    eprintln!(
        "blank page: chromium ran {:.0} ms",
        blank.as_secs_f64() * 1e3
    );
    // Cold (a fresh browser profile), then warm; a run whose page did not
    // render yet is tried again, at most three times. (Times measured in
    // the page are virtual under --virtual-time-budget: not printed.)
    let mut dom = String::new();
    for round in ["cold", "warm"] {
        for attempt in 1..=3 {
            let (d, took) = run_chromium(chrome, &url, &[budget.clone(), "--dump-dom".into()]);
            eprintln!(
                "page under a stall, {round} (attempt {attempt}): chromium ran {:.0} ms, {} refreshes",
                took.as_secs_f64() * 1e3,
                attr(&d, "page", "data-renders").as_deref().unwrap_or("0"),
            );
            dom = d;
            if dom.contains("data-renders=") {
                break;
            }
        }
    }
    assert!(
        dom.contains("data-renders="),
        "the page never rendered:\n{dom}"
    );
    // The largest group: the 10,000 parked threads, named by their frame.
    let group = format!("class=\"group\" data-count=\"{PARKED}\"");
    let at = dom
        .find(&group)
        .unwrap_or_else(|| panic!("no {group}:\n{dom}"));
    let row = &dom[at..at + dom[at..].find("</tr>").unwrap()];
    assert!(row.contains("debug_page_parked_worker"), "{row}");
    assert!(row.contains("data-state=\"parked\""), "{row}");
    // The stalled carrier, marked, with its thread.
    let at = dom
        .find("class=\"carrier stalled\"")
        .unwrap_or_else(|| panic!("no stalled carrier:\n{dom}"));
    let row = &dom[at..at + dom[at..].find("</tr>").unwrap()];
    assert!(row.contains("stalled-handler"), "{row}");
    // The status pill says so (another carrier preempted by a loaded
    // machine past the threshold may join it: "2 carriers stalled").
    assert_eq!(
        attr(&dom, "status", "class").as_deref(),
        Some("pill stalled"),
        "status pill"
    );
    assert!(dom.contains(" stalled</span>"), "status pill's text");
    // The chart.
    let at = dom.find("<svg id=\"chart\"").expect("the chart's svg");
    let chart = &dom[at..at + dom[at..].find("</svg>").unwrap()];
    assert!(chart.contains("data-series=\"parked\""), "{chart}");
    assert!(chart.contains("<polyline"), "{chart}");
    // The stall event, with the staller's frame.
    let events = dom.find("id=\"events\"").map_or("", |at| {
        &dom[at..at + dom[at..].find("</section>").unwrap_or(0)]
    });
    // (Blocked or CPU: on a loaded machine the sleeper may be caught
    // runnable.)
    assert!(
        events
            .split("<details")
            .any(|e| e.contains("data-kind=\"stall (")
                && e.contains("stalled-handler")
                && e.contains("debug_page_staller")),
        "no stall event of the stalled handler: {events}"
    );
    // The metrics.
    assert!(dom.contains("virtual_threads_live"), "metrics");

    let dir = screenshot_dir();
    let _ = std::fs::create_dir_all(&dir);
    for (name, size) in [
        ("debug-weft.png", "1280,800"),
        ("debug-weft-full.png", "1280,1700"),
    ] {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        run_chromium(
            chrome,
            &url,
            &[
                budget.clone(),
                format!("--screenshot={}", path.display()),
                format!("--window-size={size}"),
            ],
        );
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert!(len > 10_000, "screenshot {} is {len} bytes", path.display());
        eprintln!("screenshot: {}", path.display());
    }
    scene.end();
    server.shutdown(Duration::from_secs(5));
}

/// Without a browser: `live.json`, the groups routes and the page itself.
#[test]
fn live_json_and_groups_routes() {
    let server = weft_http::debug::serve("127.0.0.1:0", DebugConfig::default()).unwrap();
    let base = format!("http://{}", server.local_addr());
    let (tx, rx) = weft::channel::unbounded::<()>();
    let hs: Vec<_> = (0..50)
        .map(|_| {
            let rx = rx.clone();
            weft::spawn(move || debug_page_json_worker(&rx))
        })
        .collect();
    wait_for("parked", Duration::from_secs(30), || {
        hs.iter().all(|h| h.thread().state() == State::Parked)
    });
    let c = Client::new();
    let live: serde_json::Value = c
        .get(&format!("{base}/debug/weft/live.json"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(live["counts"]["parked"].as_u64().unwrap() >= 50, "{live}");
    assert!(!live["carriers"].as_array().unwrap().is_empty(), "{live}");
    assert!(
        !live["history"]["t"].as_array().unwrap().is_empty(),
        "{live}"
    );
    let groups = live["groups"]["list"].as_array().unwrap();
    let ours = groups
        .iter()
        .find(|g| {
            g["user"]
                .as_str()
                .is_some_and(|u| u.contains("debug_page_json_worker"))
        })
        .unwrap_or_else(|| panic!("{live}"));
    assert_eq!(ours["count"], 50);

    let text = c
        .get(&format!("{base}/debug/weft/groups"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(text.contains("\n50 threads: PARKED"), "{text}");
    let json: serde_json::Value = c
        .get(&format!("{base}/debug/weft/groups.json"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(
        json["threadGroups"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["count"] == 50),
        "{json}"
    );
    let page = c.get(&format!("{base}/")).send().unwrap();
    assert_eq!(page.status(), 302);
    let page = c
        .get(&format!("{base}/debug/weft/"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(page.contains("data-base=\"/debug/weft/\""), "{page}");
    assert!(!page.contains("<script src"), "self-contained");
    drop(tx);
    for h in hs {
        h.join().unwrap();
    }
    server.shutdown(Duration::from_secs(5));
}
