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
//! # Server
//!
//! - HTTP/1.1 keep-alive and pipelining, `Content-Length` and chunked
//!   bodies in both directions, `Expect: 100-continue` (answered when the
//!   handler first reads the body), `HEAD`, `Connection: close`, HTTP/1.0
//!   clients; `Date` and `Content-Length`/`Transfer-Encoding` are set by
//!   the server. Requests are parsed with `httparse`.
//! - [`Handler`]: any `Fn(&mut Request) -> Response`; [`Router`] adds path
//!   parameters and 404/405. A panicking handler yields `500` for its
//!   request; the server keeps running.
//! - [`ThreadMode::Virtual`] (default; optionally on a given
//!   [`weft::Runtime`] via [`ServerConfig::runtime`]) or
//!   [`ThreadMode::Platform`] (a fixed pool of OS threads).
//! - Limits, each a [`ServerConfig`] field: head size (`431`), header count
//!   (`431`), body size (`413`), malformed input (`400`), header-read
//!   timeout (`408`, which also cuts off slowloris clients), body-read
//!   timeout (`408`), idle keep-alive timeout (silent close), write
//!   timeout, and `max_connections` ([`WhenFull::Wait`]: new connections
//!   wait in the listen backlog; [`WhenFull::Reject`]: they get `503`).
//!   Every error response closes the connection.
//! - [`ServerHandle::stats`] (open connections, in-flight requests,
//!   requests served, responses by class, errors by class) and
//!   [`ServerHandle::shutdown`] (graceful, with a deadline).
//!
//! # Client
//!
//! [`Client`]: per-host keep-alive pool, connect/read/write/total
//! timeouts, chunked decoding, errors by [`ErrorKind`]. [`Connection`] is
//! the single-connection building block with an allocation-free
//! [`Connection::exchange`].

#![warn(missing_docs)]

pub mod client;
mod date;
pub mod debug;
mod error;
#[cfg(feature = "serde")]
mod extract;
mod request;
mod response;
mod router;
mod server;
mod signal;
mod wire;

pub use client::{Client, ClientConfig, Connection, Error, ErrorKind, Exchange, Url};
pub use error::HttpError;
#[cfg(feature = "json")]
pub use extract::Json;
pub use request::{Request, RequestBody, Version};
pub use response::{Body, IntoResponse, Response, StreamFn, reason};
pub use router::{Handler, Router};
pub use server::{
    ErrorStats, Server, ServerConfig, ServerHandle, ServerStats, ShutdownReport, ThreadMode,
    WhenFull, serve,
};
