//! A Redis server for the lab's E8 and the `transparent` feature's tests.
//!
//! `WEFT_REDIS_URL` wins. Without it, when `redis-server` is installed,
//! [`RedisServer::start`] runs a throwaway one (no persistence, a free
//! loopback port) as a child that dies with its owner: on drop, or with
//! the spawning OS thread if the owner is killed (`PR_SET_PDEATHSIG`).
//! With neither, the error says how to get one ([`HOW_TO`]).
//!
//! ```no_run
//! let redis = weft_bench_support::redis_server::RedisServer::start()?;
//! println!("Redis at {}", redis.url());
//! # Ok::<(), String>(())
//! ```

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How to make Redis available.
pub const HOW_TO: &str = "install Redis (a throwaway server is then started on a free loopback \
port): `sudo apt-get install -y redis-server` — or point at a server: \
`export WEFT_REDIS_URL=redis://127.0.0.1:6379/`";

/// A reachable Redis server: the one `WEFT_REDIS_URL` names, or a child
/// process this value owns and stops on drop.
#[derive(Debug)]
pub struct RedisServer {
    url: String,
    child: Option<Child>,
}

impl RedisServer {
    /// The server `WEFT_REDIS_URL` names, or a throwaway `redis-server`
    /// started now (it answered `PING` before this returns). The error
    /// says why neither is available.
    pub fn start() -> Result<RedisServer, String> {
        match std::env::var("WEFT_REDIS_URL") {
            Ok(url) if !url.is_empty() => Ok(RedisServer { url, child: None }),
            _ => start_child().map(|(url, child)| RedisServer {
                url,
                child: Some(child),
            }),
        }
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

static SHARED: Mutex<Option<Result<RedisServer, String>>> = Mutex::new(None);

/// A process-wide server for programs with one main thread (the lab):
/// started on first use and kept until [`shutdown`].
pub fn url() -> Result<String, String> {
    let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    match shared.get_or_insert_with(RedisServer::start) {
        Ok(server) => Ok(server.url.clone()),
        Err(e) => Err(e.clone()),
    }
}

/// Stops the server [`url`] started, if any.
pub fn shutdown() {
    drop(SHARED.lock().unwrap_or_else(PoisonError::into_inner).take());
}

fn redis_server() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin".into(), "/usr/sbin".into()])
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
}

fn start_child() -> Result<(String, Child), String> {
    let bin =
        redis_server().ok_or("WEFT_REDIS_URL is unset and no redis-server was found on PATH")?;
    // A free port: bind, read it, release it (a race with another program
    // taking it in between is possible and reported as a start failure).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free loopback port: {e}"))?
        .port();
    let mut cmd = Command::new(&bin);
    cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .args(["--maxclients", "10000", "--loglevel", "warning"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls prctl(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if ping(port) {
            return Ok((format!("redis://127.0.0.1:{port}/"), child));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("{} exited at start ({status})", bin.display()));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{} did not answer PING within 10 s", bin.display()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a Redis server on `port` answers `PING` with `+PONG`.
fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}
