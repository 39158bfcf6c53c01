//! PostgreSQL for weft virtual threads: a connection pool with HikariCP's
//! semantics and a blocking query API that parks the virtual thread —
//! never its carrier.
//!
//! ```
//! // Needs a server: runs against WEFT_PG_URL (CI sets it) and returns
//! // early without one.
//! let Ok(url) = std::env::var("WEFT_PG_URL") else {
//!     eprintln!("WEFT_PG_URL is not set; skipping the example");
//!     return Ok(());
//! };
//! let pool = weft_pg::Pool::new(weft_pg::Config::from_url(&url)?.max_size(4).min_idle(0))?;
//! // 16 virtual threads share 4 connections; waiting for one parks.
//! let handles: Vec<_> = (0..16)
//!     .map(|i: i32| {
//!         let pool = pool.clone();
//!         weft::spawn(move || -> weft_pg::Result<i32> {
//!             let mut conn = pool.get()?;
//!             let row = conn.query_one("SELECT $1::int4 * 2", &[&i])?;
//!             Ok(row.get(0))
//!         })
//!     })
//!     .collect();
//! let sum: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum::<weft_pg::Result<i32>>()?;
//! assert_eq!(sum, 2 * (0..16).sum::<i32>());
//! assert!(pool.metrics().total <= 4);
//! # Ok::<(), weft_pg::Error>(())
//! ```
//!
//! # At a glance
//!
//! | call | does |
//! |---|---|
//! | [`Pool::new`]`(`[`Config`]`)` | start a pool (`Config::from_url("postgres://…")`, HikariCP's knobs) |
//! | [`Pool::get`] | a [`PooledConnection`] (derefs to [`Connection`]), returned on drop |
//! | [`Connection::query`], [`query_one`](Connection::query_one), [`query_opt`](Connection::query_opt), [`execute`](Connection::execute) | extended protocol, typed parameters (`&[&(dyn ToSql + Sync)]`) and rows ([`Row::get`]) |
//! | [`Connection::prepare`] | a reusable [`Statement`] |
//! | [`Connection::batch_execute`], [`simple_query`](Connection::simple_query) | simple protocol |
//! | [`Connection::transaction`] | a [`Transaction`]: `commit()`, rollback on drop, savepoints |
//! | [`Error::code`] | the SQLSTATE of a server error ([`SqlState`]) |
//! | [`Pool::metrics`] | total / active / idle / pending, acquire, usage and creation timings, timeouts |
//!
//! Every call works on a virtual thread (it parks; the carrier runs other
//! virtual threads) and on a plain OS thread (it blocks that thread), so
//! the same handler runs in "platform" and "virtual" mode.
//!
//! # Driver
//!
//! The wire protocol, authentication (SCRAM-SHA-256 and MD5), types and
//! statements are `tokio-postgres`'s, with its default features off: no
//! Tokio runtime, no Tokio sockets, no Tokio timers. The connection is
//! opened with `connect_raw` over a weft [`TcpStream`](weft::net::TcpStream)
//! or [`UnixStream`](weft::net::UnixStream), whose `tokio::io` traits are
//! driven by weft's own poller. The thread that makes a call polls both the
//! call's future and the connection's I/O future (each with its own waker,
//! so only what was woken is polled), parking in between; there is no
//! per-connection driver thread. The connection handshake is polled inside
//! [`weft::blocking`], because SCRAM's key derivation is milliseconds of
//! CPU.
//!
//! Chosen by measurement (`cargo bench -p weft-pg --bench pg -- driver`,
//! `SELECT 1` from 64 virtual threads over 16 connections, 2-core machine;
//! table in `README-section.md` beside this crate): polling inline ties
//! with a driver thread per connection on throughput and has the lower
//! single-query latency; a minimal synchronous client on
//! `postgres-protocol` spent ~15–20% less client CPU per query, but would
//! have had to re-implement everything `tokio-postgres` already does well
//! (types, statements, error fields, notices, authentication variants).
//!
//! # Pool
//!
//! HikariCP's behaviour under HikariCP's names ([`Config`]):
//! `max_size` (10), `min_idle` (= `max_size`), `connection_timeout`
//! (30 s; the error says how many connections are in use and how many
//! threads wait), `idle_timeout` (10 min), `max_lifetime` (30 min, minus up
//! to 2.5% variance), validation of a connection idle for longer than
//! `alive_bypass_window` (500 ms) before it is handed out,
//! `leak_detection_threshold` (off; logs one warning naming the holder's
//! thread and the file and line of its `get()`), `connection_init_sql`,
//! `connection_test_query`. Waiters are served strictly FIFO and park on
//! `weft::sync` primitives; a broken connection is closed, never
//! returned. See [`Pool`] for the details.
//!
//! # Interrupts
//!
//! [`weft::Thread::interrupt`] ends a thread's wait for a pooled
//! connection ([`Error::Interrupted`]) and cancels its running query on
//! the server (the connection stays usable). Commit, rollback and
//! validation are not interruptible.
//!
//! # Limits
//!
//! - TLS: `sslmode` (`disable`, `prefer`, `require`, `verify-ca`,
//!   `verify-full`) and `sslrootcert` as in libpq, through rustls; see
//!   [`tls`]. No client certificates (`sslcert`/`sslkey`), no
//!   `sslmode=allow`, no SCRAM channel binding.
//! - No `COPY`, no `LISTEN`/`NOTIFY` delivery, no portals: the connection
//!   is only read while a call runs.
//! - A transaction opened with a raw `BEGIN` (rather than
//!   [`Connection::transaction`]) and not ended goes back to the pool
//!   still open; use [`Transaction`], which rolls back on drop.
//! - `std::thread_local!` caveats of weft apply to callers as usual; this
//!   crate keeps no thread-local state.

#![warn(missing_docs)]

mod config;
mod conn;
mod drive;
mod error;
mod metrics;
mod pool;
pub mod tls;
mod transaction;

pub use config::Config;
pub use conn::Connection;
pub use error::{Error, PoolTimeout, Result, ServerDown};
pub use metrics::{Metrics, Timing};
pub use pool::{Pool, PooledConnection};
pub use tls::{SslMode, TlsOptions};
pub use transaction::Transaction;

pub use tokio_postgres::error::{DbError, SqlState};
pub use tokio_postgres::{
    Config as PgConfig, Row, SimpleQueryMessage, SimpleQueryRow, Statement, ToStatement, types,
};
