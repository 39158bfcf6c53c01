//! The pooling [`Client`]: configuration, the per-host pool of idle
//! keep-alive connections (check-out, check-in, expiry), connecting to a
//! URL's addresses, and the entry points that start a request. Requests
//! check connections out
//! ([`RequestBuilder::send`](super::RequestBuilder::send)); responses check
//! them back in.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::conn::{Connection, Limits};
use super::error::{Error, ErrorKind};
use super::request::{ReqBody, RequestBuilder};
use super::{ClientConfig, Url};
use weft::sync::Unpoison;

/// A blocking HTTP/1.1 client with per-host keep-alive pooling. Cheap to
/// clone (clones share the pool); safe to use from many threads.
///
/// # Examples
///
/// ```
/// use weft_http::{Client, Request, Response};
///
/// let server = weft_http::serve("127.0.0.1:0", |req: &mut Request<'_>| {
///     Response::text(req.header("x-name").unwrap_or("nobody").to_string())
/// })?;
/// let url = format!("http://{}/", server.local_addr());
///
/// let client = Client::new();
/// for _ in 0..3 {
///     let resp = client.get(&url).header("x-name", "weft").send()?;
///     assert_eq!(resp.status(), 200);
///     assert_eq!(resp.text()?, "weft");
/// }
/// // The three requests shared one pooled keep-alive connection.
/// assert_eq!(client.idle_connections(), 1);
/// assert_eq!(server.stats().accepted_connections, 1);
///
/// // Failures are errors with a kind, never panics.
/// let err = client.get("not a url").send().unwrap_err();
/// assert_eq!(err.kind(), weft_http::ErrorKind::InvalidUrl);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Client {
    pub(super) inner: Arc<ClientInner>,
}

pub(super) struct ClientInner {
    pub(super) config: ClientConfig,
    /// Made on the first `https://` request.
    tls: std::sync::OnceLock<Arc<rustls::ClientConfig>>,
    pool: Mutex<HashMap<String, Vec<(Connection, Instant)>>>,
}

impl Default for Client {
    fn default() -> Client {
        Client::new()
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("config", &self.inner.config)
            .field("idle_connections", &self.idle_connections())
            .finish()
    }
}

impl Client {
    /// A client with the default configuration.
    pub fn new() -> Client {
        Client::with_config(ClientConfig::default())
    }

    /// A client with `config`.
    pub fn with_config(config: ClientConfig) -> Client {
        Client {
            inner: Arc::new(ClientInner {
                config,
                tls: std::sync::OnceLock::new(),
                pool: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Idle pooled connections, over all hosts.
    pub fn idle_connections(&self) -> usize {
        self.inner
            .pool
            .lock()
            .unpoison()
            .values()
            .map(Vec::len)
            .sum()
    }

    /// A request with `method` to `url`.
    pub fn request(&self, method: &str, url: &str) -> RequestBuilder {
        RequestBuilder {
            client: self.clone(),
            method: method.to_owned(),
            url: Url::parse(url),
            headers: Vec::new(),
            body: ReqBody::None,
            timeout: None,
        }
    }

    /// A `GET` request.
    pub fn get(&self, url: &str) -> RequestBuilder {
        self.request("GET", url)
    }

    /// A `POST` request.
    pub fn post(&self, url: &str) -> RequestBuilder {
        self.request("POST", url)
    }

    /// A `PUT` request.
    pub fn put(&self, url: &str) -> RequestBuilder {
        self.request("PUT", url)
    }

    /// A `DELETE` request.
    pub fn delete(&self, url: &str) -> RequestBuilder {
        self.request("DELETE", url)
    }

    /// A `HEAD` request.
    pub fn head(&self, url: &str) -> RequestBuilder {
        self.request("HEAD", url)
    }

    fn tls_config(&self) -> Arc<rustls::ClientConfig> {
        let cfg = &self.inner.config;
        self.inner
            .tls
            .get_or_init(|| {
                cfg.tls
                    .clone()
                    .unwrap_or_else(|| Arc::new(crate::tls::client_config(&cfg.tls_roots)))
            })
            .clone()
    }

    pub(super) fn checkout(&self, key: &str) -> Option<Connection> {
        let mut pool = self.inner.pool.lock().unpoison();
        let list = pool.get_mut(key)?;
        let now = weft::clock::now();
        while let Some((conn, since)) = list.pop() {
            if now.duration_since(since) < self.inner.config.idle_timeout && conn.is_reusable() {
                return Some(conn);
            }
        }
        None
    }

    pub(super) fn checkin(&self, key: &str, conn: Connection) {
        if !self.inner.config.keep_alive || !conn.is_reusable() {
            return;
        }
        let mut pool = self.inner.pool.lock().unpoison();
        let list = pool.entry(key.to_owned()).or_default();
        if list.len() < self.inner.config.max_idle_per_host {
            list.push((conn, weft::clock::now()));
        }
    }

    pub(super) fn connect(&self, url: &Url, limits: &Limits) -> Result<Connection, Error> {
        let addrs = url.socket_addrs()?;
        let mut last = None;
        for a in addrs {
            let t = limits
                .next(Some(self.inner.config.connect_timeout))?
                .unwrap_or(self.inner.config.connect_timeout);
            let c = if url.https {
                Connection::connect_tls(a, &url.host, self.tls_config(), t)
            } else {
                Connection::connect(a, t)
            };
            match c {
                Ok(c) => {
                    let _ = c.set_nodelay(self.inner.config.nodelay);
                    return Ok(c);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            Error::new(ErrorKind::Connect, format!("no address for {}", url.host))
        }))
    }
}
