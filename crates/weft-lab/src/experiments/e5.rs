//! E5 — a long database query, `SELECT pg_sleep(0.5)`, through a weft-pg
//! pool of 100 connections, 50 users: a platform pool of 4 OS threads is
//! the limit (Little: 4 / 0.5 s = 8 req/s; article 6–7 req/s with Tomcat
//! and MySQL) vs virtual threads, limited only by the users (50 / 0.5 s =
//! 100 req/s; article 11–12 req/s).
//!
//! Needs PostgreSQL (see [`crate::pg`]); without one the experiment is
//! skipped with instructions.

use std::time::Duration;

#[cfg(feature = "pg")]
use weft_http::{Response, Router, ThreadMode};

use super::common::Options;
#[cfg(feature = "pg")]
use super::common::{Serve, measure_http, window_load};
use crate::progress::Progress;
#[cfg(feature = "pg")]
use crate::report::Mode;
use crate::report::Row;

/// Concurrent users.
pub const USERS: usize = 50;
/// Platform pool size.
pub const THREADS: usize = 4;
/// Connections in the database pool.
pub const DB_POOL: usize = 100;
/// The query's duration.
pub const QUERY: Duration = Duration::from_millis(500);

#[cfg(feature = "pg")]
/// `/query` runs `SELECT pg_sleep(0.5)` on a pooled connection.
pub fn router(pool: weft_pg::Pool) -> Router {
    Router::new().get("/query", move |_req| {
        match pool
            .get()
            .and_then(|mut c| c.execute("SELECT pg_sleep(0.5)", &[]))
        {
            Ok(_) => Response::text("ok"),
            Err(_) => Response::error(500),
        }
    })
}

/// Runs E5; `Err` says why it was skipped.
#[cfg(not(feature = "pg"))]
pub fn run(_options: &Options, progress: &Progress) -> Result<Vec<Row>, String> {
    progress.start("looking for PostgreSQL");
    let e = crate::pg::url().err().unwrap_or_default();
    Err(format!("{e}. To run it: {}", crate::pg::HOW_TO))
}

/// Runs E5; `Err` says why it was skipped.
#[cfg(feature = "pg")]
pub fn run(options: &Options, progress: &Progress) -> Result<Vec<Row>, String> {
    progress.start("looking for PostgreSQL");
    let url = crate::pg::url().map_err(|e| format!("{e}. To run it: {}", crate::pg::HOW_TO))?;
    let mut rows = Vec::new();
    for mode in [Mode::Platform, Mode::Virtual] {
        let (label, thread_mode, ideal, article) = match mode {
            Mode::Platform => (
                format!("platform, {THREADS} OS threads"),
                ThreadMode::Platform { threads: THREADS },
                THREADS as f64 / QUERY.as_secs_f64(),
                "6-7 req/s",
            ),
            Mode::Virtual => (
                "virtual".to_string(),
                ThreadMode::Virtual,
                USERS as f64 / QUERY.as_secs_f64(),
                "11-12 req/s",
            ),
        };
        progress.start(&label);
        let row = Row::new("E5", mode, label.clone())
            .short(label)
            .ideal(ideal, QUERY.as_secs_f64() * 1e3)
            .article(article);
        let pool = weft_pg::Config::from_url(&url).map(|c| {
            c.max_size(DB_POOL)
                .min_idle(0)
                .connection_timeout(Duration::from_secs(60))
        });
        let pool = match pool.and_then(weft_pg::Pool::new) {
            Ok(p) => p,
            Err(e) => {
                rows.push(row.failed(format!("database pool: {e}")));
                progress.step();
                continue;
            }
        };
        let serve = Serve {
            mode: thread_mode,
            runtime: None,
            router: router(pool.clone()),
        };
        rows.push(measure_http(
            serve,
            window_load(options, "/query", USERS),
            QUERY + Duration::from_millis(1000),
            row,
        ));
        pool.close();
        progress.step();
    }
    Ok(rows)
}
