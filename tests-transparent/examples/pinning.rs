//! The lab's E7 driver as unchanged code, for its `transparent` row: each
//! request takes one of `--connections` `std::sync::Mutex`es round-robin
//! and holds it across a `--hold-ms` blocking call (`std::thread::sleep`,
//! standing in for the socket read a JDBC driver makes inside its
//! `synchronized` block). With the hooks, both the sleep and the wait for
//! the lock park the virtual thread.
//!
//! ```text
//! pinning [--connections 10] [--hold-ms 20]
//! ```
//!
//! Prints `ready <port>` once it serves (virtual threads), then serves
//! until killed.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use weft_http::{Response, Server, ServerConfig, ThreadMode};

fn main() {
    let mut connections = 10usize;
    let mut hold = Duration::from_millis(20);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().and_then(|v| v.parse::<u64>().ok());
        match (a.as_str(), v) {
            ("--connections", Some(n)) if n > 0 => connections = n as usize,
            ("--hold-ms", Some(ms)) => hold = Duration::from_millis(ms),
            _ => {
                eprintln!("pinning: usage: pinning [--connections N] [--hold-ms MS]");
                std::process::exit(2);
            }
        }
    }
    if !weft::transparent::is_enabled() {
        eprintln!("pinning: the hooks are off (WEFT_TRANSPARENT=0?)");
        std::process::exit(1);
    }
    let locks: Arc<Vec<std::sync::Mutex<u64>>> =
        Arc::new((0..connections).map(|_| std::sync::Mutex::new(0)).collect());
    let next = AtomicUsize::new(0);
    let handler = move |_req: &mut weft_http::Request<'_>| {
        let i = next.fetch_add(1, Ordering::Relaxed) % locks.len();
        let mut conn = locks[i].lock().unwrap_or_else(|p| p.into_inner());
        *conn += 1;
        std::thread::sleep(hold);
        Response::text("read")
    };
    let config = ServerConfig::default()
        .thread_mode(ThreadMode::Virtual)
        .accept_queue(4096)
        .backlog(4096)
        .idle_timeout(Duration::from_secs(120))
        .header_read_timeout(Duration::from_secs(120));
    let server = match Server::bind("127.0.0.1:0", config).and_then(|s| s.serve(handler)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pinning: cannot start the server: {e}");
            std::process::exit(1);
        }
    };
    println!("ready {}", server.local_addr().port());
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
