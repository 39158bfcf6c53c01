//! E6 — external calls: each request calls a downstream service twice
//! (`/delay?ms=100`, served by the lab on a second weft-http server) with
//! the blocking `weft_http::Client`, then writes a row to the database
//! (PostgreSQL through weft-pg when available, else an in-memory store
//! behind `weft::sync::Mutex`, said in the output). 500 clients; the
//! article sent 1,000 requests each, the lab by default 20 (`--quick`: 4,
//! `--big`: the full 1,000).
//!
//! Platform: Tomcat's 200 OS threads. Article: platform avg 512 ms (max
//! 631), virtual avg 320 ms (max 409). Little's law: a request needs
//! 200 ms + the write, so platform tops out at 200 / 0.2 s = 1,000 req/s
//! (and then 500 users wait 500 ms each), virtual at 500 / 0.2 s =
//! 2,500 req/s with 200 ms each.

use std::sync::Arc;
use std::time::Duration;

use weft_http::{Client, ClientConfig, Response, Router, Server, ServerConfig, ThreadMode};

use super::common::order::{CALL, THREADS, USERS};
use super::common::{Options, Serve, downstream, measure_http};
use crate::load::LoadSpec;
use crate::progress::Progress;
use crate::report::{Mode, Row};

/// Database pool size.
pub const DB_POOL: usize = 100;

/// Where handlers save their row.
#[derive(Clone)]
pub enum Store {
    /// PostgreSQL through weft-pg.
    #[cfg(feature = "pg")]
    Pg(weft_pg::Pool),
    /// A vector behind `weft::sync::Mutex` (no database available).
    Memory(Arc<weft::sync::Mutex<Vec<u64>>>),
}

impl Store {
    fn save(&self, n: u64) -> Result<(), String> {
        match self {
            #[cfg(feature = "pg")]
            Store::Pg(pool) => pool
                .get()
                .and_then(|mut c| {
                    c.execute("INSERT INTO weft_lab_e6 (n) VALUES ($1)", &[&(n as i64)])
                })
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Store::Memory(v) => {
                v.lock().map_err(|e| e.to_string())?.push(n);
                Ok(())
            }
        }
    }
}

/// The service under test: two downstream calls, then a write.
pub fn router(base: String, store: Store) -> Router {
    let client = Client::with_config(ClientConfig {
        max_idle_per_host: 4096,
        ..ClientConfig::default()
    });
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let url = format!("{base}/delay?ms={}", CALL.as_millis());
    Router::new().get("/order", move |_req| {
        for _ in 0..2 {
            match client.get(&url).send().and_then(|r| r.discard()) {
                Ok(_) => {}
                Err(_) => return Response::error(502),
            }
        }
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match store.save(n) {
            Ok(()) => Response::text("saved"),
            Err(_) => Response::error(500),
        }
    })
}

fn open_store() -> (Store, String) {
    #[cfg(not(feature = "pg"))]
    let pg: Result<std::convert::Infallible, String> =
        crate::pg::url().map(|_| unreachable!("pg::url fails without the pg feature"));
    #[cfg(feature = "pg")]
    let pg = crate::pg::url().and_then(|url| {
        let pool = weft_pg::Config::from_url(&url)
            .map(|c| {
                c.max_size(DB_POOL)
                    .min_idle(0)
                    .connection_timeout(Duration::from_secs(60))
            })
            .and_then(weft_pg::Pool::new)
            .map_err(|e| e.to_string())?;
        pool.get()
            .and_then(|mut c| {
                c.batch_execute(
                    "CREATE TABLE IF NOT EXISTS weft_lab_e6 (id bigserial PRIMARY KEY, n bigint, \
                     at timestamptz DEFAULT now())",
                )
            })
            .map_err(|e| e.to_string())?;
        Ok(pool)
    });
    match pg {
        #[cfg(feature = "pg")]
        Ok(pool) => (
            Store::Pg(pool),
            "writes: INSERT into PostgreSQL via weft-pg (pool of 100)".to_string(),
        ),
        Err(e) => (
            Store::Memory(Arc::new(weft::sync::Mutex::new(Vec::new()))),
            format!(
                "no PostgreSQL ({e}); writes go to an in-memory Vec behind weft::sync::Mutex. {}",
                crate::pg::HOW_TO
            ),
        ),
    }
}

/// Runs E6.
pub fn run(options: &Options, progress: &Progress) -> Vec<Row> {
    progress.start("starting the downstream service");
    let per_user: u64 = if options.big {
        1000
    } else if options.quick {
        4
    } else {
        20
    };
    let down = match Server::bind("127.0.0.1:0", ServerConfig::default())
        .and_then(|s| s.serve(downstream()))
    {
        Ok(s) => s,
        Err(e) => {
            return vec![
                Row::new("E6", Mode::Platform, "platform").failed(format!("downstream: {e}")),
            ];
        }
    };
    let base = format!("http://{}", down.local_addr());
    let (store, store_note) = open_store();
    let scale = if per_user == 1000 {
        "full size: 500 clients x 1,000 requests".to_string()
    } else {
        format!(
            "scaled down to 500 clients x {per_user} requests (article: x 1,000; --big runs it)"
        )
    };
    let mut rows = Vec::new();
    for mode in [Mode::Platform, Mode::Virtual] {
        let (label, thread_mode, ideal, article) = match mode {
            Mode::Platform => (
                format!("platform, {THREADS} OS threads"),
                ThreadMode::Platform { threads: THREADS },
                THREADS as f64 / 0.2,
                "avg 512 ms (max 631)",
            ),
            Mode::Virtual => (
                "virtual".to_string(),
                ThreadMode::Virtual,
                USERS as f64 / 0.2,
                "avg 320 ms (max 409)",
            ),
        };
        progress.start(&label);
        let row = Row::new("E6", mode, label.clone())
            .short(label)
            .ideal(ideal, 2.0 * CALL.as_secs_f64() * 1e3)
            .article(article)
            .note(scale.clone())
            .note(store_note.clone());
        let serve = Serve {
            mode: thread_mode,
            runtime: None,
            router: router(base.clone(), store.clone()),
        };
        let load = LoadSpec {
            url: "/order".to_string(),
            users: USERS,
            warmup: Duration::ZERO,
            window: None,
            per_user,
            timeout: Duration::from_secs(60),
        };
        rows.push(measure_http(serve, load, Duration::ZERO, row));
        progress.step();
    }
    down.shutdown(Duration::from_secs(2));
    #[cfg(feature = "pg")]
    if let Store::Pg(pool) = store {
        pool.close();
    }
    rows
}
