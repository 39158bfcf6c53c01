//! Encoding a request head (request line, `Host`, `User-Agent`, the
//! caller's valid headers, framing, `Connection: close`), and the public
//! [`encode_request`] that appends a body. Used by
//! [`RequestBuilder::send`](super::RequestBuilder::send) and by callers of
//! [`Connection::exchange`](super::Connection::exchange).

use super::url::Url;

/// Encodes a request: request line, `Host`, the given headers,
/// `Content-Length` for a body (if `headers` has no framing header),
/// `Connection: close` when `keep_alive` is false, and the body.
///
/// ```
/// let url = weft_http::Url::parse("http://127.0.0.1:8080/x?y=1").unwrap();
/// let req = weft_http::client::encode_request("GET", &url, &[("Accept", "*/*")], b"", true);
/// assert_eq!(req, b"GET /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\n\r\n");
/// ```
pub fn encode_request(
    method: &str,
    url: &Url,
    headers: &[(&str, &str)],
    body: &[u8],
    keep_alive: bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + body.len());
    encode_head(
        &mut out,
        method,
        url,
        headers.iter().copied(),
        Some(body.len() as u64),
        keep_alive,
        None,
    );
    out.extend_from_slice(body);
    out
}

pub(super) fn encode_head<'h>(
    out: &mut Vec<u8>,
    method: &str,
    url: &Url,
    headers: impl Iterator<Item = (&'h str, &'h str)>,
    body_len: Option<u64>,
    keep_alive: bool,
    user_agent: Option<&str>,
) {
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(url.path_and_query.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut has_host = false;
    let mut has_framing = false;
    let mut has_ua = false;
    let mut has_conn = false;
    let mut rest = Vec::new();
    for (n, v) in headers {
        if !crate::wire::valid_header_name(n) || !crate::wire::valid_header_value(v.as_bytes()) {
            continue;
        }
        has_host |= n.eq_ignore_ascii_case("host");
        has_framing |=
            n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding");
        has_ua |= n.eq_ignore_ascii_case("user-agent");
        has_conn |= n.eq_ignore_ascii_case("connection");
        rest.extend_from_slice(n.as_bytes());
        rest.extend_from_slice(b": ");
        rest.extend_from_slice(v.as_bytes());
        rest.extend_from_slice(b"\r\n");
    }
    if !has_host {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(url.authority().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let (Some(ua), false) = (user_agent, has_ua) {
        out.extend_from_slice(b"User-Agent: ");
        out.extend_from_slice(ua.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(&rest);
    if !has_framing {
        match body_len {
            Some(0) => {
                if !matches!(method, "GET" | "HEAD" | "DELETE" | "OPTIONS" | "TRACE") {
                    out.extend_from_slice(b"Content-Length: 0\r\n");
                }
            }
            Some(n) => {
                out.extend_from_slice(b"Content-Length: ");
                crate::wire::push_u64(out, n);
                out.extend_from_slice(b"\r\n");
            }
            None => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        }
    }
    if !keep_alive && !has_conn {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding() {
        let u = Url::parse("http://h:1/p").unwrap();
        let r = encode_request("POST", &u, &[("X-A", "1")], b"hey", false);
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "POST /p HTTP/1.1\r\nHost: h:1\r\nX-A: 1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nhey"
        );
        let r = encode_request(
            "GET",
            &u,
            &[("Bad\r\nName", "x"), ("X", "a\r\nb")],
            b"",
            true,
        );
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "GET /p HTTP/1.1\r\nHost: h:1\r\n\r\n"
        );
    }
}
