//! The server's error log (`ServerConfig::error_log`): one stderr line per
//! `5xx` error answer, with method, route, activity and cause; a panic's
//! message printed once (by the panic hook), not again by the log. Each
//! case runs in a child process — this test binary run again with an
//! environment variable that selects the child's role — whose stderr the
//! parent reads whole.

use std::process::Command;
use std::time::Duration;

use weft_http::{Client, HttpError, Response, Router, ServerConfig, ThreadMode};

const CHILD_ENV: &str = "WEFT_HTTP_ERROR_LOG_CHILD";
const CHILD_TEST: &str = "child";
/// The panic's message: unique, so that the parent can count it.
const PANIC_TEXT: &str = "boom-7f3a91";
/// A cause the client never sees; the log names it.
const CAUSE_TEXT: &str = "disk-on-fire-2c81";

/// The child's role: serves a router with one route per kind of answer
/// (with `error_log` on or off and the thread mode from the variable),
/// requests each once, and shuts down. Without the variable it does
/// nothing: it is a test only as the parent's child.
#[test]
fn child() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (log, mode) = role.split_once(',').expect("role: on|off,virtual|platform");
    let mode = match mode {
        "virtual" => ThreadMode::Virtual,
        _ => ThreadMode::Platform { threads: 2 },
    };
    let router = Router::new()
        .get("/boom", |_req| -> Response { panic!("{PANIC_TEXT}") })
        .get("/fail", |_req| -> Result<(), HttpError> {
            Err(std::io::Error::other(CAUSE_TEXT))?
        })
        .get("/missing", |_req| HttpError::not_found("nothing here"))
        .get("/plain", |_req| Response::new(500))
        .on_error(HttpError::json_response);
    let config = ServerConfig::default()
        .thread_mode(mode)
        .error_log(log == "on");
    let server = weft_http::Server::bind("127.0.0.1:0", config)
        .and_then(|s| s.serve(router))
        .expect("serve");
    let base = format!("http://{}", server.local_addr());
    let client = Client::new();
    for (path, status) in [
        ("/boom", 500),
        ("/fail", 500),
        ("/missing", 404),
        ("/plain", 500),
    ] {
        let r = client
            .get(&format!("{base}{path}"))
            .send()
            .expect("request");
        assert_eq!(r.status(), status, "{path}");
    }
    // The line is written after the response: a drained shutdown has
    // every connection thread finished, so every line written.
    assert!(server.shutdown(Duration::from_secs(30)).drained);
}

/// The child's stderr, after checking that it passed.
fn run_child(role: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, role)
        .output()
        .expect("run the child");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "child {role} failed: {}\nstdout:\n{}\nstderr:\n{stderr}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

fn log_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("weft-http: "))
        .collect()
}

#[test]
fn every_5xx_error_answer_is_logged_once_with_route_and_cause() {
    for mode in ["virtual", "platform"] {
        let stderr = run_child(&format!("on,{mode}"));
        let lines = log_lines(&stderr);
        assert_eq!(
            lines.len(),
            2,
            "{mode}: one line per 5xx error answer:\n{stderr}"
        );
        let fail = lines.iter().find(|l| l.contains("/fail")).expect("/fail");
        assert_eq!(
            *fail,
            format!("weft-http: GET /fail (GET /fail): 500 Internal Server Error: {CAUSE_TEXT}")
        );
        let boom = lines.iter().find(|l| l.contains("/boom")).expect("/boom");
        assert!(
            boom.starts_with(
                "weft-http: GET /boom (GET /boom): 500 Internal Server Error: handler panicked at "
            ) && boom.contains("error_log.rs:"),
            "{boom}"
        );
        // The panic's message: in the panic hook's report, not again in
        // the log.
        assert_eq!(stderr.matches(PANIC_TEXT).count(), 1, "{mode}:\n{stderr}");
        assert_eq!(stderr.matches(CAUSE_TEXT).count(), 1, "{mode}:\n{stderr}");
    }
}

#[test]
fn the_error_log_can_be_turned_off() {
    let stderr = run_child("off,virtual");
    assert_eq!(log_lines(&stderr), Vec::<&str>::new(), "{stderr}");
    assert!(!stderr.contains(CAUSE_TEXT), "{stderr}");
    // The panic hook still reports the panic, once.
    assert_eq!(stderr.matches(PANIC_TEXT).count(), 1, "{stderr}");
}
