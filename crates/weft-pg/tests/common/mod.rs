//! Finding (or starting) the PostgreSQL server the tests run against.
//!
//! 1. `WEFT_PG_URL` set (CI exports it): use that server. `WEFT_PG_MD5_URL`,
//!    `WEFT_PG_SOCKET_DIR`/`WEFT_PG_PORT` and `WEFT_PG_DIR` (for restarts)
//!    are used when present.
//! 2. Otherwise, if PostgreSQL's binaries are installed, start (or reuse) a
//!    throwaway cluster with `scripts/pg-test-cluster.sh` — the same script
//!    CI uses — held for this test process (`WEFT_PG_HOLDER`): the script's
//!    reaper stops the server once every test process that uses it has
//!    ended, passed, failed or aborted. The cluster's directory stays, so
//!    the next run starts it without `initdb`.
//! 3. Otherwise skip every PostgreSQL test with one loud line — unless
//!    `CI=true`, where a missing server fails the run.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The server the tests use.
#[derive(Debug, Clone)]
pub struct Server {
    /// SCRAM-SHA-256 role over TCP.
    pub url: String,
    /// MD5 role over TCP, if known.
    pub md5_url: Option<String>,
    /// Unix socket directory and port, if known.
    pub socket: Option<(PathBuf, u16)>,
    /// Cluster directory (for `pg-test-cluster.sh restart`), if ours.
    pub dir: Option<String>,
    /// The server certificate's root (`WEFT_PG_SSLROOTCERT`), when the
    /// server has TLS on.
    pub ssl_root_cert: Option<String>,
}

fn script() -> PathBuf {
    // Through `../weft-pg`, so that weft-http's tests can include this
    // module (`#[path]`) and find the same script.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../weft-pg/scripts/pg-test-cluster.sh")
}

fn from_vars(vars: &HashMap<String, String>) -> Option<Server> {
    let url = vars.get("WEFT_PG_URL")?.clone();
    let socket = match (vars.get("WEFT_PG_SOCKET_DIR"), vars.get("WEFT_PG_PORT")) {
        (Some(d), Some(p)) => p.parse().ok().map(|p| (PathBuf::from(d), p)),
        _ => None,
    };
    Some(Server {
        url,
        md5_url: vars.get("WEFT_PG_MD5_URL").cloned(),
        socket,
        dir: vars.get("WEFT_PG_DIR").cloned(),
        ssl_root_cert: vars.get("WEFT_PG_SSLROOTCERT").cloned(),
    })
}

fn start_local() -> Result<Server, String> {
    let out = Command::new("bash")
        .arg(script())
        .arg("start")
        .env("WEFT_PG_HOLDER", std::process::id().to_string())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script().display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} start failed ({}): {}",
            script().display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut vars = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(rest) = line.strip_prefix("export ")
            && let Some((k, v)) = rest.split_once('=')
        {
            vars.insert(k.to_string(), v.trim_matches('\'').to_string());
        }
    }
    from_vars(&vars).ok_or_else(|| "the cluster script printed no WEFT_PG_URL".to_string())
}

/// The server, or `None` (after one loud line) when there is none and this
/// is not CI. Panics in CI when there is none.
pub fn server() -> Option<&'static Server> {
    static SERVER: OnceLock<Option<Server>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            let env: HashMap<String, String> = std::env::vars().collect();
            if let Some(s) = from_vars(&env) {
                return Some(s);
            }
            let ci = env.get("CI").is_some_and(|v| v == "true" || v == "1");
            match start_local() {
                Ok(s) => Some(s),
                Err(why) => {
                    if ci {
                        panic!("CI=true but no PostgreSQL server for the weft-pg tests: {why}");
                    }
                    eprintln!(
                        "\n===== weft-pg: NO POSTGRESQL SERVER - SKIPPING THE POSTGRESQL TESTS =====\n\
                         ===== ({why}; set WEFT_PG_URL or install postgresql) =====\n"
                    );
                    None
                }
            }
        })
        .as_ref()
}

/// `let pg = require_pg!();` — the server, or return from the test.
#[macro_export]
macro_rules! require_pg {
    () => {
        match $crate::common::server() {
            Some(s) => s,
            None => return,
        }
    };
}

impl Server {
    /// A pool config for this server with test-friendly settings: no
    /// background fill, a short checkout timeout, a distinct
    /// application_name so that server-side counts can be checked.
    pub fn config(&self, app: &str) -> weft_pg::Config {
        let mut c = weft_pg::Config::from_url(&self.url)
            .unwrap()
            .min_idle(0)
            .connection_timeout(Duration::from_secs(10))
            .pool_name(app);
        c.pg_mut().application_name(app);
        c
    }

    /// A direct connection.
    pub fn connect(&self) -> weft_pg::Connection {
        weft_pg::Connection::connect_url(&self.url).expect("connect to the test server")
    }

    /// Restarts the server (`pg_ctl restart -m fast`); false if this
    /// server is not one whose cluster directory we know.
    pub fn restart(&self) -> bool {
        let Some(dir) = &self.dir else { return false };
        let st = Command::new("bash")
            .arg(script())
            .arg("restart")
            .arg(dir)
            .status()
            .expect("run pg-test-cluster.sh restart");
        assert!(st.success(), "restart failed: {st}");
        true
    }

    /// Server-side sessions with this application_name.
    pub fn sessions(&self, app: &str) -> i64 {
        let mut c = self.connect();
        let n: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .unwrap()
            .get(0);
        c.close();
        n
    }
}

/// Waits (parking, polling every few ms) until `cond` holds; panics with
/// `what` after `limit`. For conditions that a background thread brings
/// about, so a test need not guess a sleep.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for: {what}"
        );
        weft::sleep(Duration::from_millis(5)).unwrap();
    }
}
