//! Weft and async code, both ways, beside their anchors in one run
//! (feature `tokio`):
//!
//! ```text
//! cargo bench -p weft --features tokio --bench async_eco             # 7 runs per cell
//! cargo bench -p weft --features tokio --bench async_eco -- --quick  # 3 runs
//! ```
//!
//! | row | Weft | anchors |
//! |---|---|---|
//! | `blocking-jobs` | a Tokio program (multi-thread runtime) spawns 1,000 virtual threads that each block 100 ms (`weft::sleep`) and awaits their `JoinHandle`s | `tokio::task::spawn_blocking` of `std::thread::sleep(100 ms)` (its pool: 512 threads); 1,000 `std::thread`s joined |
//! | `async-requests` | 200 virtual threads each `weft::block_on` a reqwest GET of a loopback server that answers after 200 ms (nothing set up: Weft's own Tokio runtime) | 200 `tokio::spawn`ed GETs on a multi-thread Tokio runtime |
//!
//! Each cell is the median wall time of its runs (min..max beside it); the
//! ideal is 100 ms and 200 ms. One client per run, so each run opens its
//! connections. The server runs in this process on a Tokio runtime of its
//! own (2 threads), for every column alike.
//!
//! Run without `--bench` (as `cargo test --benches` does) it only
//! smoke-tests each cell with tiny sizes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use weft_bench_support::format::sig3;
use weft_bench_support::stats::{median, summary};

/// A workload and its cells: column, wall times in milliseconds.
type Row = (String, Vec<(&'static str, Vec<f64>)>);

struct Sizes {
    runs: usize,
    jobs: usize,
    job: Duration,
    requests: usize,
    delay: Duration,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    let z = if !bench {
        Sizes {
            runs: 1,
            jobs: 20,
            job: Duration::from_millis(1),
            requests: 10,
            delay: Duration::from_millis(1),
        }
    } else {
        Sizes {
            runs: if quick { 3 } else { 7 },
            jobs: 1000,
            job: Duration::from_millis(100),
            requests: 200,
            delay: Duration::from_millis(200),
        }
    };
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-server")
        .enable_all()
        .build()
        .unwrap();
    let addr = server_rt.block_on(server(z.delay));
    let tokio_rt = tokio::runtime::Runtime::new().unwrap();

    let rows: Vec<Row> = vec![
        (
            format!(
                "{} blocking jobs of {:?} from a Tokio program",
                z.jobs, z.job
            ),
            vec![
                (
                    "weft::spawn(..).await",
                    cell(&z, || weft_jobs(&tokio_rt, &z)),
                ),
                (
                    "spawn_blocking",
                    cell(&z, || spawn_blocking_jobs(&tokio_rt, &z)),
                ),
                ("std::thread", cell(&z, || std_jobs(&z))),
            ],
        ),
        (
            format!("{} async requests (server waits {:?})", z.requests, z.delay),
            vec![
                (
                    "virtual threads, block_on",
                    cell(&z, || weft_requests(addr, &z)),
                ),
                (
                    "tokio::spawn",
                    cell(&z, || tokio_requests(&tokio_rt, addr, &z)),
                ),
            ],
        ),
    ];
    println!("| workload | column | median ms | min..max ms | runs |");
    println!("|---|---|---|---|---|");
    for (row, cells) in rows {
        for (col, v) in cells {
            let s = summary(&v).expect("runs");
            println!(
                "| {row} | {col} | {} | {}..{} | {} |",
                sig3(median(&v).unwrap()),
                sig3(s.min),
                sig3(s.max),
                v.len()
            );
        }
    }
}

/// `z.runs` wall times of `f`, in milliseconds.
fn cell(z: &Sizes, mut f: impl FnMut()) -> Vec<f64> {
    (0..z.runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}

fn weft_jobs(rt: &tokio::runtime::Runtime, z: &Sizes) {
    let (n, job) = (z.jobs, z.job);
    rt.block_on(async move {
        let jobs: Vec<_> = (0..n)
            .map(|i| {
                weft::spawn(move || {
                    weft::sleep(job).unwrap();
                    i
                })
            })
            .collect();
        for j in jobs {
            j.await.unwrap();
        }
    });
}

fn spawn_blocking_jobs(rt: &tokio::runtime::Runtime, z: &Sizes) {
    let (n, job) = (z.jobs, z.job);
    rt.block_on(async move {
        let jobs: Vec<_> = (0..n)
            .map(|i| {
                tokio::task::spawn_blocking(move || {
                    std::thread::sleep(job);
                    i
                })
            })
            .collect();
        for j in jobs {
            j.await.unwrap();
        }
    });
}

fn std_jobs(z: &Sizes) {
    let job = z.job;
    let jobs: Vec<_> = (0..z.jobs)
        .map(|i| {
            std::thread::spawn(move || {
                std::thread::sleep(job);
                i
            })
        })
        .collect();
    for j in jobs {
        j.join().unwrap();
    }
}

async fn get(client: &reqwest::Client, url: &str) -> usize {
    let body = client
        .get(url)
        .send()
        .await
        .expect("send")
        .text()
        .await
        .expect("body");
    assert_eq!(body, "hello");
    body.len()
}

fn weft_requests(addr: SocketAddr, z: &Sizes) {
    let client = reqwest::Client::new();
    let url: Arc<str> = format!("http://{addr}/").into();
    let threads: Vec<_> = (0..z.requests)
        .map(|_| {
            let (client, url) = (client.clone(), Arc::clone(&url));
            weft::spawn(move || weft::block_on(get(&client, &url)))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

fn tokio_requests(rt: &tokio::runtime::Runtime, addr: SocketAddr, z: &Sizes) {
    let n = z.requests;
    rt.block_on(async move {
        let client = reqwest::Client::new();
        let url: Arc<str> = format!("http://{addr}/").into();
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let (client, url) = (client.clone(), Arc::clone(&url));
                tokio::spawn(async move { get(&client, &url).await })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// A loopback HTTP/1.1 server (keep-alive) that answers each request with
/// `hello` after `delay`.
async fn server(delay: Duration) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = l.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let (r, mut w) = conn.into_split();
                let mut r = BufReader::new(r);
                let mut line = String::new();
                loop {
                    let mut any = false;
                    loop {
                        line.clear();
                        match r.read_line(&mut line).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => any = true,
                        }
                    }
                    if !any {
                        return;
                    }
                    tokio::time::sleep(delay).await;
                    let resp = "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
                    if w.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}
