//! Test helpers: a raw HTTP/1.1 client on std sockets (independent of the
//! crate's own client) and server start-up.

#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use weft_http::{Handler, Server, ServerConfig, ServerHandle, ThreadMode};

/// Generous failure detector for blocking reads in tests.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(20);

/// Both thread modes, for tests that must hold in each: virtual threads,
/// and a small pool of OS threads.
pub fn modes() -> [ThreadMode; 2] {
    [ThreadMode::Virtual, ThreadMode::Platform { threads: 4 }]
}

/// A server on a free loopback port.
pub fn start(config: ServerConfig, handler: impl Handler) -> ServerHandle {
    Server::bind("127.0.0.1:0", config)
        .expect("bind")
        .serve(handler)
        .expect("serve")
}

pub fn connect(addr: SocketAddr) -> Raw {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(TEST_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(TEST_TIMEOUT)).unwrap();
    Raw { s, buf: Vec::new() }
}

/// A response read by the raw client.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub chunked: bool,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }
    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

pub struct Raw {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("write");
    }

    /// Reads more bytes into the buffer; false on EOF.
    fn fill(&mut self) -> io::Result<bool> {
        let mut tmp = [0u8; 8192];
        let n = self.s.read(&mut tmp)?;
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n > 0)
    }

    /// Reads one response (`head`: the request was HEAD, no body).
    pub fn response_to(&mut self, head: bool) -> io::Result<RawResponse> {
        let end = loop {
            if let Some(p) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            if !self.fill()? {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "EOF before a response head; got {:?}",
                        String::from_utf8_lossy(&self.buf)
                    ),
                ));
            }
        };
        let mut hdrs = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Response::new(&mut hdrs);
        assert!(r.parse(&self.buf[..end]).unwrap().is_complete());
        let status = r.code.unwrap();
        let headers: Vec<(String, String)> = r
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_string(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect();
        self.buf.drain(..end);
        let mut resp = RawResponse {
            status,
            headers,
            body: Vec::new(),
            chunked: false,
        };
        if head || status == 204 || status == 304 || (100..200).contains(&status) {
            return Ok(resp);
        }
        if resp
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            resp.chunked = true;
            loop {
                let line = self.line()?;
                let size = usize::from_str_radix(line.split(';').next().unwrap().trim(), 16)
                    .expect("chunk size");
                if size == 0 {
                    while !self.line()?.is_empty() {}
                    break;
                }
                while self.buf.len() < size + 2 {
                    if !self.fill()? {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                }
                resp.body.extend_from_slice(&self.buf[..size]);
                assert_eq!(&self.buf[size..size + 2], b"\r\n");
                self.buf.drain(..size + 2);
            }
        } else if let Some(cl) = resp.header("content-length") {
            let n: usize = cl.parse().unwrap();
            while self.buf.len() < n {
                if !self.fill()? {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
            }
            resp.body = self.buf.drain(..n).collect();
        } else {
            while self.fill()? {}
            resp.body = std::mem::take(&mut self.buf);
        }
        Ok(resp)
    }

    pub fn response(&mut self) -> RawResponse {
        self.response_to(false).expect("response")
    }

    fn line(&mut self) -> io::Result<String> {
        loop {
            if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8_lossy(&self.buf[..p]).into_owned();
                self.buf.drain(..p + 2);
                return Ok(l);
            }
            if !self.fill()? {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Asserts the server closed the connection with nothing more to read
    /// (EOF or reset).
    pub fn expect_closed(&mut self) {
        if !self.buf.is_empty() {
            panic!("unexpected bytes: {:?}", String::from_utf8_lossy(&self.buf));
        }
        match self.fill() {
            Ok(false) => {}
            Ok(true) => panic!(
                "expected close, got {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("expected close, got error {e}"),
        }
    }

    /// Whether anything is buffered already (pipelining checks).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// A GET request for `path` with keep-alive.
pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}
