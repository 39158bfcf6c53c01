//! The `shortener` example, one test per mapped status: `409` (unique and
//! foreign-key violations), `503` with `Retry-After` (pool timeout), `503`
//! (connection lost), `500` (any other database error), `502` and `504`
//! (the upstream), `422` (the example's own `map_error`).
//!
//! The tests that need PostgreSQL find or start one as weft-pg's tests do
//! (`WEFT_PG_URL`, else `crates/weft-pg/scripts/pg-test-cluster.sh`, else
//! a loud skip — a failure under `CI=true`); each works in a schema of its
//! own. The upstream and pool-timeout tests need no database.

#![cfg(feature = "json")]

#[path = "../examples/shortener.rs"]
mod shortener;

#[path = "../../weft-pg/tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use shortener::{Checker, SCHEMA, app};
use weft_http::{Client, ClientConfig, HttpError, Request, Response, Router, ServerHandle};
use weft_pg::{Config, Pool};

/// What the error hook saw: status, route, activity and cause.
type Log = Arc<Mutex<Vec<(u16, Option<String>, Option<String>, String)>>>;

/// The example's app, with `extra` routes merged in, behind a hook that
/// writes down what it saw and then answers as the example does.
fn serve(pool: Pool, checker: Checker, extra: Router) -> (ServerHandle, String, Log) {
    let log = Log::default();
    let l = log.clone();
    let router = app(pool, checker)
        .merge(extra)
        .on_error(move |e: &HttpError| {
            let r = e.request();
            l.lock().unwrap().push((
                e.status(),
                r.and_then(|r| r.route().map(str::to_owned)),
                r.map(|r| r.activity().to_owned()),
                e.to_string(),
            ));
            e.json_response()
        });
    let server = weft_http::serve("127.0.0.1:0", router).unwrap();
    let base = format!("http://{}", server.local_addr());
    (server, base, log)
}

fn no_checker() -> Checker {
    Checker {
        url: None,
        client: Client::new(),
    }
}

/// A pool on a schema of its own (dropped by [`Db::drop`]).
struct Db {
    pool: Pool,
    schema: String,
    url: String,
}

fn db(name: &str, max_size: usize) -> Option<Db> {
    let pg = common::server()?;
    static N: AtomicU64 = AtomicU64::new(0);
    let schema = format!(
        "shortener_{name}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let mut admin = pg.connect();
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .unwrap();
    admin.close();
    let config = pg
        .config(&schema)
        .max_size(max_size)
        .connection_timeout(Duration::from_millis(300))
        .connection_init_sql(format!("SET search_path TO {schema}"));
    let pool = Pool::new(config).unwrap();
    pool.get().unwrap().batch_execute(SCHEMA).unwrap();
    Some(Db {
        pool,
        schema,
        url: pg.url.clone(),
    })
}

impl Drop for Db {
    fn drop(&mut self) {
        self.pool.close();
        if let Ok(mut c) = weft_pg::Connection::connect_url(&self.url) {
            let _ = c.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema));
            c.close();
        }
    }
}

fn post_link(c: &Client, base: &str, code: &str, url: &str) -> (u16, Value) {
    let r = c
        .post(&format!("{base}/links"))
        .json(&json!({"code": code, "url": url}))
        .send()
        .unwrap();
    (r.status(), r.json().unwrap())
}

#[test]
fn a_taken_code_is_409() {
    let Some(db) = db("unique", 4) else { return };
    let (_server, base, log) = serve(db.pool.clone(), no_checker(), Router::new());
    let c = Client::new();
    let (s, v) = post_link(&c, &base, "rs", "https://rust-lang.org");
    assert_eq!((s, &v["code"]), (201, &json!("rs")), "{v}");
    let (s, v) = post_link(&c, &base, "rs", "https://example.com");
    assert_eq!((s, &v["error"]), (409, &json!("code rs is taken")), "{v}");
    let seen = log.lock().unwrap().pop().unwrap();
    assert_eq!(seen.1.as_deref(), Some("/links"));
    assert_eq!(seen.2.as_deref(), Some("storing rs"));
    assert!(seen.3.contains("SQLSTATE 23505"), "{}", seen.3);
}

#[test]
fn deleting_a_link_with_clicks_is_409() {
    let Some(db) = db("fk", 4) else { return };
    let (_server, base, log) = serve(db.pool.clone(), no_checker(), Router::new());
    let c = Client::new();
    assert_eq!(post_link(&c, &base, "x", "https://x.org").0, 201);
    let r = c.get(&format!("{base}/x")).send().unwrap();
    assert_eq!(
        (r.status(), r.header("location")),
        (302, Some("https://x.org"))
    );
    let r = c.get(&format!("{base}/admin/links/x")).send().unwrap();
    assert_eq!(r.json::<Value>().unwrap()["clicks"], 1);
    let r = c.delete(&format!("{base}/admin/links/x")).send().unwrap();
    assert_eq!(r.status(), 409);
    let seen = log.lock().unwrap().pop().unwrap();
    assert_eq!(seen.1.as_deref(), Some("/admin/links/:code"));
    assert!(seen.3.contains("SQLSTATE 23503"), "{}", seen.3);
    // Without clicks it goes.
    assert_eq!(post_link(&c, &base, "y", "https://y.org").0, 201);
    let r = c.delete(&format!("{base}/admin/links/y")).send().unwrap();
    assert_eq!(r.status(), 204);
}

#[test]
fn an_exhausted_pool_is_503_with_retry_after() {
    let Some(db) = db("exhausted", 1) else { return };
    let (_server, base, log) = serve(db.pool.clone(), no_checker(), Router::new());
    let held = db.pool.get().unwrap(); // the only connection
    let r = Client::new()
        .get(&format!("{base}/admin/links/x"))
        .send()
        .unwrap();
    assert_eq!((r.status(), r.header("retry-after")), (503, Some("1")));
    assert_eq!(r.json::<Value>().unwrap()["error"], "Service Unavailable");
    let seen = log.lock().unwrap().pop().unwrap();
    assert!(seen.3.contains("connection is not available"), "{}", seen.3);
    drop(held);
    let r = Client::new()
        .get(&format!("{base}/admin/links/x"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[test]
fn a_pool_that_cannot_connect_is_503_with_retry_after_without_a_database() {
    // Nothing listens on port 1; the pool starts empty.
    let config = Config::from_url("postgres://app@127.0.0.1:1/app")
        .unwrap()
        .fail_fast(false)
        .min_idle(0)
        .connection_timeout(Duration::from_millis(200));
    let pool = Pool::new(config).unwrap();
    let (_server, base, log) = serve(pool, no_checker(), Router::new());
    let r = Client::new().get(&format!("{base}/rs")).send().unwrap();
    assert_eq!((r.status(), r.header("retry-after")), (503, Some("1")));
    let seen = log.lock().unwrap().pop().unwrap();
    assert_eq!(seen.1.as_deref(), Some("/:code"));
}

#[test]
fn a_lost_connection_is_503() {
    let Some(db) = db("lost", 2) else { return };
    let app_name = db.schema.clone();
    let sleep = Router::new().get(
        "/test/sleep",
        |req: &mut Request<'_>| -> Result<(), HttpError> {
            req.state::<Pool>()
                .get()?
                .batch_execute("SELECT pg_sleep(60)")?;
            Ok(())
        },
    );
    let (_server, base, log) = serve(db.pool.clone(), no_checker(), sleep);
    let url = format!("{base}/test/sleep");
    let client = std::thread::spawn(move || Client::new().get(&url).send().unwrap().status());
    // Wait for the query to run, then end its session from the server side.
    let mut admin = common::server().unwrap().connect();
    let find = "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'SELECT pg_sleep%'";
    common::wait_until(Duration::from_secs(20), "pg_sleep running", || {
        !admin.query(find, &[&app_name]).unwrap().is_empty()
    });
    let pid: i32 = admin.query_one(find, &[&app_name]).unwrap().get(0);
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap();
    admin.close();
    assert_eq!(client.join().unwrap(), 503);
    let seen = log.lock().unwrap().pop().unwrap();
    assert_eq!((seen.0, seen.1.as_deref()), (503, Some("/test/sleep")));
}

#[test]
fn any_other_database_error_is_500_with_its_cause_for_the_hook_only() {
    let Some(db) = db("other", 2) else { return };
    let bad = Router::new().get(
        "/test/bad-sql",
        |req: &mut Request<'_>| -> Result<(), HttpError> {
            req.state::<Pool>().get()?.batch_execute("SELEC 1")?;
            Ok(())
        },
    );
    let (_server, base, log) = serve(db.pool.clone(), no_checker(), bad);
    let r = Client::new()
        .get(&format!("{base}/test/bad-sql"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 500);
    let body = r.text().unwrap();
    assert!(!body.contains("SELEC"), "{body}");
    let seen = log.lock().unwrap().pop().unwrap();
    assert_eq!(seen.1.as_deref(), Some("/test/bad-sql"));
    assert!(seen.3.contains("SQLSTATE 42601"), "{}", seen.3);
}

/// A link checker: `safe` unless the URL contains `evil`; `/broken`
/// answers `500`, `/stuck` never answers (until the test ends).
fn checker_upstream() -> (ServerHandle, String, weft::channel::Sender<()>) {
    let (release, stuck) = weft::channel::bounded::<()>(1);
    let router = Router::new()
        .get("/check", |req| {
            let url = req.query_param("url").unwrap_or_default().into_owned();
            Response::json(format!("{{\"safe\": {}}}", !url.contains("evil")))
        })
        .get("/broken", |_req| Response::error(500))
        .get("/stuck", move |_req| {
            let _ = stuck.recv();
            "late"
        });
    let server = weft_http::serve("127.0.0.1:0", router).unwrap();
    let base = format!("http://{}", server.local_addr());
    (server, base, release)
}

/// The upstream's answers, one per status, with no database: the checks
/// come before the first query (the pool never connects).
#[test]
fn upstream_failures_are_502_504_and_an_unsafe_url_422() {
    let (_upstream, up, release) = checker_upstream();
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/check", l.local_addr().unwrap())
    };
    let pool = Pool::new(
        Config::from_url("postgres://app@127.0.0.1:1/app")
            .unwrap()
            .fail_fast(false)
            .min_idle(0)
            .connection_timeout(Duration::from_millis(200)),
    )
    .unwrap();
    let c = Client::new();
    let cases = [
        (
            format!("{up}/check"),
            "https://evil.example",
            422,
            "unsafe URL: https://evil.example",
        ),
        (
            format!("{up}/broken"),
            "https://x.org",
            502,
            "link checker failed",
        ),
        (refused, "https://x.org", 502, "Bad Gateway"),
        (
            format!("{up}/stuck"),
            "https://x.org",
            504,
            "Gateway Timeout",
        ),
        // Approved: on to the database, which is not there.
        (
            format!("{up}/check"),
            "https://x.org",
            503,
            "Service Unavailable",
        ),
    ];
    for (checker_url, url, status, message) in cases {
        let checker = Checker {
            url: Some(checker_url.clone()),
            client: Client::with_config(ClientConfig {
                read_timeout: Some(Duration::from_millis(200)),
                ..ClientConfig::default()
            }),
        };
        let (_server, base, log) = serve(pool.clone(), checker, Router::new());
        let (s, v) = post_link(&c, &base, "code", url);
        assert_eq!(
            (s, &v["error"]),
            (status, &json!(message)),
            "{checker_url}: {v}"
        );
        let seen = log.lock().unwrap().pop().unwrap();
        if status != 503 {
            assert_eq!(seen.2.as_deref(), Some(&*format!("checking {url}")));
        }
    }
    let _ = release.send(());
}
