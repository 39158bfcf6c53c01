//! Property tests (the fuzz target, run by `cargo test`): arbitrary and
//! mutated request bytes never crash or hang the server, and generated
//! valid requests (including chunked bodies split anywhere) are parsed
//! exactly.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use proptest::prelude::*;
use weft_http::{Response, ServerConfig, ServerHandle};

/// One server for all cases: echoes method, path, query, headers and body.
fn server() -> SocketAddr {
    static S: OnceLock<ServerHandle> = OnceLock::new();
    S.get_or_init(|| {
        common::start(
            ServerConfig::default()
                .max_header_bytes(4096)
                .max_body_bytes(64 * 1024)
                .header_read_timeout(Duration::from_secs(5)),
            |req: &mut weft_http::Request<'_>| {
                let mut out = format!("{} {} {:?}\n", req.method(), req.path(), req.query());
                for (n, v) in req.headers() {
                    if n.starts_with("x-") {
                        out.push_str(&format!("{}={}\n", n, String::from_utf8_lossy(v)));
                    }
                }
                match req.read_body() {
                    Ok(b) => {
                        out.push_str(&format!("body={}", String::from_utf8_lossy(&b)));
                        Response::text(out)
                    }
                    Err(_) => Response::error(400),
                }
            },
        )
    })
    .local_addr()
}

/// Sends `bytes`, half-closes, and reads everything the server answers.
fn exchange(bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(server()).unwrap();
    s.set_read_timeout(Some(common::TEST_TIMEOUT)).unwrap();
    // The server may close early (e.g. 400) and reset the rest.
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("no answer within the test timeout: {e}"),
    }
    out
}

/// Every response in `out` has a status line with a known status.
fn check_responses(out: &[u8]) {
    let mut rest = out;
    while !rest.is_empty() {
        let mut hdrs = [httparse::EMPTY_HEADER; 32];
        let mut r = httparse::Response::new(&mut hdrs);
        let n = match r.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            other => panic!(
                "bad response {other:?}: {:?}",
                String::from_utf8_lossy(rest)
            ),
        };
        let code = r.code.unwrap();
        assert!(
            [200, 400, 404, 408, 413, 414, 417, 431, 500, 501].contains(&code) || code == 100,
            "status {code}"
        );
        let len: usize = r
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .map_or(0, |h| {
                std::str::from_utf8(h.value).unwrap().parse().unwrap()
            });
        rest = &rest[(n + len).min(rest.len())..];
    }
}

fn valid_request() -> impl Strategy<Value = (String, String, Vec<(String, String)>, Vec<u8>)> {
    (
        prop_oneof![
            Just("GET"),
            Just("POST"),
            Just("PUT"),
            Just("DELETE"),
            Just("PATCH")
        ],
        "/[a-z0-9]{0,8}(/[a-z0-9]{1,8}){0,3}",
        prop::option::of("[a-z]{1,5}=[a-z0-9]{0,5}"),
        prop::collection::vec(("x-[a-z]{1,8}", "[ -~&&[^ ]]{0,20}"), 0..6),
        prop::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(m, p, q, h, b)| {
            let target = match q {
                Some(q) => format!("{p}?{q}"),
                None => p,
            };
            (m.to_string(), target, h, b)
        })
}

fn expected(method: &str, target: &str, headers: &[(String, String)], body: &[u8]) -> String {
    let (p, q) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let mut s = format!("{method} {p} {q:?}\n");
    for (n, v) in headers {
        s.push_str(&format!("{n}={}\n", v.trim()));
    }
    s.push_str(&format!("body={}", String::from_utf8_lossy(body)));
    s
}

fn body_of(out: &[u8]) -> String {
    let end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(
        out.starts_with(b"HTTP/1.1 200 OK"),
        "{:?}",
        String::from_utf8_lossy(out)
    );
    String::from_utf8_lossy(&out[end..]).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_break_the_server(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        check_responses(&exchange(&bytes));
    }

    #[test]
    fn mutated_requests_never_break_the_server(
        (m, t, h, b) in valid_request(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut req = format!("{m} {t} HTTP/1.1\r\nHost: x\r\n");
        for (n, v) in &h {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n", b.len()));
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(&b);
        for (i, v) in flips {
            let i = i.index(bytes.len());
            bytes[i] = v;
        }
        check_responses(&exchange(&bytes));
    }

    #[test]
    fn valid_requests_parse_exactly((m, t, h, b) in valid_request()) {
        let mut req = format!("{m} {t} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
        for (n, v) in &h {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n", b.len()));
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(&b);
        let out = exchange(&bytes);
        prop_assert_eq!(body_of(&out), expected(&m, &t, &h, &b));
    }

    #[test]
    fn chunked_bodies_split_anywhere_decode_exactly(
        body in prop::collection::vec(any::<u8>(), 0..2000),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ext in any::<bool>(),
    ) {
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
        points.push(0);
        points.push(body.len());
        points.sort_unstable();
        points.dedup();
        let mut req = b"POST /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for w in points.windows(2) {
            let part = &body[w[0]..w[1]];
            if part.is_empty() {
                continue;
            }
            req.extend_from_slice(format!("{:x}", part.len()).as_bytes());
            if ext {
                req.extend_from_slice(b";name=value");
            }
            req.extend_from_slice(b"\r\n");
            req.extend_from_slice(part);
            req.extend_from_slice(b"\r\n");
        }
        req.extend_from_slice(b"0\r\n\r\n");
        let out = exchange(&req);
        prop_assert_eq!(body_of(&out), expected("POST", "/c", &[], &body));
    }
}
