//! A URL shortener: a database, an upstream call and a nested admin
//! router, every error answered with its status from one place.
//!
//! ```text
//! WEFT_PG_URL=postgres://user:password@localhost/db cargo run --release -p weft-http --example shortener
//! CHECKER_URL=http://…/check …   # ask this upstream (GET ?url=…, {"safe": bool}) before storing a link
//! curl -s localhost:8080/links -H 'content-type: application/json' -d '{"code": "rs", "url": "https://rust-lang.org"}'
//! curl -si localhost:8080/rs                       # 302 to the URL, one click more
//! curl -s localhost:8080/admin/links/rs            # the link and its clicks
//! curl -s -X DELETE localhost:8080/admin/links/rs  # 409: it has clicks
//! curl -s localhost:8080/admin/debug/threads       # the thread dump
//! ```
//!
//! The handlers use `?` on weft-pg, the HTTP client and their own error
//! type without one `map_err`; the statuses come from weft-http (feature
//! `pg` for weft-pg's errors) and from one [`Router::map_error`]; a call
//! site words the one it knows how to ([`ResultExt::message_on`]):
//!
//! | what failed | answer |
//! |---|---|
//! | a taken code (unique violation) | `409`, "code … is taken" |
//! | deleting a link that has clicks (foreign key) | `409` |
//! | no such link | `404` ([`OptionExt::or_not_found`]) |
//! | no database connection within the pool's timeout, or the database down | `503`, `Retry-After: 1` |
//! | the database connection lost | `503` |
//! | the link checker unreachable, or answering other than `200` | `502` |
//! | the link checker too slow | `504` |
//! | the link checker says the URL is unsafe | `422` (the `map_error` below) |
//! | anything else | `500` |
//!
//! The error hook answers in JSON; the server logs every `5xx` with the
//! method, the route pattern, what the handler was doing and the cause —
//! which the client never sees ([`ServerConfig::error_log`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use weft_http::{
    Client, HttpError, Json, OptionExt, Redirect, Request, ResultExt, Router, Server, ServerConfig,
    ThreadMode,
};
use weft_pg::{Config, Pool};

type Result<T> = std::result::Result<T, HttpError>;

/// The tables, created if missing.
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS links (code TEXT PRIMARY KEY, url TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS clicks (
        id BIGSERIAL PRIMARY KEY,
        code TEXT NOT NULL REFERENCES links (code),
        at TIMESTAMPTZ NOT NULL DEFAULT now()
    );";

#[derive(Deserialize)]
struct NewLink {
    code: String,
    url: String,
}

#[derive(Serialize)]
struct Link {
    code: String,
    url: String,
    clicks: i64,
}

/// The link checker upstream, if any, and the client to call it with.
pub struct Checker {
    /// `GET {url}?url=…` answers `{"safe": true|false}`.
    pub url: Option<String>,
    /// The client (its timeouts are the upstream's budget).
    pub client: Client,
}

/// Why the link checker did not approve a URL: the domain's own error
/// type, answered once by the router's `map_error`.
#[derive(Debug)]
pub enum CheckError {
    /// The checker says the URL is unsafe.
    Unsafe(String),
    /// The checker answered with another status than `200`.
    Status(u16),
    /// The call failed (left to weft-http: `502`, or `504` on a timeout).
    Call(weft_http::Error),
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::Unsafe(url) => write!(f, "unsafe URL: {url}"),
            CheckError::Status(s) => write!(f, "link checker answered {s}"),
            CheckError::Call(e) => write!(f, "link checker: {e}"),
        }
    }
}

impl std::error::Error for CheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckError::Call(e) => Some(e),
            _ => None,
        }
    }
}

impl From<weft_http::Error> for CheckError {
    fn from(e: weft_http::Error) -> CheckError {
        CheckError::Call(e)
    }
}

#[derive(Deserialize)]
struct Verdict {
    safe: bool,
}

fn check(checker: &Checker, url: &str) -> std::result::Result<(), CheckError> {
    let Some(upstream) = &checker.url else {
        return Ok(());
    };
    let resp = checker.client.get(upstream).query(&[("url", url)]).send()?;
    if resp.status() != 200 {
        return Err(CheckError::Status(resp.status()));
    }
    match resp.json::<Verdict>()? {
        Verdict { safe: true } => Ok(()),
        Verdict { safe: false } => Err(CheckError::Unsafe(url.to_owned())),
    }
}

/// `POST /links`: `{"code", "url"}`, checked upstream, then stored.
fn create(req: &mut Request<'_>) -> Result<(u16, Json<Link>)> {
    let new: NewLink = req.json()?;
    req.set_activity(format_args!("checking {}", new.url));
    check(&req.state::<Checker>(), &new.url)?;
    req.set_activity(format_args!("storing {}", new.code));
    req.state::<Pool>()
        .get()?
        .execute(
            "INSERT INTO links (code, url) VALUES ($1, $2)",
            &[&new.code, &new.url],
        )
        .message_on(409, format!("code {} is taken", new.code))?;
    let (code, url) = (new.code, new.url);
    Ok((
        201,
        Json(Link {
            code,
            url,
            clicks: 0,
        }),
    ))
}

/// `GET /:code`: a redirect, counted.
fn follow(req: &mut Request<'_>) -> Result<Redirect> {
    let code = req.param("code").unwrap_or_default().to_owned();
    let mut db = req.state::<Pool>().get()?;
    let row = db.query_opt("SELECT url FROM links WHERE code = $1", &[&code])?;
    let url: String = row.or_not_found(format!("no link {code}"))?.get(0);
    db.execute("INSERT INTO clicks (code) VALUES ($1)", &[&code])?;
    Ok(Redirect::found(url))
}

/// `GET /admin/links/:code`: the link and its clicks.
fn stats(req: &mut Request<'_>) -> Result<Json<Link>> {
    let code = req.param("code").unwrap_or_default().to_owned();
    let row = req.state::<Pool>().get()?.query_opt(
        "SELECT url, (SELECT count(*) FROM clicks c WHERE c.code = l.code) FROM links l WHERE code = $1",
        &[&code],
    )?;
    let row = row.or_not_found(format!("no link {code}"))?;
    let (url, clicks) = (row.get(0), row.get(1));
    Ok(Json(Link { code, url, clicks }))
}

/// `DELETE /admin/links/:code`: `409` while clicks refer to it.
fn remove(req: &mut Request<'_>) -> Result<(u16, ())> {
    let code = req.param("code").unwrap_or_default().to_owned();
    let n = req
        .state::<Pool>()
        .get()?
        .execute("DELETE FROM links WHERE code = $1", &[&code])?;
    if n == 0 {
        return Err(HttpError::not_found(format!("no link {code}")));
    }
    Ok((204, ()))
}

/// The admin routes, written without their `/admin` prefix.
fn admin() -> Router {
    Router::new()
        .get("/links/:code", stats)
        .delete("/links/:code", remove)
        .nest("/debug", weft_http::debug::router())
}

/// The service's routes and error mapping (`main` adds the hook,
/// [`HttpError::json_response`]).
pub fn app(pool: Pool, checker: Checker) -> Router {
    Router::with_state(pool)
        .state(checker)
        .post("/links", create)
        .nest("/admin", admin())
        .get("/:code", follow)
        .map_error(|e: &CheckError| match e {
            CheckError::Unsafe(_) => {
                Some(HttpError::unprocessable(e.to_string()).with_field("url"))
            }
            CheckError::Status(_) => Some(HttpError::bad_gateway("link checker failed")),
            CheckError::Call(_) => None, // weft-http's own answer: 502 or 504
        })
}

#[allow(dead_code)] // the tests include this file for `app`
fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let Some(url) = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("WEFT_PG_URL").ok())
    else {
        eprintln!("shortener: set WEFT_PG_URL=postgres://user:password@host/db (or pass it)");
        std::process::exit(2);
    };
    let mode: ThreadMode = std::env::var("WEFT_HTTP_MODE")
        .as_deref()
        .unwrap_or("virtual")
        .parse()?;
    let pool = Pool::new(
        Config::from_url(&url)?
            .max_size(16)
            .connection_timeout(Duration::from_secs(2)),
    )?;
    pool.get()?.batch_execute(SCHEMA)?;
    let checker = Checker {
        url: std::env::var("CHECKER_URL").ok(),
        client: Client::new(),
    };
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let config = ServerConfig::default().thread_mode(mode);
    let server =
        Server::bind(addr, config)?.serve(app(pool, checker).on_error(HttpError::json_response))?;
    eprintln!(
        "shortener on http://{} ({mode} threads)",
        server.local_addr()
    );
    let report = server.serve_until_signal(Duration::from_secs(10))?;
    eprintln!("stopped: {report:?}");
    if !report.drained {
        std::process::exit(1);
    }
    Ok(())
}
