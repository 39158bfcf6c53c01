//! The load side, the same for every server: a TCP echo client on a
//! current-thread Tokio runtime, and `weft-load` for HTTP and HTTPS.
//!
//! Both run in the orchestrator's process, so the server process's peak
//! RSS is the server's alone. On this 2-core machine client and server
//! share the CPUs; that is the same for every runtime and the reason the
//! client is kept on one OS thread.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes per echo message.
pub const MSG: usize = 64;

/// What one load window produced.
#[derive(Clone, Debug)]
pub struct Load {
    /// Completed operations (echo round trips or HTTP responses) per second.
    pub rate: f64,
    /// 99th percentile latency in milliseconds.
    pub p99_ms: f64,
    /// Operations that failed (connection errors, non-2xx, timeouts).
    pub errors: u64,
}

/// `conns` connections each write 64 bytes and read the echo back in a
/// loop. After all are connected, `warmup` passes unmeasured, then round
/// trips completed within `window` are counted and timed.
pub fn echo(port: u16, conns: usize, warmup: Duration, window: Duration) -> Result<Load, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(echo_async(port, conns, warmup, window))
}

/// A load connection: `TCP_NODELAY`, and reset on close, so that repeated
/// runs leave no `TIME_WAIT`.
async fn connect(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
    let s = tokio::net::TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO))?;
    Ok(s)
}

async fn echo_async(
    port: u16,
    conns: usize,
    warmup: Duration,
    window: Duration,
) -> Result<Load, String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    // Connect in waves of 256 so that 10,000 SYNs never overflow the
    // server's accept queue (a dropped SYN costs a 1 s retransmit).
    let mut streams = Vec::with_capacity(conns);
    for wave in (0..conns).collect::<Vec<_>>().chunks(256) {
        let mut pending = Vec::with_capacity(wave.len());
        for _ in wave {
            pending.push(tokio::spawn(connect(addr)));
        }
        for p in pending {
            let s = p
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("connect to {addr}: {e}"))?;
            streams.push(s);
        }
    }
    let start = Instant::now() + Duration::from_millis(50);
    let measure = start + warmup;
    let end = measure + window;
    let mut tasks = Vec::with_capacity(conns);
    for mut s in streams {
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start.into()).await;
            let out = [7u8; MSG];
            let mut back = [0u8; MSG];
            let mut lat_us: Vec<u32> = Vec::new();
            let mut errors = 0u64;
            loop {
                let t = Instant::now();
                if t >= end {
                    break;
                }
                let ok = s.write_all(&out).await.is_ok() && s.read_exact(&mut back).await.is_ok();
                let done = Instant::now();
                if !ok || back != out {
                    errors += 1;
                    break;
                }
                if t >= measure && done <= end {
                    lat_us.push(done.duration_since(t).as_micros().min(u32::MAX as u128) as u32);
                }
            }
            (lat_us, errors)
        }));
    }
    let mut hist =
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?;
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await.map_err(|e| e.to_string())?;
        errors += e;
        for us in lat {
            let _ = hist.record(u64::from(us).max(1));
        }
    }
    Ok(Load {
        rate: hist.len() as f64 / window.as_secs_f64(),
        p99_ms: hist.value_at_quantile(0.99) as f64 / 1000.0,
        errors,
    })
}

/// HTTP load with `weft-load`'s closed model: `conns` keep-alive users on
/// `path`, ramped up over the first half of `warmup`. `tls`: `https://`,
/// accepting the suite's self-signed certificate (`insecure`; signatures
/// are still checked, so a handshake costs what a verified one does). The
/// users connect, and so shake hands, during the warmup: the measured
/// window is keep-alive requests over established TLS sessions.
pub fn http(
    port: u16,
    path: &str,
    conns: usize,
    warmup: Duration,
    window: Duration,
    tls: bool,
) -> Result<Load, String> {
    let config = weft_load::Config {
        url: url(tls, port, path),
        insecure: tls,
        concurrency: conns,
        duration: Some(window),
        warmup,
        ramp_up: warmup / 2,
        timeout: Duration::from_secs(30),
        ..weft_load::Config::default()
    };
    let r = weft_load::run(&config).map_err(|e| e.to_string())?;
    Ok(Load {
        rate: r.successes as f64 / r.duration_secs,
        p99_ms: r.latency.p99_ms,
        errors: r.failures,
    })
}

fn url(tls: bool, port: u16, path: &str) -> String {
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://127.0.0.1:{port}{path}")
}

/// What a connection-per-request window produced.
#[derive(Clone, Debug)]
pub struct Handshakes {
    /// Full TLS handshakes completed per second (each followed by one
    /// request on the new connection).
    pub rate: f64,
    /// 99th percentile of the handshake time (after the TCP connect), ms.
    pub p99_ms: f64,
    /// Requests that failed (TLS errors included).
    pub errors: u64,
}

/// `conns` users that each open a new TLS connection for every request to
/// `path` (`weft-load` without keep-alive): full handshakes per second and
/// their p99, as `weft-load` reports them apart from request latency.
pub fn handshakes(
    port: u16,
    path: &str,
    conns: usize,
    warmup: Duration,
    window: Duration,
) -> Result<Handshakes, String> {
    let config = weft_load::Config {
        url: url(true, port, path),
        insecure: true,
        keep_alive: false,
        concurrency: conns,
        duration: Some(window),
        warmup,
        ramp_up: warmup / 2,
        timeout: Duration::from_secs(30),
        ..weft_load::Config::default()
    };
    let r = weft_load::run(&config).map_err(|e| e.to_string())?;
    let h = r
        .handshake
        .ok_or("weft-load reported no TLS handshakes for an https:// run")?;
    Ok(Handshakes {
        rate: r.handshakes as f64 / r.duration_secs,
        p99_ms: h.p99_ms,
        errors: r.failures,
    })
}

/// What a window beside CPU-bound requests produced.
#[derive(Clone, Debug)]
pub struct Hogged {
    /// `/hello` responses per second answered inside the window.
    pub rate: f64,
    /// Their p99 in milliseconds; `None` when none was answered.
    pub p99_ms: Option<f64>,
    /// `/hello` requests that failed.
    pub errors: u64,
    /// Response time of the slowest CPU-bound request, milliseconds.
    pub slowest_ms: f64,
    /// Rounds of the hash the least-served CPU-bound request computed in
    /// its 4 s (its own answer, `spun <rounds> rounds`): what a scheduler
    /// that gives `/hello` more of the machine takes from the computation.
    pub least_rounds: u64,
}

/// How long after the CPU-bound requests were sent the light load begins.
const HOG_LEAD: Duration = Duration::from_millis(250);

/// `conns` users on `GET /hello` during `hogs` CPU-bound requests
/// (`GET /cpu`, which compute for `cpu_for`): first `warmup` of the same
/// load, on connections then closed (a JIT's first pass); then the CPU-bound
/// requests, each on a connection of its own from an OS thread of this
/// process; [`HOG_LEAD`] later, `conns` new keep-alive connections
/// (made while the CPU-bound requests run, as the issue's `wrk -c50`),
/// all at once, measured for `window`, which ends before the CPU-bound
/// requests do. Then it waits for those and reports the slowest.
pub fn hogged(
    port: u16,
    hogs: usize,
    cpu_for: Duration,
    conns: usize,
    warmup: Duration,
    window: Duration,
) -> Result<Hogged, String> {
    if HOG_LEAD + window >= cpu_for {
        return Err(format!(
            "the window ({window:?} from {HOG_LEAD:?}) must end before the CPU-bound requests ({cpu_for:?})"
        ));
    }
    let hello = |duration| weft_load::Config {
        url: url(false, port, "/hello"),
        concurrency: conns,
        duration: Some(duration),
        timeout: Duration::from_secs(30),
        ..weft_load::Config::default()
    };
    if !warmup.is_zero() {
        weft_load::run(&hello(warmup)).map_err(|e| e.to_string())?;
    }
    let limit = cpu_for * (hogs as u32 + 1) + Duration::from_secs(60);
    let held: Vec<_> = (0..hogs)
        .map(|_| std::thread::spawn(move || cpu_request(port, limit)))
        .collect();
    std::thread::sleep(HOG_LEAD);
    let load = weft_load::run(&hello(window)).map_err(|e| e.to_string());
    let mut slowest = Duration::ZERO;
    let mut least_rounds = u64::MAX;
    for h in held {
        let (took, rounds) = h
            .join()
            .map_err(|_| "a CPU-bound request's thread panicked")??;
        slowest = slowest.max(took);
        least_rounds = least_rounds.min(rounds);
    }
    let r = load?;
    Ok(Hogged {
        rate: r.successes as f64 / r.duration_secs,
        p99_ms: (r.successes > 0).then_some(r.latency.p99_ms),
        errors: r.failures,
        slowest_ms: slowest.as_secs_f64() * 1e3,
        least_rounds,
    })
}

/// `GET /cpu` on a new connection (`Connection: close`); its response
/// time and the rounds it says it computed, or why it failed.
fn cpu_request(port: u16, limit: Duration) -> Result<(Duration, u64), String> {
    use std::io::{Read, Write};
    let t0 = Instant::now();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| format!("CPU-bound request: connect: {e}"))?;
    s.set_read_timeout(Some(limit)).map_err(|e| e.to_string())?;
    s.write_all(b"GET /cpu HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("CPU-bound request: write: {e}"))?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)
        .map_err(|e| format!("CPU-bound request: no answer within {limit:?}: {e}"))?;
    let took = t0.elapsed();
    let text = String::from_utf8_lossy(&answer);
    let rounds = text
        .split_once("spun ")
        .and_then(|(_, rest)| rest.split_once(" rounds"))
        .and_then(|(n, _)| n.parse::<u64>().ok());
    match rounds {
        Some(n) if text.starts_with("HTTP/1.1 200") => Ok((took, n)),
        _ => Err(format!("CPU-bound request: unexpected answer {text:?}")),
    }
}

/// What an idle-connections run produced.
#[derive(Clone, Debug)]
pub struct Idle {
    /// Growth of the server's `VmRSS` + `VmPTE` per idle connection, KiB.
    pub kib_per_conn: f64,
    /// Connections that failed (connect, either request, or closed while
    /// idle).
    pub errors: u64,
}

/// `conns` keep-alive connections to the server `pid` on `port` that each
/// send `GET /hello`, read the answer and stay open, idle. The baseline is
/// read `settle_before` after 100 warm-up connections made one request
/// each and closed; the figure `settle_after` after the last answer. Then
/// each connection makes a second request, which must be answered (the
/// connection was kept open while idle).
pub fn idle(
    pid: u32,
    port: u16,
    conns: usize,
    settle_before: Duration,
    settle_after: Duration,
) -> Result<Idle, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(idle_async(pid, port, conns, settle_before, settle_after))
}

/// One `GET /hello` on `s` (keep-alive); whether a whole 200 came back.
async fn hello(s: &mut tokio::net::TcpStream) -> bool {
    const REQ: &[u8] = b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    if s.write_all(REQ).await.is_err() {
        return false;
    }
    let mut got = Vec::with_capacity(256);
    let mut buf = [0u8; 512];
    loop {
        let n = match tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => return false,
        };
        got.extend_from_slice(&buf[..n]);
        let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if got.len() >= end + 4 + len {
            return head.starts_with("http/1.1 200");
        }
    }
}

async fn idle_async(
    pid: u32,
    port: u16,
    conns: usize,
    settle_before: Duration,
    settle_after: Duration,
) -> Result<Idle, String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    for _ in 0..100 {
        let mut s = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect to {addr}: {e}"))?;
        if !hello(&mut s).await {
            return Err("a warm-up request failed".into());
        }
    }
    tokio::time::sleep(settle_before).await;
    let before = crate::proc::resident_kib(&pid.to_string())?;
    let mut streams = Vec::with_capacity(conns);
    let mut errors = 0u64;
    // Waves of 256, as `echo` connects: no SYN overflows the backlog.
    let ids: Vec<usize> = (0..conns).collect();
    for wave in ids.chunks(256) {
        let mut pending = Vec::with_capacity(wave.len());
        for _ in wave {
            pending.push(tokio::spawn(async move {
                let mut s = connect(addr).await.ok()?;
                hello(&mut s).await.then_some(s)
            }));
        }
        for p in pending {
            match p.await.map_err(|e| e.to_string())? {
                Some(s) => streams.push(s),
                None => errors += 1,
            }
        }
    }
    tokio::time::sleep(settle_after).await;
    let after = crate::proc::resident_kib(&pid.to_string())?;
    // Every connection is still open and served.
    let mut again = Vec::with_capacity(streams.len());
    for mut s in streams {
        again.push(tokio::spawn(async move { hello(&mut s).await }));
    }
    for a in again {
        if !a.await.map_err(|e| e.to_string())? {
            errors += 1;
        }
    }
    Ok(Idle {
        kib_per_conn: after.saturating_sub(before) as f64 / conns as f64,
        errors,
    })
}
