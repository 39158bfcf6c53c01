//! Lifecycle: `ServerHandle::wait`, and `serve_until_signal` draining
//! under load when the process gets SIGTERM (in a child process: this
//! test binary run again with an environment variable that selects the
//! child's role).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weft_http::{Client, ClientConfig, Router, Server, ServerConfig, ThreadMode};

const CHILD_ENV: &str = "WEFT_HTTP_SIGTERM_CHILD";
const TEST_NAME: &str = "sigterm_drains_every_accepted_request_and_exits_0";
/// Failure detector for the parent's waits (never asserted as a timing).
const LIMIT: Duration = Duration::from_secs(60);

/// Requests that reached the child's handler.
static HANDLED: AtomicU64 = AtomicU64::new(0);

/// The child: serves `/work` (50 ms of blocking work) until SIGTERM,
/// prints how many requests reached the handler, exits 0 on a clean drain.
fn child(mode: ThreadMode) -> ! {
    let router = Router::new().get("/work", |_req| {
        HANDLED.fetch_add(1, Ordering::SeqCst);
        weft::sleep(Duration::from_millis(50)).ok();
        "done"
    });
    let server = Server::bind("127.0.0.1:0", ServerConfig::default().thread_mode(mode))
        .and_then(|s| s.serve(router))
        .expect("serve");
    println!("LISTENING {}", server.local_addr());
    let report = server
        .serve_until_signal(Duration::from_secs(20))
        .expect("serve_until_signal");
    println!(
        "HANDLED {} DRAINED {} FORCED {}",
        HANDLED.load(Ordering::SeqCst),
        report.drained,
        report.forced
    );
    std::process::exit(if report.drained { 0 } else { 3 });
}

struct Load {
    ok: AtomicU64,
    ok_closing: AtomicU64,
    errors: AtomicU64,
    signaled: AtomicBool,
}

fn run_parent(mode: &str) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            kill_and_panic(&mut child, "child exited before listening");
        }
        // libtest may have printed "test … ... " on the same line.
        if let Some((_, a)) = line.trim().split_once("LISTENING ") {
            break a.to_owned();
        }
    };
    let url = format!("http://{addr}/work");
    let load = Arc::new(Load {
        ok: AtomicU64::new(0),
        ok_closing: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        signaled: AtomicBool::new(false),
    });
    // 16 keep-alive clients on loopback, each bounded to 2,000 requests;
    // after the signal each stops at its first failed request (the server
    // no longer accepts).
    let clients: Vec<_> = (0..16)
        .map(|_| {
            let (load, url) = (load.clone(), url.clone());
            std::thread::spawn(move || {
                let client = Client::with_config(ClientConfig {
                    read_timeout: Some(Duration::from_secs(30)),
                    ..ClientConfig::default()
                });
                for _ in 0..2_000 {
                    match client.get(&url).send().and_then(|r| {
                        let closing = !r.is_keep_alive();
                        Ok((r.status(), closing, r.text()?))
                    }) {
                        Ok((200, closing, body)) if body == "done" => {
                            load.ok.fetch_add(1, Ordering::SeqCst);
                            if closing {
                                load.ok_closing.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        Ok(other) => panic!("unexpected response {other:?}"),
                        Err(_) => {
                            load.errors.fetch_add(1, Ordering::SeqCst);
                            if load.signaled.load(Ordering::SeqCst) {
                                return;
                            }
                        }
                    }
                }
            })
        })
        .collect();
    // Let the load build up, then SIGTERM.
    let start = Instant::now();
    while load.ok.load(Ordering::SeqCst) < 100 {
        if start.elapsed() > LIMIT {
            kill_and_panic(&mut child, "no load reached the child");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    load.signaled.store(true, Ordering::SeqCst);
    // SAFETY: kill(2) with a valid pid (our own child, not yet reaped) and
    // a valid signal number has no memory-safety requirements.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill failed");
    for c in clients {
        c.join().expect("load thread");
    }
    let status = wait_with_limit(&mut child);
    let mut rest = String::new();
    for line in out.lines() {
        let line = line.unwrap();
        if let Some(i) = line.find("HANDLED ") {
            rest = line[i..].to_owned();
        }
    }
    let fields: Vec<&str> = rest.split_whitespace().collect();
    assert!(
        fields.len() == 6,
        "child summary missing: {rest:?} (status {status:?})"
    );
    let handled: u64 = fields[1].parse().unwrap();
    let ok = load.ok.load(Ordering::SeqCst);
    let closing = load.ok_closing.load(Ordering::SeqCst);
    eprintln!(
        "{mode}: handled {handled}, answered {ok} ({closing} drained with Connection: close), \
         failed after the signal {}; child: {rest}",
        load.errors.load(Ordering::SeqCst)
    );
    assert_eq!(
        status.code(),
        Some(0),
        "{mode}: exit status {status:?}, {rest}"
    );
    assert_eq!(fields[3], "true", "{mode}: not drained: {rest}");
    // Every request that reached the handler was answered in full.
    assert_eq!(ok, handled, "{mode}: accepted requests were dropped");
    // And the drain was real: requests in flight at the signal finished
    // after shutdown began (their responses close the connection).
    assert!(
        closing >= 1,
        "{mode}: no request was in flight at the signal"
    );
}

fn wait_with_limit(child: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if start.elapsed() > LIMIT {
            kill_and_panic(child, "child did not exit after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn kill_and_panic(child: &mut Child, msg: &str) -> ! {
    let _ = child.kill();
    let _ = child.wait();
    panic!("{msg}");
}

#[test]
fn sigterm_drains_every_accepted_request_and_exits_0() {
    if let Ok(mode) = std::env::var(CHILD_ENV) {
        if mode == "stuck" {
            stuck_child();
        }
        child(mode.parse().expect("thread mode"));
    }
    run_parent("virtual");
    run_parent("platform:32");
}

/// A child whose one request never finishes within the (long) grace
/// period.
fn stuck_child() -> ! {
    let router = Router::new().get("/stuck", |_req| {
        println!("STUCK");
        weft::sleep(Duration::from_secs(120)).ok();
        "late"
    });
    let server = weft_http::serve("127.0.0.1:0", router).expect("serve");
    println!("LISTENING {}", server.local_addr());
    let report = server.serve_until_signal(Duration::from_secs(120));
    println!("RETURNED {report:?}");
    std::process::exit(0);
}

#[test]
fn a_second_signal_during_the_drain_terminates_at_once() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "stuck")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    let addr = loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            kill_and_panic(&mut child, &format!("child exited early: {seen}"));
        }
        seen.push_str(&line);
        if let Some((_, a)) = line.trim().split_once("LISTENING ") {
            break a.to_owned();
        }
    };
    // One request that will still be running during the drain.
    let url = format!("http://{addr}/stuck");
    let request = std::thread::spawn(move || Client::new().get(&url).send().map(|r| r.status()));
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            kill_and_panic(&mut child, &format!("child exited early: {seen}"));
        }
        seen.push_str(&line);
        if line.contains("STUCK") {
            break;
        }
    }
    // The first SIGTERM starts the drain (which would last 120 s): the
    // child stays alive and stops accepting.
    let sigterm = |child: &Child| {
        // SAFETY: kill(2) on our own, not yet reaped child.
        let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(rc, 0);
    };
    sigterm(&child);
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_ok() {
        if let Some(s) = child.try_wait().unwrap() {
            panic!("the first SIGTERM ended the child ({s:?}): it was not caught; {seen}");
        }
        if start.elapsed() > LIMIT {
            kill_and_panic(&mut child, "the child kept accepting after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the child died at the first SIGTERM"
    );
    // The second ends the process as an uncaught SIGTERM does.
    sigterm(&child);
    let status = wait_with_limit(&mut child);
    assert_eq!(
        status.signal(),
        Some(libc::SIGTERM),
        "{status:?}; output: {seen}"
    );
    // The in-flight request got no answer (the process died), not a 200.
    assert!(!matches!(request.join().unwrap(), Ok(200)));
}

#[test]
fn wait_and_serve_until_signal_return_when_shut_down_elsewhere() {
    let server = Arc::new(
        Server::bind("127.0.0.1:0", ServerConfig::default())
            .unwrap()
            .serve(Router::new().get("/", |_req| "hi"))
            .unwrap(),
    );
    let url = format!("http://{}/", server.local_addr());
    assert_eq!(
        Client::new().get(&url).send().unwrap().text().unwrap(),
        "hi"
    );
    let (s1, s2) = (server.clone(), server.clone());
    let waiter = std::thread::spawn(move || s1.wait());
    let until = std::thread::spawn(move || s2.serve_until_signal(Duration::from_secs(5)));
    let report = server.shutdown(Duration::from_secs(5));
    assert!(report.drained);
    assert_eq!(waiter.join().unwrap(), report);
    assert_eq!(until.join().unwrap().unwrap(), report);
    // Stopped: new connections are refused.
    assert!(Client::new().get(&url).send().is_err());
}
