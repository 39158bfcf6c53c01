//! Answers without a mapper or a hand-built error: `Option` as a `404`
//! (returned as is, or with `or_not_found`'s message), `Redirect`, and an
//! error that keeps the status `?` gives it with the call site's message
//! (`message_on`) — for weft-pg's `409` too, against a real server when
//! one is available (as weft-pg's tests find one).

#![cfg(feature = "json")]

#[path = "../../weft-pg/tests/common/mod.rs"]
mod pg;

use serde_json::Value;
use weft_http::{Client, HttpError, OptionExt, Redirect, Request, ResultExt, Router, ServerHandle};

fn serve(router: Router) -> (ServerHandle, String) {
    let server =
        weft_http::serve("127.0.0.1:0", router.on_error(HttpError::json_response)).expect("serve");
    let base = format!("http://{}", server.local_addr());
    (server, base)
}

/// Status and the JSON error message (`None` for a body that is not an
/// error).
fn get(c: &Client, url: &str) -> (u16, Option<String>) {
    let r = c.get(url).send().expect("request");
    let status = r.status();
    let error = r
        .json::<Value>()
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned));
    (status, error)
}

fn find(code: &str) -> Option<String> {
    (code == "rs").then(|| "https://www.rust-lang.org/".to_owned())
}

#[test]
fn a_missing_value_is_a_404_through_the_error_hook() {
    let router = Router::new()
        .get("/plain/:code", |req| {
            find(req.param("code").unwrap_or("")).map(weft_http::Json)
        })
        .get("/worded/:code", |req| -> Result<String, HttpError> {
            let code = req.param("code").unwrap_or("");
            find(code).or_not_found(format!("no link {code}"))
        });
    let (_server, base) = serve(router);
    let c = Client::new();
    let r = c.get(&format!("{base}/plain/rs")).send().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<String>().unwrap(), "https://www.rust-lang.org/");
    // Rendered by the hook (JSON), with the reason phrase or our words.
    assert_eq!(
        get(&c, &format!("{base}/plain/go")),
        (404, Some("Not Found".to_owned()))
    );
    assert_eq!(
        get(&c, &format!("{base}/worded/go")),
        (404, Some("no link go".to_owned()))
    );
}

#[test]
fn redirects_carry_their_status_and_location() {
    let router = Router::new()
        .get("/to", |_req| Redirect::to("/next"))
        .get("/temporary", |_req| Redirect::temporary("/next?x=1"))
        .get("/permanent", |_req| {
            Redirect::permanent("https://example.com/")
        })
        .get("/found/:code", |req| {
            find(req.param("code").unwrap_or("")).map(Redirect::found)
        })
        .get("/bad", |_req| Redirect::to("/next\r\nSet-Cookie: stolen=1"));
    let (_server, base) = serve(router);
    let c = Client::new();
    for (path, status, location) in [
        ("/to", 303, "/next"),
        ("/temporary", 307, "/next?x=1"),
        ("/permanent", 308, "https://example.com/"),
        ("/found/rs", 302, "https://www.rust-lang.org/"),
    ] {
        let r = c.get(&format!("{base}{path}")).send().unwrap();
        assert_eq!(
            (r.status(), r.header("location")),
            (status, Some(location)),
            "{path}"
        );
    }
    assert_eq!(get(&c, &format!("{base}/found/go")).0, 404);
    // A location no header can carry: a 500, and no header at all.
    let r = c.get(&format!("{base}/bad")).send().unwrap();
    assert_eq!((r.status(), r.header("location")), (500, None));
    assert_eq!(r.header("set-cookie"), None);
}

#[derive(Debug)]
struct Taken;
impl std::fmt::Display for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("taken")
    }
}
impl std::error::Error for Taken {}

#[test]
fn message_on_words_only_its_status_and_wins_over_a_mapper() {
    let router = Router::new()
        .get("/io", |_req| -> Result<(), HttpError> {
            Err(std::io::Error::other("disk on fire")).message_on(500, "storage is failing")
        })
        .get("/other-status", |_req| -> Result<(), HttpError> {
            Err(std::io::Error::other("disk on fire")).message_on(409, "never shown")
        })
        .get("/mapped", |_req| -> Result<(), HttpError> {
            // The mapper below would make it a 422; the call site decided.
            Err(Taken).message_on(500, "worded at the call site")
        })
        .map_error(|_: &Taken| Some(HttpError::unprocessable("from the mapper")));
    let (_server, base) = serve(router);
    let c = Client::new();
    assert_eq!(
        get(&c, &format!("{base}/io")),
        (500, Some("storage is failing".to_owned()))
    );
    assert_eq!(
        get(&c, &format!("{base}/other-status")),
        (500, Some("Internal Server Error".to_owned()))
    );
    assert_eq!(
        get(&c, &format!("{base}/mapped")),
        (500, Some("worded at the call site".to_owned()))
    );
}

#[test]
fn a_unique_violation_is_a_409_with_the_call_sites_message() {
    let Some(pg) = pg::server() else { return };
    // One connection: the temporary table lives in its session.
    let pool = weft_pg::Pool::new(pg.config("weft-http-answers").max_size(1)).unwrap();
    let router = Router::with_state(pool).post("/t/:k", |req: &mut Request<'_>| {
        let k = req.param("k").unwrap_or("").to_owned();
        let mut db = req.state::<weft_pg::Pool>().get()?;
        db.batch_execute("CREATE TEMP TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY)")?;
        db.execute("INSERT INTO t (k) VALUES ($1)", &[&k])
            .message_on(409, format!("key {k} is taken"))?;
        Ok::<_, HttpError>((201, k))
    });
    let (_server, base) = serve(router);
    let c = Client::new();
    let r = c.post(&format!("{base}/t/a")).send().unwrap();
    assert_eq!(r.status(), 201);
    let r = c.post(&format!("{base}/t/a")).send().unwrap();
    assert_eq!(r.status(), 409);
    assert_eq!(r.json::<Value>().unwrap()["error"], "key a is taken");
}
