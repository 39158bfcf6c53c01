//! A blocking HTTP/1.1 client with per-host keep-alive pooling.
//!
//! ```
//! use std::time::Duration;
//! use weft_http::{Client, ClientConfig, Response};
//!
//! let server = weft_http::serve("127.0.0.1:0", |req: &mut weft_http::Request<'_>| {
//!     Response::text(format!("you sent {} bytes", req.read_body().unwrap().len()))
//! })?;
//! let url = format!("http://{}/upload", server.local_addr());
//!
//! let client = Client::with_config(ClientConfig {
//!     read_timeout: Some(Duration::from_secs(5)),
//!     ..ClientConfig::default()
//! });
//! let resp = client.post(&url).body("12345").send()?;
//! assert_eq!(resp.status(), 200);
//! assert_eq!(resp.text()?, "you sent 5 bytes");
//! // The connection went back to the pool and is reused.
//! let resp = client.get(&url).send()?;
//! assert_eq!(resp.text()?, "you sent 0 bytes");
//! assert_eq!(client.idle_connections(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Calls block the calling thread: on a weft virtual thread they park it
//! (the carrier runs other threads), on an OS thread they block it.

// The files of this module, one concept each (a comment, not rustdoc:
// users see the re-exported items, not the files):
//
//   pool.rs      Client: the per-host pool of keep-alive connections
//   request.rs   RequestBuilder: building and sending one request
//   response.rs  Response: status, headers, the body as a Read
//   conn.rs      Connection: one connection, response heads, Exchange
//   encode.rs    encode_request: request heads on the wire
//   url.rs       Url: parsing and checking URLs, query encoding
//   config.rs    ClientConfig: timeouts and limits
//   error.rs     Error, ErrorKind

mod config;
mod conn;
mod encode;
mod error;
mod pool;
mod request;
mod response;
mod url;

pub use config::ClientConfig;
pub use conn::{Connection, Exchange};
pub use encode::encode_request;
pub use error::{Error, ErrorKind};
pub use pool::Client;
pub use request::RequestBuilder;
pub use response::Response;
pub use url::Url;
