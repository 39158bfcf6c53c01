//! What a simulation costs: the echo and HTTP workloads run on the
//! simulated network (`weft::sim`) and on real loopback (a real runtime),
//! in messages per second of CPU time (user + system, the whole process).
//!
//! ```text
//! cargo run --release -p weft-http --example sim_overhead -- [ROUNDS]
//! ```
//!
//! Echo: 10 clients, each sends 1,000 64-byte messages and reads each
//! back. HTTP: 10 keep-alive clients, 500 `GET`s each. A simulation runs
//! on one carrier, so the real runtime gets one carrier too. Each row is
//! the median of ROUNDS runs (default 5).

use std::io::{Read, Write};
use std::time::Duration;

use weft::net::{TcpListener, TcpStream};

const CLIENTS: usize = 10;
const ECHOES: usize = 1_000;
const REQUESTS: usize = 500;

/// CPU time of the whole process so far.
fn cpu() -> Duration {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into `u`.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn echo_server(listener: TcpListener) {
    for _ in 0..CLIENTS {
        let (mut s, _) = listener.accept().unwrap();
        weft::spawn(move || {
            let mut buf = [0u8; 64];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 || s.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
    }
}

fn echo_client(addr: String) {
    let mut s = TcpStream::connect(addr.as_str()).unwrap();
    let msg = [7u8; 64];
    let mut back = [0u8; 64];
    for _ in 0..ECHOES {
        s.write_all(&msg).unwrap();
        s.read_exact(&mut back).unwrap();
    }
}

fn http_client(url: String) {
    let client = weft_http::Client::new();
    for _ in 0..REQUESTS {
        let r = client.get(&url).send().unwrap();
        assert_eq!(r.status(), 200);
        r.text().unwrap();
    }
}

/// Spawns the clients, joins them.
fn clients(f: impl Fn() + Send + Sync + Clone + 'static, on_hosts: bool) {
    let hs: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let f = f.clone();
            if on_hosts {
                weft::sim::net::host(&format!("client-{i}"), f).unwrap()
            } else {
                weft::spawn(f)
            }
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

fn echo(simulated: bool) {
    let addr = if simulated { "echo:7" } else { "127.0.0.1:0" };
    let bind = |a: &str| TcpListener::bind(a).unwrap();
    let (listener, target) = if simulated {
        let l = weft::sim::net::host("echo", move || bind("0.0.0.0:7"))
            .unwrap()
            .join()
            .unwrap();
        (l, addr.to_string())
    } else {
        let l = bind(addr);
        let a = l.local_addr().unwrap().to_string();
        (l, a)
    };
    let server = weft::spawn(move || echo_server(listener));
    clients(move || echo_client(target.clone()), simulated);
    server.join().unwrap();
}

fn http(simulated: bool) {
    let routes = weft_http::Router::new().get("/", |_: &mut weft_http::Request<'_>| "hello");
    let server = if simulated {
        weft::sim::net::host("web", move || {
            weft_http::serve("0.0.0.0:80", routes).unwrap()
        })
        .unwrap()
        .join()
        .unwrap()
    } else {
        weft_http::serve("127.0.0.1:0", routes).unwrap()
    };
    let url = if simulated {
        "http://web:80/".to_string()
    } else {
        format!("http://{}/", server.local_addr())
    };
    clients(move || http_client(url.clone()), simulated);
    server.shutdown(Duration::from_secs(1));
}

/// Messages per CPU second of `f` (median of `rounds`).
fn rate(rounds: usize, messages: usize, f: impl Fn()) -> f64 {
    let mut rates: Vec<f64> = (0..rounds)
        .map(|_| {
            let c0 = cpu();
            f();
            messages as f64 / (cpu() - c0).as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(5, |s| s.parse().expect("ROUNDS"));
    let rt = weft::Runtime::builder().parallelism(1).build().unwrap();
    let on_real = |f: fn(bool)| {
        let rt = rt.clone();
        move || rt.spawn(move || f(false)).join().unwrap()
    };
    let on_sim = |f: fn(bool)| move || weft::sim::run(1, move || f(true)).unwrap().value;
    let rows = [
        (
            "echo, real loopback",
            rate(rounds, CLIENTS * ECHOES, on_real(echo)),
        ),
        (
            "echo, simulated",
            rate(rounds, CLIENTS * ECHOES, on_sim(echo)),
        ),
        (
            "HTTP, real loopback",
            rate(rounds, CLIENTS * REQUESTS, on_real(http)),
        ),
        (
            "HTTP, simulated",
            rate(rounds, CLIENTS * REQUESTS, on_sim(http)),
        ),
    ];
    println!("| workload | messages per CPU second (median of {rounds}) |");
    println!("|---|---|");
    for (name, r) in rows {
        println!("| {name} | {:.0} |", r);
    }
}
