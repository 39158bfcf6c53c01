//! The lab's closed-model load driver.
//!
//! `weft_load::run` lets every user finish the request it has in flight
//! when the run's duration is over ("late answers still count") and counts
//! those answers in the throughput. Against a saturated one-thread server
//! that means draining a queue of a hundred 1 s requests — minutes — and a
//! throughput above what the server did in the window. The lab therefore
//! drives load itself, on the same public building blocks weft-load uses
//! (`weft_http::client::Connection::exchange` on one virtual thread per
//! user): it counts only requests *completed inside* the measured window,
//! and when the window is over it cuts off whatever is still queued by
//! shutting the server down (see [`closed`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use weft_http::client::{Connection, Url, encode_request};

/// What one load run does.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    /// Target URL, `http://127.0.0.1:port/path`.
    pub url: String,
    /// Simulated users, each with one keep-alive connection.
    pub users: usize,
    /// Time before measuring (requests sent, not counted).
    pub warmup: Duration,
    /// Measured window. `None`: every user sends `per_user` requests.
    pub window: Option<Duration>,
    /// Requests per user when there is no window.
    pub per_user: u64,
    /// Per read/write timeout of one request.
    pub timeout: Duration,
}

/// What one load run measured.
#[derive(Clone, Debug, Default)]
pub struct LoadResult {
    /// Latency of every request completed inside the window (whenever it
    /// started), microseconds.
    pub latencies_us: Vec<u64>,
    /// Failed requests inside the window.
    pub errors: u64,
    /// Length of the measured window (or of the whole run without one).
    pub measured: Duration,
    /// Users still waiting for an answer when the window closed (their
    /// requests were cut off and are not counted).
    pub cut_off: usize,
}

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    errors: u64,
}

/// Runs a closed-model load against `spec.url`.
///
/// With a window, users stop starting requests when it ends; if some are
/// still waiting `grace` later, `cut_off` is called (it should shut the
/// server down so that their connections close) and their requests are not
/// counted. All user threads are joined before this returns.
pub fn closed(
    spec: &LoadSpec,
    grace: Duration,
    cut_off: impl FnOnce(),
) -> Result<LoadResult, String> {
    let url = Url::parse(&spec.url).map_err(|e| e.to_string())?;
    let addr = *url
        .socket_addrs()
        .map_err(|e| e.to_string())?
        .first()
        .ok_or("no address")?;
    let request: Arc<Vec<u8>> = Arc::new(encode_request("GET", &url, &[], b"", true));
    let _ = weft_load::raise_fd_limit();
    let start = Instant::now();
    let measure = start + spec.warmup;
    let end = spec.window.map(|w| measure + w);
    let live = Arc::new(AtomicUsize::new(spec.users));
    let stop = Arc::new(AtomicBool::new(false));
    let mut users = Vec::with_capacity(spec.users);
    for i in 0..spec.users {
        let (request, user_live, user_stop) = (request.clone(), live.clone(), stop.clone());
        let (timeout, per_user) = (spec.timeout, spec.per_user);
        let spawned = weft::Builder::new()
            .name(format!("lab-user-{i}"))
            .stack_size(256 * 1024)
            .spawn(move || {
                let tally = user(addr, &request, timeout, measure, end, per_user, &user_stop);
                user_live.fetch_sub(1, Ordering::SeqCst);
                tally
            });
        match spawned {
            Ok(h) => users.push(h),
            Err(e) => {
                stop.store(true, Ordering::SeqCst);
                live.fetch_sub(spec.users - i, Ordering::SeqCst);
                cut_off();
                for h in users {
                    let _ = h.join();
                }
                return Err(format!("cannot start load user {i}: {e}"));
            }
        }
    }
    let mut cut = 0;
    if let Some(end) = end {
        let deadline = end + grace;
        while live.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        cut = live.load(Ordering::SeqCst);
        if cut > 0 {
            stop.store(true, Ordering::SeqCst);
            cut_off();
        }
    }
    let mut total = Tally::default();
    for h in users {
        match h.join() {
            Ok(t) => {
                total.latencies_us.extend(t.latencies_us);
                total.errors += t.errors;
            }
            Err(_) => total.errors += 1,
        }
    }
    let measured = match spec.window {
        Some(w) => w,
        None => start.elapsed(),
    };
    Ok(LoadResult {
        latencies_us: total.latencies_us,
        errors: total.errors,
        measured,
        cut_off: cut,
    })
}

fn user(
    addr: std::net::SocketAddr,
    request: &[u8],
    timeout: Duration,
    measure: Instant,
    end: Option<Instant>,
    per_user: u64,
    stop: &AtomicBool,
) -> Tally {
    let mut tally = Tally::default();
    let mut conn: Option<Connection> = None;
    let mut sent = 0u64;
    // Bounded: a window ends, or `per_user` requests are sent; a failing
    // connect pauses 1 ms, and `stop` ends everything.
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let t = Instant::now();
        match end {
            Some(end) if t >= end => break,
            None if sent >= per_user => break,
            _ => {}
        }
        sent += 1;
        let result = match conn.as_mut() {
            Some(c) => c.exchange(request, false, Some(timeout)),
            None => match Connection::connect(addr, timeout) {
                Ok(c) => {
                    let _ = c.set_nodelay(true);
                    conn.insert(c).exchange(request, false, Some(timeout))
                }
                Err(e) => Err(e),
            },
        };
        let done = Instant::now();
        // A request counts when it *completes* inside the window, whenever
        // it started: a request that queued through the warm-up is part of
        // the window's throughput and its latency is real.
        let counted = done >= measure && end.is_none_or(|end| done <= end);
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match result {
            Ok(ex) => {
                if !ex.keep_alive {
                    conn = None;
                }
                if counted {
                    if ex.status >= 400 {
                        tally.errors += 1;
                    } else {
                        tally
                            .latencies_us
                            .push((done - t).as_micros().max(1) as u64);
                    }
                }
            }
            Err(_) => {
                conn = None;
                if counted {
                    tally.errors += 1;
                }
                let _ = weft::sleep(Duration::from_millis(1));
            }
        }
    }
    tally
}
