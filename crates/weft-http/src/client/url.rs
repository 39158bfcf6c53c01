//! [`Url`]: parsing and checking `http://`/`https://` URLs (a URL that
//! cannot be sent unchanged is an error), and appending percent-encoded
//! query pairs for [`RequestBuilder::query`](super::RequestBuilder::query).
//! Parsed by [`Client::request`](super::Client::request); read when
//! connecting and encoding a request.

use std::fmt;
use std::net::SocketAddr;

use super::error::{Error, ErrorKind};

/// A parsed `http://` or `https://host[:port][/path][?query]` URL.
///
/// The client sends the path and query exactly as given, so a URL it
/// could not send unchanged is an error rather than a silent change: user
/// info (`user:pw@`, which would be dropped), characters outside RFC
/// 3986's set (spaces, non-ASCII, `"`, `<`, `{`, `|`, …: percent-encode
/// them) and malformed `%` escapes. The `#fragment`, which is never part
/// of a request, is removed. Build query strings with
/// [`RequestBuilder::query`](super::RequestBuilder::query), which encodes.
///
/// ```
/// use weft_http::Url;
/// assert_eq!(Url::parse("http://h/a%20b?x=1")?.path_and_query(), "/a%20b?x=1");
/// assert!(Url::parse("http://h/a b").is_err());
/// assert!(Url::parse("http://h/caf\u{e9}").is_err());
/// assert!(Url::parse("http://h/?q=100%").is_err());
/// assert!(Url::parse("http://user:pw@h/").is_err());
/// # Ok::<(), weft_http::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub(super) https: bool,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) path_and_query: String,
}

impl Url {
    /// Parses `s`: `http://` (default port 80) or `https://` (443).
    pub fn parse(s: &str) -> Result<Url, Error> {
        let bad = |m: &str| Error::new(ErrorKind::InvalidUrl, format!("{m}: {s:?}"));
        let (https, rest) = if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else {
            return Err(bad("URL must start with http:// or https://"));
        };
        let default_port = if https { 443 } else { 80 };
        let (authority, pq) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err(bad(
                "user info in URLs is not supported (send an Authorization header)",
            ));
        }
        let (host, port) = if let Some(r) = authority.strip_prefix('[') {
            let (h, after) = r.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse().map_err(|_| bad("invalid port"))?,
                None if after.is_empty() => default_port,
                None => return Err(bad("invalid authority")),
            };
            (format!("[{h}]"), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), p.parse().map_err(|_| bad("invalid port"))?),
                None => (authority.to_owned(), default_port),
            }
        };
        if host.is_empty()
            || host
                .bytes()
                .any(|b| !b.is_ascii_graphic() || b"\"<>\\^`{|}/?#".contains(&b))
        {
            return Err(bad("invalid host"));
        }
        let mut path_and_query = if pq.starts_with('?') {
            format!("/{pq}")
        } else {
            pq.to_owned()
        };
        if let Some(i) = path_and_query.find('#') {
            path_and_query.truncate(i);
        }
        if let Err(m) = check_target(&path_and_query) {
            return Err(bad(m));
        }
        Ok(Url {
            https,
            host,
            port,
            path_and_query,
        })
    }

    /// The host (IPv6 addresses keep their brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port (80 or 443 if not given).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `"http"` or `"https"`.
    pub fn scheme(&self) -> &'static str {
        if self.https { "https" } else { "http" }
    }

    /// Whether the URL is `https://`.
    pub fn is_https(&self) -> bool {
        self.https
    }

    /// `host:port` (the port left out when it is the scheme's default):
    /// the `Host` header value.
    pub fn authority(&self) -> String {
        if self.port == if self.https { 443 } else { 80 } {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The request target: path and query (`/a/b?c=d`).
    pub fn path_and_query(&self) -> &str {
        &self.path_and_query
    }

    /// Resolves the host to socket addresses (DNS through weft's blocking
    /// offload; literal addresses directly).
    pub fn socket_addrs(&self) -> Result<Vec<SocketAddr>, Error> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        weft::net::lookup_host((host, self.port))
            .map(Iterator::collect)
            .map_err(|e| Error::io(ErrorKind::Connect, &format!("resolving {}", self.host), e))
    }
}

/// Characters a query component keeps as they are: RFC 3986's
/// unreserved set. Everything else is percent-encoded (space as `%20`),
/// which every decoder reads back unchanged, `+`-as-space or not.
const QUERY_COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Checks that `pq` (path and query) can be sent as is: RFC 3986's
/// `pchar`s, `/` and `?`, and `%` only in `%XX` escapes.
fn check_target(pq: &str) -> Result<(), &'static str> {
    let b = pq.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                if !(i + 2 < b.len()
                    && b[i + 1].is_ascii_hexdigit()
                    && b[i + 2].is_ascii_hexdigit())
                {
                    return Err("'%' must start a %XX escape (write a literal % as %25)");
                }
                i += 3;
                continue;
            }
            c if c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?".contains(&c) => {}
            c if c.is_ascii() => {
                return Err("character not allowed in a URL path or query (percent-encode it)");
            }
            _ => return Err("non-ASCII character in URL (percent-encode it)"),
        }
        i += 1;
    }
    Ok(())
}

impl Url {
    /// Appends `key=value` pairs to the query, percent-encoding both.
    pub(super) fn append_query<K: AsRef<str>, V: AsRef<str>>(&mut self, pairs: &[(K, V)]) {
        for (k, v) in pairs {
            let pq = &mut self.path_and_query;
            match pq.find('?') {
                None => pq.push('?'),
                Some(i) if i + 1 == pq.len() || pq.ends_with('&') => {}
                Some(_) => pq.push('&'),
            }
            pq.extend(percent_encoding::utf8_percent_encode(
                k.as_ref(),
                QUERY_COMPONENT,
            ));
            pq.push('=');
            pq.extend(percent_encoding::utf8_percent_encode(
                v.as_ref(),
                QUERY_COMPONENT,
            ));
        }
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme(),
            self.authority(),
            self.path_and_query
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = Url::parse("http://example.com/a?b=c#frag").unwrap();
        assert_eq!(
            (u.host(), u.port(), u.path_and_query()),
            ("example.com", 80, "/a?b=c")
        );
        assert_eq!(u.authority(), "example.com");
        let u = Url::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!((u.port(), u.path_and_query()), (8080, "/"));
        assert_eq!(u.to_string(), "http://127.0.0.1:8080/");
        let u = Url::parse("http://[::1]:81?x").unwrap();
        assert_eq!(
            (u.host(), u.port(), u.path_and_query()),
            ("[::1]", 81, "/?x")
        );
        let u = Url::parse("https://x/a").unwrap();
        assert_eq!(
            (u.scheme(), u.port(), u.authority()),
            ("https", 443, "x".into())
        );
        assert_eq!(u.to_string(), "https://x/a");
        let u = Url::parse("https://x:8443").unwrap();
        assert_eq!((u.port(), u.authority()), (8443, "x:8443".into()));
        assert_eq!(Url::parse("http://x:443/").unwrap().authority(), "x:443");
        assert_eq!(
            Url::parse("ftp://x/").unwrap_err().kind(),
            ErrorKind::InvalidUrl
        );
        assert_eq!(
            Url::parse("http://x:99999/").unwrap_err().kind(),
            ErrorKind::InvalidUrl
        );
        assert_eq!(
            Url::parse("http:///").unwrap_err().kind(),
            ErrorKind::InvalidUrl
        );
    }
}
