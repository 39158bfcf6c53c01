//! Each peer server, started as `bench/shared-cores.sh` starts it, says
//! `ready <port>` and answers `GET /hello` with the 13 bytes (twice on one
//! keep-alive connection, as wrk sends them) and other paths with 404.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A started server, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bin 0`; returns it and the port of its `ready <port>` line.
fn start(bin: &str) -> (Server, u16) {
    let mut child = Command::new(bin)
        .arg("0")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {bin}: {e}"));
    let stdout = child.stdout.take().expect("piped stdout");
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("reading the ready line");
    let port = line
        .trim_end()
        .strip_prefix("ready ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{bin} printed {line:?}, not `ready <port>`"));
    assert_ne!(port, 0, "{bin} announced port 0");
    (server, port)
}

/// Sends `GET path` on `conn`; returns the status code and the body.
fn get(conn: &mut BufReader<TcpStream>, path: &str) -> (u16, Vec<u8>) {
    write!(
        conn.get_mut(),
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    )
    .expect("sending");
    let mut status = String::new();
    conn.read_line(&mut status).expect("status line");
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status:?}"));
    let mut len = None;
    loop {
        let mut h = String::new();
        conn.read_line(&mut h).expect("header line");
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((name, value)) = h.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            len = value.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; len.expect("a Content-Length header")];
    conn.read_exact(&mut body).expect("body");
    (code, body)
}

fn serves_hello(bin: &str) {
    let (_server, port) = start(bin);
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    // A guard against a server that never answers, not a timing assertion.
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut conn = BufReader::new(s);
    for _ in 0..2 {
        let (code, body) = get(&mut conn, "/hello");
        assert_eq!(code, 200);
        assert_eq!(body, b"Hello, World!");
    }
    assert_eq!(get(&mut conn, "/nowhere").0, 404);
}

#[test]
fn may_hello_serves() {
    serves_hello(env!("CARGO_BIN_EXE_may-hello"));
}

#[test]
fn axum_hello_serves() {
    serves_hello(env!("CARGO_BIN_EXE_axum-hello"));
}
