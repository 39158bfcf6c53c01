//! `weft-bench`'s worker for its `weft-std` column: the servers of the
//! suite written against `std::net` only, run on virtual threads with
//! `weft`'s `transparent` feature. Beside the `weft` column (the same server
//! written against `weft::net`) it measures what the hooks cost on a real
//! server.
//!
//! `weft-bench` builds and starts it (`--runtimes weft,weft-std`); by hand:
//! `cargo run --release --example bench_worker -- echo-server` in
//! `tests-transparent/` prints `ready <port>` and serves TCP echo on
//! 127.0.0.1 until killed.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

/// The open-file limit the 10,000-connection rows need.
const FD_LIMIT: u64 = 20_000;

fn main() {
    let workload = std::env::args().nth(1).unwrap_or_default();
    let result = match workload.as_str() {
        "echo-server" => echo_server(),
        other => Err(format!(
            "unknown workload {other:?} (this worker serves only `echo-server`)"
        )),
    };
    if let Err(e) = result {
        eprintln!("bench_worker: {e}");
        std::process::exit(2);
    }
}

/// One connection: copies what it reads (4 KiB at a time) back until EOF
/// or an error — the suite's `echo_conn`, on a plain `std::net` stream.
fn echo_conn(mut s: TcpStream) {
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = s.read(&mut buf) {
        if s.write_all(&buf[..n]).is_err() {
            break;
        }
    }
}

/// The accept loop is a virtual thread too: `accept` parks it.
fn echo_server() -> Result<(), String> {
    weft_transparent_tests::raise_fd_limit(FD_LIMIT);
    if !weft::transparent::is_enabled() {
        return Err("the hooks are off (WEFT_TRANSPARENT=0?)".into());
    }
    weft::spawn(|| {
        let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let port = l.local_addr().map_err(|e| e.to_string())?.port();
        println!("ready {port}");
        let _ = std::io::stdout().flush();
        loop {
            let Ok((s, _)) = l.accept() else { continue };
            let _ = s.set_nodelay(true);
            weft::spawn(move || echo_conn(s));
        }
    })
    .join()
    .map_err(|_| "the accept loop panicked".to_string())?
}
