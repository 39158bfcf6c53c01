//! A JSON CRUD service on PostgreSQL — bookmarks — with nothing but
//! weft-http and weft-pg: no error type, adapter or JSON helper of its own.
//!
//! ```text
//! WEFT_PG_URL=postgres://user:password@localhost/db cargo run --release -p weft-http --example bookmarks
//! WEFT_HTTP_MODE=platform …   # the same service on a pool of OS threads
//! curl -s localhost:8080/bookmarks -H 'content-type: application/json' \
//!      -d '{"url": "https://x.com/?a=1&b=2", "title": "x"}'
//! curl -s 'localhost:8080/bookmarks?limit=10'
//! ```
//!
//! With `LINKCHECK_URL` set, `GET /bookmarks/:id/check` asks that upstream
//! about the stored URL (`?url=…`, encoded by the client's query builder).
//! SIGINT/SIGTERM drain in-flight requests, then the process exits 0.
//!
//! The first hand-written version of such a service needed ~60 lines of
//! its own helpers (an error type, its adapter to `Response`, JSON in and
//! out) before the first handler; this one needs none: handlers return
//! `Result<_, HttpError>` and use `?`, bodies are [`Json`], the pool is
//! router state, and every error — bad JSON, a bad id, 404, 405, a
//! database failure (`503` when the pool has no connection in time, with
//! feature `pg`) — is answered in JSON by one line, `on_error`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use weft_http::{Client, HttpError, Json, Request, Router, Server, ServerConfig, ThreadMode};
use weft_pg::{Config, Pool, Row};

type Result<T> = std::result::Result<T, HttpError>;

#[derive(Serialize)]
struct Bookmark {
    id: i64,
    url: String,
    title: String,
}

impl From<Row> for Bookmark {
    fn from(row: Row) -> Bookmark {
        Bookmark {
            id: row.get(0),
            url: row.get(1),
            title: row.get(2),
        }
    }
}

#[derive(Deserialize)]
struct NewBookmark {
    url: String,
    title: String,
}

#[derive(Deserialize)]
struct Page {
    limit: Option<u32>,
}

/// The upstream link checker, if configured.
struct LinkCheck(Option<String>);

fn list(req: &mut Request<'_>) -> Result<Json<Vec<Bookmark>>> {
    let limit = i64::from(req.query_as::<Page>()?.limit.unwrap_or(50));
    let sql = "SELECT id, url, title FROM bookmarks ORDER BY id LIMIT $1";
    let rows = req.state::<Pool>().get()?.query(sql, &[&limit])?;
    Ok(Json(rows.into_iter().map(Bookmark::from).collect()))
}

fn create(req: &mut Request<'_>) -> Result<(u16, Json<Bookmark>)> {
    let new: NewBookmark = req.json()?;
    let row = req.state::<Pool>().get()?.query_one(
        "INSERT INTO bookmarks (url, title) VALUES ($1, $2) RETURNING id, url, title",
        &[&new.url, &new.title],
    )?;
    Ok((201, Json(row.into())))
}

fn find(req: &mut Request<'_>) -> Result<Json<Bookmark>> {
    let id: i64 = req.param_as("id")?;
    let sql = "SELECT id, url, title FROM bookmarks WHERE id = $1";
    let row = req.state::<Pool>().get()?.query_opt(sql, &[&id])?;
    let row = row.ok_or_else(|| HttpError::not_found(format!("no bookmark {id}")))?;
    Ok(Json(row.into()))
}

fn update(req: &mut Request<'_>) -> Result<Json<Bookmark>> {
    let id: i64 = req.param_as("id")?;
    let new: NewBookmark = req.json()?;
    let sql = "UPDATE bookmarks SET url = $2, title = $3 WHERE id = $1 RETURNING id, url, title";
    let row = req
        .state::<Pool>()
        .get()?
        .query_opt(sql, &[&id, &new.url, &new.title])?;
    let row = row.ok_or_else(|| HttpError::not_found(format!("no bookmark {id}")))?;
    Ok(Json(row.into()))
}

fn delete(req: &mut Request<'_>) -> Result<(u16, ())> {
    let id: i64 = req.param_as("id")?;
    let n = req
        .state::<Pool>()
        .get()?
        .execute("DELETE FROM bookmarks WHERE id = $1", &[&id])?;
    if n == 0 {
        return Err(HttpError::not_found(format!("no bookmark {id}")));
    }
    Ok((204, ()))
}

fn check(req: &mut Request<'_>) -> Result<Json<serde_json::Value>> {
    let link_check = req.state::<LinkCheck>();
    let upstream = link_check.0.as_deref();
    let upstream =
        upstream.ok_or_else(|| HttpError::service_unavailable("LINKCHECK_URL is not set"))?;
    let Json(bookmark) = find(req)?;
    // A failed call is a 502 (a 504 if it timed out), its cause kept.
    let resp = req
        .state::<Client>()
        .get(upstream)
        .query(&[("url", &bookmark.url)])
        .send()?;
    if resp.status() != 200 {
        return Err(HttpError::bad_gateway("link checker failed"));
    }
    Ok(Json(resp.json()?))
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let Some(url) = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("WEFT_PG_URL").ok())
    else {
        eprintln!("bookmarks: set WEFT_PG_URL=postgres://user:password@host/db (or pass it)");
        std::process::exit(2);
    };
    // The one setting: virtual threads (default) or `platform[:N]` OS threads.
    let mode: ThreadMode = std::env::var("WEFT_HTTP_MODE")
        .as_deref()
        .unwrap_or("virtual")
        .parse()?;
    let pool = Pool::new(Config::from_url(&url)?.max_size(16))?;
    pool.get()?.batch_execute(
        "CREATE TABLE IF NOT EXISTS bookmarks (id BIGSERIAL PRIMARY KEY, url TEXT NOT NULL, title TEXT NOT NULL)",
    )?;
    let app = Router::with_state(pool)
        .state(Client::new())
        .state(LinkCheck(std::env::var("LINKCHECK_URL").ok()))
        .get("/bookmarks", list)
        .post("/bookmarks", create)
        .get("/bookmarks/:id", find)
        .put("/bookmarks/:id", update)
        .delete("/bookmarks/:id", delete)
        .get("/bookmarks/:id/check", check)
        .on_error(HttpError::json_response);
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let server = Server::bind(addr, ServerConfig::default().thread_mode(mode))?.serve(app)?;
    eprintln!(
        "bookmarks on http://{} ({mode} threads)",
        server.local_addr()
    );
    let report = server.serve_until_signal(Duration::from_secs(10))?;
    eprintln!("stopped: {report:?}");
    if !report.drained {
        std::process::exit(1);
    }
    Ok(())
}
