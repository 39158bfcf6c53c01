//! Finding PostgreSQL for E5 and E6.
//!
//! `WEFT_PG_URL` wins. Without it the lab starts a throwaway cluster with
//! weft-pg's `scripts/pg-test-cluster.sh` (in `/tmp/weft-lab-pg-<pid>`, on
//! a free loopback port) and stops and deletes it in [`shutdown`], or, if
//! the lab ends before that, the script stops it when the lab's process has
//! ended (`WEFT_PG_HOLDER`). With
//! neither, E5 is skipped and E6 falls back to an in-memory store, and
//! [`HOW_TO`] says how to get a server.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use weft::sync::Unpoison;

/// How to make PostgreSQL available to the lab.
pub const HOW_TO: &str = "install PostgreSQL and rerun (the lab starts a throwaway cluster itself): \
`sudo apt-get install -y postgresql` — or point the lab at a server: \
`export WEFT_PG_URL=postgres://USER:PASSWORD@127.0.0.1:5432/DB`";

struct Started {
    script: PathBuf,
    dir: PathBuf,
}

struct State {
    url: Result<String, String>,
    started: Option<Started>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../weft-pg/scripts/pg-test-cluster.sh")
}

/// The URL of a reachable PostgreSQL server, starting a throwaway cluster
/// on first use if `WEFT_PG_URL` is unset. The error explains why none is
/// available.
pub fn url() -> Result<String, String> {
    let mut state = STATE.lock().unpoison();
    let state = state.get_or_insert_with(|| {
        if cfg!(not(feature = "pg")) {
            return State {
                url: check("").map(|()| String::new()),
                started: None,
            };
        }
        let (url, started) = match std::env::var("WEFT_PG_URL") {
            Ok(url) if !url.is_empty() => (Ok(url), None),
            _ => start(),
        };
        let url = url.and_then(|u| check(&u).map(|()| u));
        State { url, started }
    });
    state.url.clone()
}

fn start() -> (Result<String, String>, Option<Started>) {
    let script = script();
    if !script.is_file() {
        return (
            Err(format!(
                "WEFT_PG_URL is unset and {} is missing",
                script.display()
            )),
            None,
        );
    }
    let dir = std::env::temp_dir().join(format!("weft-lab-pg-{}", std::process::id()));
    // Held for this process: if the lab ends before [`shutdown`] (a panic,
    // Ctrl-C), the script's reaper stops the server.
    let out = Command::new("bash")
        .arg(&script)
        .arg("start")
        .arg(&dir)
        .env("WEFT_PG_HOLDER", std::process::id().to_string())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => return (Err(format!("cannot run {}: {e}", script.display())), None),
    };
    let started = Some(Started {
        script: script.clone(),
        dir: dir.clone(),
    });
    if !out.status.success() {
        let why = if out.status.code() == Some(3) {
            "WEFT_PG_URL is unset and no PostgreSQL binaries were found".to_string()
        } else {
            format!(
                "WEFT_PG_URL is unset and starting a throwaway cluster failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )
        };
        return (Err(why), started);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let url = stdout
        .lines()
        .find_map(|l| l.strip_prefix("export WEFT_PG_URL="))
        .map(|v| v.trim_matches('\'').to_string())
        .ok_or_else(|| "the cluster script printed no WEFT_PG_URL".to_string());
    (url, started)
}

#[cfg(not(feature = "pg"))]
fn check(_url: &str) -> Result<(), String> {
    Err(
        "weft-lab was built without its `pg` feature (weft-pg); run `cargo run --release --features weft-lab/pg`"
            .into(),
    )
}

#[cfg(feature = "pg")]
fn check(url: &str) -> Result<(), String> {
    use std::time::Duration;
    let config = weft_pg::Config::from_url(url)
        .map_err(|e| format!("bad WEFT_PG_URL: {e}"))?
        .max_size(1)
        .min_idle(0)
        .connection_timeout(Duration::from_secs(5));
    let pool = weft_pg::Pool::new(config).map_err(|e| format!("PostgreSQL at {url}: {e}"))?;
    let result = pool
        .get()
        .and_then(|mut c| c.execute("SELECT 1", &[]))
        .map(|_| ())
        .map_err(|e| format!("PostgreSQL at {url} is not reachable: {e}"));
    pool.close();
    result
}

/// Stops and deletes the cluster the lab started, if any.
pub fn shutdown() {
    let mut state = STATE.lock().unpoison();
    if let Some(State {
        started: Some(s), ..
    }) = state.take()
    {
        let _ = Command::new("bash")
            .arg(&s.script)
            .arg("stop")
            .arg(&s.dir)
            .output();
        let _ = std::fs::remove_dir_all(&s.dir);
        // The script's lock file sits beside the directory.
        let mut lock = s.dir.clone().into_os_string();
        lock.push(".lock");
        let _ = std::fs::remove_file(lock);
    }
}
