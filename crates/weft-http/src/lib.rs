//! HTTP/1.1 for weft: a server that runs one virtual thread per connection
//! (the Helidon 4 "Níma" model) or a fixed pool of OS threads — one
//! setting, same handler code — and a blocking client with keep-alive
//! pooling.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use weft_http::{Client, Response, Router, Server, ServerConfig, ThreadMode};
//!
//! // Handlers are plain blocking code.
//! let router = Arc::new(Router::new()
//!     .get("/hello/:name", |req| Response::text(format!("hello {}", req.param("name").unwrap())))
//!     .post("/echo", |req| match req.read_body() {
//!         Ok(body) => Response::bytes(body),
//!         Err(_) => Response::error(400),
//!     })
//!     .get("/slow", |_req| {
//!         weft::sleep(Duration::from_millis(10)).unwrap(); // parks only this connection
//!         Response::text("done")
//!     }));
//!
//! for mode in [ThreadMode::Virtual, ThreadMode::Platform { threads: 4 }] {
//!     let config = ServerConfig::default().thread_mode(mode);
//!     let server = Server::bind("127.0.0.1:0", config)?.serve(router.clone())?;
//!     let base = format!("http://{}", server.local_addr());
//!
//!     let client = Client::new();
//!     assert_eq!(client.get(&format!("{base}/hello/weft")).send()?.text()?, "hello weft");
//!     assert_eq!(client.post(&format!("{base}/echo")).body("ping").send()?.text()?, "ping");
//!     assert_eq!(client.get(&format!("{base}/slow")).send()?.text()?, "done");
//!     assert_eq!(client.get(&format!("{base}/nope")).send()?.status(), 404);
//!
//!     assert_eq!(server.stats().requests, 4);
//!     let report = server.shutdown(Duration::from_secs(5));
//!     assert!(report.drained);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Application code
//!
//! The comfort of axum, with blocking code: a handler returns anything
//! [`IntoResponse`] — a `Result` with [`HttpError`] makes `?` work;
//! [`Json`] in and out (feature `json`, on by default); state given once to
//! the router; every error answer, the server's own included, rendered by
//! one hook; a graceful stop on SIGTERM.
//!
//! ```
//! # #[cfg(feature = "json")] {
//! use std::sync::Mutex;
//! use weft_http::{Client, HttpError, Json, Request, Router};
//!
//! #[derive(serde::Deserialize, serde::Serialize, Clone)]
//! struct Todo { title: String, done: bool }
//!
//! struct Todos(Mutex<Vec<Todo>>);
//!
//! fn create(req: &mut Request<'_>) -> Result<(u16, Json<Todo>), HttpError> {
//!     let todo: Todo = req.json()?; // 415/400/422 naming the field
//!     req.state::<Todos>().0.lock().unwrap().push(todo.clone());
//!     Ok((201, Json(todo)))
//! }
//!
//! fn get(req: &mut Request<'_>) -> Result<Json<Todo>, HttpError> {
//!     let id: usize = req.param_as("id")?; // 400 naming `id`
//!     let todos = req.state::<Todos>();
//!     let todo = todos.0.lock().unwrap().get(id).cloned();
//!     Ok(Json(todo.ok_or_else(|| HttpError::not_found(format!("no todo {id}")))?))
//! }
//!
//! let app = Router::with_state(Todos(Mutex::new(Vec::new())))
//!     .post("/todos", create)
//!     .get("/todos/:id", get)
//!     .on_error(HttpError::json_response); // 404, 405, 413, 500, … as JSON
//! let server = weft_http::serve("127.0.0.1:0", app)?;
//! let url = format!("http://{}/todos", server.local_addr());
//!
//! let client = Client::new();
//! let r = client.post(&url).json(&serde_json::json!({"title": "ship", "done": false})).send()?;
//! assert_eq!(r.status(), 201);
//! assert_eq!(client.get(&format!("{url}/0")).send()?.json::<Todo>()?.title, "ship");
//! let r = client.get(&format!("{url}/9")).send()?;
//! assert_eq!(r.status(), 404);
//! assert_eq!(r.json::<serde_json::Value>()?["error"], "no todo 9");
//! // In `main`: serve until SIGINT/SIGTERM, drain, exit 0.
//! // let report = server.serve_until_signal(Duration::from_secs(10))?;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `examples/bookmarks.rs` is a whole JSON CRUD service on `weft-pg` in
//! this style.
//!
//! # Errors mapped once, routers that compose
//!
//! `?` turns any error into an [`HttpError`] whose status is decided by
//! the error's type, in one place rather than at each call site:
//! weft-http's own client errors are `502` (`504` on a timeout); with
//! feature `pg`, weft-pg's are `409` (unique or foreign-key violation),
//! `503` with `Retry-After: 1` (no pooled connection in time, or a pool that
//! cannot reach its server), `503`
//! (connection lost, pool closed) or `500`; the application's own types
//! are mapped by [`Router::map_error`]; anything else is `500`. The cause
//! stays with the error for the hook ([`Router::on_error`]), which also
//! sees the request ([`HttpError::request`]: method, path, route pattern,
//! activity) and, for a panic, its message and location
//! ([`HandlerPanic`]); the client sees none of it. [`Router::nest`] mounts
//! a router under a prefix, [`Router::merge`] joins two.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use weft_http::{Client, HttpError, Request, Router};
//!
//! #[derive(Debug)]
//! struct Taken(String);
//! impl std::fmt::Display for Taken {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
//!         write!(f, "code {} is taken", self.0)
//!     }
//! }
//! impl std::error::Error for Taken {}
//!
//! struct Links(Mutex<Vec<String>>);
//! struct Checker(String); // an upstream service's URL
//!
//! fn create(req: &mut Request<'_>) -> Result<(u16, String), HttpError> {
//!     let code = req.param("code").unwrap_or_default().to_owned();
//!     req.set_activity(format_args!("checking {code}"));
//!     Client::new().get(&req.state::<Checker>().0).send()?; // fails: 502
//!     let links = req.state::<Links>();
//!     let mut links = links.0.lock().unwrap();
//!     if links.contains(&code) {
//!         Err(Taken(code.clone()))?; // 409, by `map_error` below
//!     }
//!     links.push(code.clone());
//!     Ok((201, code))
//! }
//!
//! let upstream = weft_http::serve("127.0.0.1:0", |_req: &mut Request<'_>| "ok")?;
//! let admin = Router::new() // its patterns without the prefix
//!     .get("/links", |req| req.state::<Links>().0.lock().unwrap().join(","));
//! let log = Arc::new(Mutex::new(Vec::new()));
//! let seen = log.clone();
//! let app = Router::with_state(Links(Mutex::new(Vec::new())))
//!     .state(Checker(format!("http://{}/", upstream.local_addr())))
//!     .post("/links/:code", create)
//!     .nest("/admin", admin) // every method, state inherited
//!     .map_error(|e: &Taken| Some(HttpError::conflict(e.to_string())))
//!     .on_error(move |e: &HttpError| {
//!         if let Some(r) = e.request() {
//!             let route = r.route().unwrap_or("-");
//!             seen.lock().unwrap().push(format!("{} {route} ({}): {e}", r.method(), r.activity()));
//!         }
//!         e.text_response()
//!     });
//! let server = weft_http::serve("127.0.0.1:0", app)?;
//! let base = format!("http://{}", server.local_addr());
//!
//! let c = Client::new();
//! assert_eq!(c.post(&format!("{base}/links/rs")).send()?.status(), 201);
//! assert_eq!(c.post(&format!("{base}/links/rs")).send()?.status(), 409);
//! assert_eq!(c.get(&format!("{base}/admin/links")).send()?.text()?, "rs");
//! upstream.shutdown(Duration::from_secs(5));
//! let r = c.post(&format!("{base}/links/go")).send()?;
//! assert_eq!((r.status(), r.text()?), (502, "Bad Gateway\n".to_owned()));
//! let log = log.lock().unwrap();
//! assert_eq!(log[0], "POST /links/:code (checking rs): 409 code rs is taken: code rs is taken");
//! assert!(log[1].starts_with("POST /links/:code (checking go): 502 Bad Gateway: http client:"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `examples/shortener.rs` is this service on PostgreSQL, with a test per
//! mapped status.
//!
//! # Server
//!
//! - HTTP/1.1 keep-alive and pipelining, `Content-Length` and chunked
//!   bodies in both directions, `Expect: 100-continue` (answered when the
//!   handler first reads the body), `HEAD`, `Connection: close`, HTTP/1.0
//!   clients; `Date` and `Content-Length`/`Transfer-Encoding` are set by
//!   the server. Requests are parsed with `httparse`.
//! - [`Handler`]: any `Fn(&mut Request) -> impl IntoResponse`; [`Router`]
//!   adds path parameters, 404/405, state ([`Router::with_state`],
//!   [`Request::state`]), error mapping ([`Router::map_error`]), the error
//!   hook ([`Router::on_error`]) and composition ([`Router::nest`],
//!   [`Router::merge`]). A panicking handler yields `500` for its request;
//!   the server keeps running.
//! - Input: [`Request::param_as`], [`Request::query_as`] (feature `serde`),
//!   [`Request::json`] (feature `json`); their errors are [`HttpError`]s
//!   that name the field at fault.
//! - [`ThreadMode::Virtual`] (default; optionally on a given
//!   [`weft::Runtime`] via [`ServerConfig::runtime`]) or
//!   [`ThreadMode::Platform`] (a fixed pool of OS threads).
//! - Limits, each a [`ServerConfig`] field: head size (`431`, `414` for
//!   an over-long request line), header count (`431`), body size (`413`),
//!   malformed input (`400`), a transfer coding other than `chunked`
//!   (`501`), a deadline for each request head (`408`, which also cuts off
//!   slowloris clients), time budgets for each request body (`408`) and
//!   each response — the time a client keeps the server waiting, summed
//!   over the request, plus a second per
//!   [`min_data_rate`](ServerConfig::min_data_rate) bytes, not a timeout
//!   per call, so a client that trickles cannot hold a connection — an
//!   idle keep-alive timeout (silent close), and `max_connections`
//!   (default: from `RLIMIT_NOFILE`). At the limit, [`WhenFull::ShedIdle`]
//!   (default) closes the connection without a request in progress that
//!   is nearest its timeout to let the new one in, so a flood of idle or
//!   slow connections cannot lock clients out; [`WhenFull::Wait`] leaves
//!   new connections in the listen backlog; [`WhenFull::Reject`] answers
//!   them `503`. Every such error response closes the connection, and
//!   goes through the error hook.
//! - Idle connections are cheap: a plain-HTTP connection that waits for a
//!   request longer than [`idle_thread_timeout`](ServerConfig::idle_thread_timeout)
//!   (500 ms), or that has sent nothing yet, waits without a thread, a
//!   stack or a buffer (2.7–4.5 KiB of memory each at 10,000, beside Go
//!   `net/http`'s 19.5–20 KiB: `docs/bench.md`, `http-idle-10k`).
//!
//! # What the server enforces from RFC 9112 and RFC 9110
//!
//! The requirements a server MUST meet on requests it receives, and how:
//!
//! | rule | answer |
//! |---|---|
//! | HTTP/1.1 request without `Host`; more than one `Host`; an invalid `Host` (9112 §3.2) | `400` |
//! | request-target not in a form its method allows: origin-form, absolute-form (`http`/`https`), authority-form for `CONNECT` only, `*` for `OPTIONS` only (9112 §3.2) | `400` |
//! | request-target longer than the server parses (9112 §3) | `414` |
//! | whitespace between a field name and its colon (9112 §5.1); obsolete line folding (§5.2); whitespace before the first field (§2.2); bare CR, or CR, LF or NUL in a field value (§2.2, 9110 §5.5) | `400` (httparse) |
//! | `Transfer-Encoding` with `chunked` not last (9112 §6.3); `chunked` twice (§6.1); in an HTTP/1.0 request (§6.1); with `Content-Length` (§6.1: rejected rather than overridden) | `400`, connection closed |
//! | a transfer coding the server does not implement (9112 §6.1, a SHOULD) | `501` |
//! | invalid `Content-Length`, or several that differ (9112 §6.3, 9110 §8.6; `42, 42` is rejected too, which §8.6 allows); very large values parsed without overflow | `400`; `413` over the body limit |
//! | chunk sizes parsed without overflow; chunk extensions ignored (9112 §7.1) | `400` for a malformed chunk |
//! | a body shorter than its `Content-Length` (9112 §6.3) | connection closed |
//! | fields or head larger than the server wishes to process (9110 §5.4) | `431` |
//! | `Expect: 100-continue` in HTTP/1.0 ignored (9110 §10.1.1); no `1xx` to an HTTP/1.0 client (9110 §15.2) | — |
//! | `Connection: close`: close after the response, read no further request (9112 §9.6) | — |
//! | read the whole body or close (9112 §9.3) | unread bodies drained, else closed |
//! | no body in answers to `HEAD` or with `1xx`/`204`/`304`; no `Transfer-Encoding` to HTTP/1.0 or in `1xx`/`204` (9112 §6.1, 9110 §6.4.1); a `Date` in every answer (9110 §6.6.1) | — |
//!
//! Left to the application: an absolute-form target's authority overrides
//! `Host` (9112 §3.2.2): the server routes by path and does not read
//! `Host`, but [`Request::header`] returns the field as sent. `CONNECT` is
//! not a tunnel here. The trailer section of a chunked body is read and
//! discarded (at most 16 KiB, else `400`).
//! - [`ServerHandle::stats`] (open connections, in-flight requests,
//!   requests served, responses by class, errors by class),
//!   [`ServerHandle::shutdown`] (graceful, with a deadline),
//!   [`ServerHandle::wait`] and [`ServerHandle::serve_until_signal`]
//!   (SIGINT/SIGTERM: stop accepting, drain, then interrupt).
//!
//! # Features
//!
//! - `json` (default): [`Json`], [`Request::json`], the client's JSON
//!   methods, [`HttpError::json_response`]. Implies `serde`.
//! - `serde`: [`Request::query_as`].
//! - `pg`: weft-pg's errors answered by status when `?` converts them
//!   (see above). weft-pg does not depend on weft-http.
//!
//! # Client
//!
//! [`Client`]: per-host keep-alive pool, connect/read/write/total
//! timeouts, chunked decoding, errors by [`ErrorKind`], a query builder
//! that percent-encodes ([`RequestBuilder::query`](client::RequestBuilder::query)),
//! JSON bodies (feature `json`). A URL it could not send exactly as given
//! is an error, never a silent change ([`Url`]). [`Connection`] is
//! the single-connection building block with an allocation-free
//! [`Connection::exchange`].

#![warn(missing_docs)]

mod budget;
pub mod client;
mod date;
pub mod debug;
mod error;
mod ext;
#[cfg(feature = "serde")]
mod extract;
mod panic;
mod request;
mod response;
mod router;
mod server;
mod signal;
pub mod tls;
mod wire;

pub use client::{Client, ClientConfig, Connection, Error, ErrorKind, Exchange, Url};
pub use error::{HandlerPanic, HttpError, RequestInfo};
pub use ext::{OptionExt, ResultExt};
#[cfg(feature = "json")]
pub use extract::Json;
pub use request::{Request, RequestBody, Version};
pub use response::{Body, IntoResponse, Redirect, Response, StreamFn, reason};
pub use router::{Handler, Router};
/// The rustls crate this version of weft-http uses (for
/// [`TlsConfig::from_rustls`] and [`ClientConfig::tls`]).
pub use rustls;
pub use server::{
    ErrorStats, Server, ServerConfig, ServerHandle, ServerStats, ShutdownReport, ThreadMode,
    WhenFull, serve,
};
pub use tls::TlsConfig;
