//! Application-level API: `IntoResponse` handlers with `?`, JSON, state,
//! the error hook for every error answer, typed query strings and the
//! client's query builder.

#![cfg(feature = "json")]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{connect, get, modes, start};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_http::{
    Client, ErrorKind, HttpError, Json, Request, Response, Router, ServerConfig, WhenFull,
};

/// The hook used by the error tests: JSON plus a header that proves the
/// hook rendered the answer.
fn json_hook(e: &HttpError) -> Response {
    e.json_response().with_header("x-hook", "1")
}

fn body_json(r: &common::RawResponse) -> Value {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&r.body)))
}

/// Asserts `r` is a hook-rendered JSON error with `status`.
fn assert_hooked(r: &common::RawResponse, status: u16, what: &str) {
    assert_eq!(r.status, status, "{what}");
    assert_eq!(
        r.header("x-hook"),
        Some("1"),
        "{what}: not rendered by the hook"
    );
    assert_eq!(r.header("content-type"), Some("application/json"), "{what}");
    let v = body_json(r);
    assert_eq!(v["status"], status, "{what}: {v}");
    assert!(
        v["error"].as_str().is_some_and(|s| !s.is_empty()),
        "{what}: {v}"
    );
}

fn error_app() -> Router {
    Router::new()
        .get("/ok", |_req| "ok")
        .get("/panic", |_req| -> Response {
            panic!("handler panic (expected by the test)")
        })
        .post("/read", |req| match req.read_body() {
            Ok(b) => Response::bytes(b),
            // The server replaces this answer with its own 413/408/400.
            Err(_) => Response::text("read failed"),
        })
        .get("/teapot", |_req| Response::error(418))
        .get("/gone", |_req| -> Result<(), HttpError> {
            Err(HttpError::new(410, "moved away").with_header("x-extra", "kept"))
        })
        .get("/slow", |_req| {
            weft::sleep(Duration::from_millis(300)).ok();
            "slow"
        })
        .on_error(json_hook)
}

#[test]
fn every_builtin_error_goes_through_the_hook() {
    for mode in modes() {
        let cfg = ServerConfig::default()
            .thread_mode(mode)
            .max_body_bytes(16)
            .max_header_bytes(1024)
            .header_read_timeout(Duration::from_millis(300))
            .body_read_timeout(Duration::from_millis(300));
        let h = start(cfg, error_app());
        let addr = h.local_addr();
        let send = |bytes: &[u8]| {
            let mut c = connect(addr);
            c.send(bytes);
            c.response()
        };

        // 404 and 405 from the router; 405 keeps its Allow header.
        assert_hooked(&send(&get("/nope")), 404, "404");
        let r = send(b"DELETE /ok HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_hooked(&r, 405, "405");
        assert_eq!(r.header("allow"), Some("GET, HEAD"));
        // 400: malformed request.
        assert_hooked(&send(b"GET /ok HTTP/1.1\r\nBad Header\r\n\r\n"), 400, "400");
        // 408: the head never ends; and a body that stalls.
        assert_hooked(&send(b"GET /ok HTTP/1.1\r\nHost: t\r\n"), 408, "408 head");
        assert_hooked(
            &send(b"POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n12"),
            408,
            "408 body",
        );
        // 413: declared too large (before the handler), and chunked over
        // the limit (while the handler reads).
        assert_hooked(
            &send(b"POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 17\r\n\r\n"),
            413,
            "413 declared",
        );
        assert_hooked(
            &send(b"POST /read HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n01234567890123456\r\n0\r\n\r\n"),
            413,
            "413 chunked",
        );
        // 417: an expectation the server does not support.
        assert_hooked(
            &send(b"POST /read HTTP/1.1\r\nHost: t\r\nExpect: magic\r\nContent-Length: 1\r\n\r\nx"),
            417,
            "417",
        );
        // 431: head too large.
        let big = format!(
            "GET /ok HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
            "a".repeat(2000)
        );
        assert_hooked(&send(big.as_bytes()), 431, "431");
        // 500: a panicking handler.
        assert_hooked(&send(&get("/panic")), 500, "500");
        // Errors the handlers return: Response::error and HttpError (with
        // its own header).
        assert_hooked(&send(&get("/teapot")), 418, "Response::error");
        let r = send(&get("/gone"));
        assert_hooked(&r, 410, "HttpError");
        assert_eq!(body_json(&r)["error"], "moved away");
        assert_eq!(r.header("x-extra"), Some("kept"));
        // A normal answer is untouched.
        let r = send(&get("/ok"));
        assert_eq!((r.status, r.text(), r.header("x-hook")), (200, "ok", None));
    }
}

#[test]
fn rejected_connection_503_goes_through_the_hook() {
    let cfg = ServerConfig::default()
        .max_connections(1)
        .when_full(WhenFull::Reject);
    let h = start(cfg, error_app());
    let mut busy = connect(h.local_addr());
    busy.send(&get("/ok"));
    assert_eq!(busy.response().status, 200); // holds the only slot
    let mut c = connect(h.local_addr());
    let r = c.response();
    assert_hooked(&r, 503, "503");
    assert_eq!(r.header("retry-after"), Some("1"));
}

#[test]
fn without_a_hook_errors_stay_plain_text() {
    let h = start(ServerConfig::default(), Router::new().get("/x", |_req| "x"));
    let mut c = connect(h.local_addr());
    c.send(&get("/nope"));
    let r = c.response();
    assert_eq!((r.status, r.text()), (404, "Not Found\n"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
}

#[test]
fn a_panicking_hook_falls_back_to_text() {
    let router = Router::new()
        .get("/x", |_req| "x")
        .on_error(|_e: &HttpError| -> Response { panic!("hook panic (expected by the test)") });
    let h = start(ServerConfig::default(), router);
    let mut c = connect(h.local_addr());
    c.send(&get("/nope"));
    let r = c.response();
    assert_eq!((r.status, r.text()), (404, "Not Found\n"));
    // The server keeps serving on the same connection.
    c.send(&get("/x"));
    assert_eq!(c.response().text(), "x");
}

#[test]
fn nested_router_errors_use_the_outer_hook() {
    let inner = Router::new().get("/api/item", |_req| -> Result<&str, HttpError> {
        Err(HttpError::not_found("no item"))
    });
    let router = Router::new()
        .route_handler("GET", "/api/*rest", inner)
        .on_error(json_hook);
    let h = start(ServerConfig::default(), router);
    let mut c = connect(h.local_addr());
    c.send(&get("/api/item"));
    let r = c.response();
    assert_hooked(&r, 404, "nested HttpError");
    assert_eq!(body_json(&r)["error"], "no item");
    c.send(&get("/api/other"));
    assert_hooked(&c.response(), 404, "nested router 404");
}

// ---------------------------------------------------------------------------
// JSON and `?`

#[derive(Debug, Deserialize, Serialize, PartialEq)]
struct Line {
    sku: String,
    qty: u32,
}

#[derive(Debug, Deserialize, Serialize, PartialEq)]
struct Order {
    customer: String,
    items: Vec<Line>,
}

fn json_app() -> Router {
    Router::new()
        .post("/orders", |req| -> Result<_, HttpError> {
            let order: Order = req.json()?;
            Ok((201, Json(order)))
        })
        .on_error(HttpError::json_response)
}

fn post_json(c: &Client, url: &str, ct: &str, body: &str) -> (u16, Value) {
    let r = c
        .post(url)
        .header("Content-Type", ct)
        .body(body)
        .send()
        .unwrap();
    let status = r.status();
    (status, r.json().unwrap())
}

#[test]
fn json_round_trip_and_extraction_errors_name_the_field() {
    let h = start(ServerConfig::default().max_body_bytes(1024), json_app());
    let url = format!("http://{}/orders", h.local_addr());
    let c = Client::new();
    let order = Order {
        customer: "ada".into(),
        items: vec![Line {
            sku: "a-1".into(),
            qty: 2,
        }],
    };
    let r = c.post(&url).json(&order).send().unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json::<Order>().unwrap(), order);

    let ct = "application/json";
    // Wrong type deep inside: 422 with the path of the field.
    let (s, v) = post_json(
        &c,
        &url,
        ct,
        r#"{"customer":"a","items":[{"sku":"x","qty":1},{"sku":"y","qty":"two"}]}"#,
    );
    assert_eq!((s, v["status"].as_u64()), (422, Some(422)), "{v}");
    assert_eq!(v["field"], "items[1].qty", "{v}");
    assert!(v["error"].as_str().unwrap().contains("items[1].qty"), "{v}");
    // Missing field: 422 naming it, also when nested.
    let (s, v) = post_json(&c, &url, ct, r#"{"items":[]}"#);
    assert_eq!((s, &v["field"]), (422, &json!("customer")), "{v}");
    let (s, v) = post_json(&c, &url, ct, r#"{"customer":"a","items":[{"sku":"x"}]}"#);
    assert_eq!((s, &v["field"]), (422, &json!("items[0].qty")), "{v}");
    // Malformed JSON and trailing data: 400.
    let (s, v) = post_json(&c, &url, ct, r#"{"customer": "a", "#);
    assert_eq!(s, 400, "{v}");
    let (s, v) = post_json(&c, &url, ct, r#"{"customer":"a","items":[]} x"#);
    assert_eq!(s, 400, "{v}");
    // Not JSON at all, by Content-Type: 415; `+json` types are accepted.
    let (s, v) = post_json(&c, &url, "text/plain", r#"{"customer":"a","items":[]}"#);
    assert_eq!(s, 415, "{v}");
    let (s, _) = post_json(
        &c,
        &url,
        "application/vnd.order+json; charset=utf-8",
        r#"{"customer":"a","items":[]}"#,
    );
    assert_eq!(s, 201);
    // Over the body limit: 413 (the connection closes).
    let big = format!(r#"{{"customer":"{}","items":[]}}"#, "a".repeat(2000));
    let (s, v) = post_json(&c, &url, ct, &big);
    assert_eq!(s, 413, "{v}");
}

#[derive(Deserialize)]
struct Pager {
    limit: Option<u32>,
}

struct Store {
    items: Vec<&'static str>,
}

/// A handler in the style the issue asks for: `?` on the crate's own
/// extraction errors, on a foreign error type, and on a lookup.
fn item(req: &mut Request<'_>) -> Result<Json<Value>, HttpError> {
    let id: usize = req
        .param("id")
        .unwrap_or_default()
        .parse()
        .map_err(|_| HttpError::bad_request("id must be a number").with_field("id"))?;
    let pager: Pager = req.query_as()?;
    if id == 99 {
        // Any std error: a 500 whose cause is not sent.
        std::fs::read("/nonexistent/weft-http-test")?;
    }
    let store = req.state::<Store>();
    let name = store
        .items
        .get(id)
        .ok_or_else(|| HttpError::not_found(format!("no item {id}")))?;
    Ok(Json(json!({"id": id, "name": name, "limit": pager.limit})))
}

#[test]
fn question_mark_in_handlers() {
    let seen_500_cause = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let seen = seen_500_cause.clone();
    let router = Router::with_state(Store {
        items: vec!["zero", "one"],
    })
    .get("/items/:id", item)
    .on_error(move |e: &HttpError| {
        if let Some(src) = e.source() {
            *seen.lock().unwrap() = Some(src.to_string());
        }
        e.json_response()
    });
    let h = start(ServerConfig::default(), router);
    let base = format!("http://{}/items", h.local_addr());
    let c = Client::new();
    let get = |path: &str| {
        let r = c.get(&format!("{base}/{path}")).send().unwrap();
        (r.status(), r.json::<Value>().unwrap())
    };
    assert_eq!(
        get("1?limit=5"),
        (200, json!({"id": 1, "name": "one", "limit": 5}))
    );
    let (s, v) = get("x");
    assert_eq!((s, &v["field"]), (400, &json!("id")));
    let (s, v) = get("1?limit=lots");
    assert_eq!((s, &v["field"]), (400, &json!("limit")), "{v}");
    let (s, v) = get("7");
    assert_eq!((s, &v["error"]), (404, &json!("no item 7")));
    let (s, v) = get("99");
    assert_eq!((s, &v["error"]), (500, &json!("Internal Server Error")));
    let cause = seen_500_cause
        .lock()
        .unwrap()
        .clone()
        .expect("hook saw the cause");
    assert!(cause.contains("No such file"), "{cause}");
}

// ---------------------------------------------------------------------------
// State

struct Hits(AtomicU64);
struct Name(&'static str);

fn state_router() -> Router {
    Router::with_state(Hits(AtomicU64::new(0)))
        .state(Name("weft"))
        .post("/hit", |req| {
            let hits = req.state::<Hits>();
            // The state does not borrow the request: the body is readable.
            let body = req.body_string().unwrap_or_default();
            format!("{} {body}", hits.0.fetch_add(1, Ordering::SeqCst) + 1)
        })
        .get("/hits", |req| {
            format!(
                "{} {}",
                req.state::<Name>().0,
                req.state::<Hits>().0.load(Ordering::SeqCst)
            )
        })
        .get("/missing", |req| match req.try_state::<String>() {
            Some(_) => "present",
            None => "absent",
        })
        .get("/wrong", |req| req.state::<String>().to_string())
}

#[test]
fn state_is_shared_by_every_route_without_cloning() {
    for mode in modes() {
        let h = start(ServerConfig::default().thread_mode(mode), state_router());
        let base = format!("http://{}", h.local_addr());
        let c = Client::new();
        let text = |path: &str| {
            c.get(&format!("{base}{path}"))
                .send()
                .unwrap()
                .text()
                .unwrap()
        };
        for i in 1..=3 {
            let r = c.post(&format!("{base}/hit")).body("x").send().unwrap();
            assert_eq!(r.text().unwrap(), format!("{i} x"), "{mode}");
        }
        assert_eq!(text("/hits"), "weft 3");
        assert_eq!(text("/missing"), "absent");
        // A state of a type never given is a programming error: 500.
        let r = c.get(&format!("{base}/wrong")).send().unwrap();
        assert_eq!(r.status(), 500);
    }
}

// ---------------------------------------------------------------------------
// Query strings

#[derive(Debug, Deserialize, Serialize, PartialEq)]
struct Search {
    q: String,
    #[serde(default)]
    tag: Vec<String>,
    page: Option<u32>,
}

fn query_app() -> Router {
    Router::new()
        .get("/raw", |req| req.query().unwrap_or("").to_owned())
        .get("/search", |req| -> Result<_, HttpError> {
            let s: Search = req.query_as()?;
            Ok(Json(s))
        })
        .get("/map", |req| -> Result<_, HttpError> {
            let m: BTreeMap<String, String> = req.query_as()?;
            Ok(Json(m))
        })
        .on_error(HttpError::json_response)
}

/// Reserved characters, `+`, `%`, an URL with its own query, non-ASCII and
/// empty values survive the client's encoding and the server's decoding,
/// and repeated keys fill a `Vec` in order.
#[test]
fn query_round_trips_reserved_repeated_and_non_ascii() {
    let h = start(ServerConfig::default(), query_app());
    let base = format!("http://{}", h.local_addr());
    let c = Client::new();
    let values = [
        "https://x.com/?a=1&b=2",
        "a+b c",
        "100%",
        "#frag",
        "=&?/;:@,$!'()*[]",
        "é 日本 🦀",
        "",
        "~-._",
    ];
    for v in values {
        let r = c
            .get(&format!("{base}/search"))
            .query(&[("q", v), ("tag", "x"), ("tag", v), ("page", "3")])
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{v:?}");
        let got: Search = r.json().unwrap();
        assert_eq!(
            got,
            Search {
                q: v.into(),
                tag: vec!["x".into(), v.into()],
                page: Some(3)
            }
        );
    }
    // The exact encoding: only unreserved characters stay as they are.
    let raw = c
        .get(&format!("{base}/raw"))
        .query(&[("a b", "c&d=é+")])
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert_eq!(raw, "a%20b=c%26d%3D%C3%A9%2B");
    // Appended to a query already in the URL, and to a bare `?`.
    for (url, want) in [
        ("/raw?page=2", "page=2&q=x"),
        ("/raw?", "q=x"),
        ("/raw", "q=x"),
    ] {
        let r = c
            .get(&format!("{base}{url}"))
            .query(&[("q", "x")])
            .send()
            .unwrap();
        assert_eq!(r.text().unwrap(), want);
    }
}

#[test]
fn bad_query_strings_get_400_naming_the_parameter_never_a_panic() {
    let h = start(ServerConfig::default(), query_app());
    let addr = h.local_addr();
    let send = |target: &str| {
        let mut c = connect(addr);
        c.send(&get(target));
        let r = c.response();
        let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        (r.status, v)
    };
    let (s, v) = send("/search?q=a&page=two");
    assert_eq!((s, &v["field"]), (400, &json!("page")), "{v}");
    let (s, v) = send("/search?page=1");
    assert_eq!((s, &v["field"]), (400, &json!("q")), "{v}");
    let (s, v) = send("/search?q=a&q=b");
    assert_eq!(s, 400, "{v}");
    // Malformed escapes, invalid UTF-8, empty keys, stray separators:
    // answered (200 or 400), never a 500.
    for target in [
        "/search?q=%zz",
        "/search?q=%",
        "/search?q=%E9",
        "/search?=&&q=1&&",
        "/search?q",
        "/map?%FF%FE=%C3",
        "/map?a=1&a=2",
        "/search?q=a&page=99999999999999999999",
    ] {
        let (s, v) = send(target);
        assert!(s == 200 || s == 400, "{target}: {s} {v}");
    }
    assert_eq!(h.stats().errors.handler_panic, 0);
}

mod query_props {
    use super::*;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    fn server() -> &'static (weft_http::ServerHandle, String) {
        static S: OnceLock<(weft_http::ServerHandle, String)> = OnceLock::new();
        S.get_or_init(|| {
            let h = start(ServerConfig::default(), query_app());
            let base = format!("http://{}", h.local_addr());
            (h, base)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any text as key and value comes back unchanged.
        #[test]
        fn any_text_round_trips(k in "\\PC{1,12}", v in "\\PC{0,24}") {
            let (_, base) = server();
            let r = Client::new().get(&format!("{base}/map")).query(&[(&k, &v)]).send().unwrap();
            prop_assert_eq!(r.status(), 200);
            let m: BTreeMap<String, String> = r.json().unwrap();
            prop_assert_eq!(m, BTreeMap::from([(k, v)]));
        }
    }
}

#[test]
fn urls_the_client_cannot_send_as_given_are_errors() {
    let c = Client::new();
    for bad in [
        "http://127.0.0.1:1/a b",
        "http://127.0.0.1:1/?url=x y",
        "http://127.0.0.1:1/café",
        "http://127.0.0.1:1/?q=100%",
        "http://127.0.0.1:1/?q=%zz",
        "http://127.0.0.1:1/{id}",
        "http://127.0.0.1:1/a|b",
        "http://user:pw@127.0.0.1:1/",
        "http://exämple.com/",
    ] {
        let e = c.get(bad).send().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidUrl, "{bad}: {e}");
    }
    // What can be sent unchanged still parses.
    for good in [
        "http://127.0.0.1:1/a%20b?x=1&y=%C3%A9",
        "http://127.0.0.1:1/p;v=1/@x:y?a=b=c&d=~!$'()*+,",
        "http://[::1]:1/",
    ] {
        assert!(weft_http::Url::parse(good).is_ok(), "{good}");
    }
}

// ---------------------------------------------------------------------------
// Errors mapped once; what the hook sees

/// What a hook saw of one error: status, message, cause, and the request
/// (method, path, query, route, activity).
#[derive(Clone, Debug, Default)]
struct Seen {
    status: u16,
    cause: Option<String>,
    method: Option<String>,
    path: Option<String>,
    query: Option<String>,
    route: Option<String>,
    activity: Option<String>,
}

type SeenLog = std::sync::Arc<std::sync::Mutex<Vec<Seen>>>;

/// A JSON hook that also writes down what it saw.
fn recording_hook(log: &SeenLog) -> impl Fn(&HttpError) -> Response + Send + Sync + 'static {
    let log = log.clone();
    move |e: &HttpError| {
        let r = e.request();
        log.lock().unwrap().push(Seen {
            status: e.status(),
            cause: e.source().map(|s| s.to_string()),
            method: r.map(|r| r.method().to_owned()),
            path: r.map(|r| r.path().to_owned()),
            query: r.and_then(|r| r.query().map(str::to_owned)),
            route: r.and_then(|r| r.route().map(str::to_owned)),
            activity: r.map(|r| r.activity().to_owned()),
        });
        json_hook(e)
    }
}

fn last(log: &SeenLog) -> Seen {
    log.lock().unwrap().last().cloned().expect("the hook ran")
}

/// An application's error type, wrapping the cause as `thiserror` would.
#[derive(Debug)]
enum AppError {
    Quota,
    Upstream(weft_http::Error),
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppError::Quota => f.write_str("quota exceeded"),
            AppError::Upstream(e) => write!(f, "upstream: {e}"),
        }
    }
}

impl std::error::Error for AppError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AppError::Quota => None,
            AppError::Upstream(e) => Some(e),
        }
    }
}

/// A port with nothing listening: an upstream that refuses.
fn refused_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    drop(l);
    url
}

#[test]
fn map_error_maps_converted_errors_in_one_place() {
    let log = SeenLog::default();
    let refused = refused_url();
    let app = Router::new()
        .get("/quota", |_req| -> Result<(), HttpError> {
            Err(AppError::Quota)?
        })
        .get("/explicit", |_req| -> Result<(), HttpError> {
            // Built by the handler: no mapper touches it.
            Err(HttpError::internal(AppError::Quota))
        })
        .get("/upstream", move |_req| -> Result<String, HttpError> {
            // The client's error, unmapped: 502 by default.
            Ok(Client::new().get(&refused).send()?.text()?)
        })
        .get("/wrapped", |_req| -> Result<(), HttpError> {
            let e = Client::new().get("http://127.0.0.1:1/").send().unwrap_err();
            Err(AppError::Upstream(e))?
        })
        .map_error(|e: &AppError| match e {
            AppError::Quota => {
                Some(HttpError::too_many_requests("slow down").with_header("Retry-After", "60"))
            }
            AppError::Upstream(_) => None, // the inner client error decides
        })
        .on_error(recording_hook(&log));
    let h = start(ServerConfig::default(), app);
    let mut c = connect(h.local_addr());

    c.send(&get("/quota"));
    let r = c.response();
    assert_hooked(&r, 429, "mapped");
    assert_eq!(r.header("retry-after"), Some("60"));
    assert_eq!(body_json(&r)["error"], "slow down");
    let seen = last(&log);
    assert_eq!(seen.cause.as_deref(), Some("quota exceeded"), "{seen:?}");

    c.send(&get("/explicit"));
    assert_hooked(&c.response(), 500, "explicit 500 left alone");

    c.send(&get("/upstream"));
    let r = c.response();
    assert_hooked(&r, 502, "client error");
    assert_eq!(body_json(&r)["error"], "Bad Gateway");
    let cause = last(&log).cause.unwrap();
    assert!(cause.starts_with("http client:"), "{cause}");

    c.send(&get("/wrapped"));
    assert_hooked(&c.response(), 502, "client error inside an app error");
}

#[test]
fn upstream_timeout_is_504() {
    // Accepts and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", silent.local_addr().unwrap());
    let client = Client::with_config(weft_http::ClientConfig {
        read_timeout: Some(Duration::from_millis(100)),
        ..Default::default()
    });
    let app = Router::new().get("/", move |_req| -> Result<String, HttpError> {
        Ok(client.get(&url).send()?.text()?)
    });
    let h = start(ServerConfig::default(), app);
    let mut c = connect(h.local_addr());
    c.send(&get("/"));
    let r = c.response();
    assert_eq!((r.status, r.text()), (504, "Gateway Timeout\n"));
    drop(silent);
}

#[test]
fn nested_mappers_come_first_then_the_outer_ones() {
    let inner = Router::new()
        .get("/quota", |_req| -> Result<(), HttpError> {
            Err(AppError::Quota)?
        })
        .map_error(|_: &AppError| Some(HttpError::conflict("inner")));
    let app = Router::new()
        .get("/quota", |_req| -> Result<(), HttpError> {
            Err(AppError::Quota)?
        })
        .nest("/in", inner)
        .nest(
            "/plain",
            Router::new().get("/quota", |_req| -> Result<(), HttpError> {
                Err(AppError::Quota)?
            }),
        )
        .map_error(|_: &AppError| Some(HttpError::too_many_requests("outer")))
        .on_error(json_hook);
    let h = start(ServerConfig::default(), app);
    let mut c = connect(h.local_addr());
    for (path, status, msg) in [
        ("/quota", 429, "outer"),
        ("/in/quota", 409, "inner"),
        ("/plain/quota", 429, "outer"),
    ] {
        c.send(&get(path));
        let r = c.response();
        assert_hooked(&r, status, path);
        assert_eq!(body_json(&r)["error"], msg, "{path}");
    }
}

#[test]
fn the_hook_sees_method_path_route_and_activity() {
    let log = SeenLog::default();
    let admin = Router::new()
        .delete("/links/:code", |req| -> Result<(), HttpError> {
            let code = req.param("code").unwrap().to_owned();
            req.set_activity(format_args!("deleting {code}"));
            Err(HttpError::service_unavailable("read-only"))
        })
        .get("/", |_req| -> Result<(), HttpError> {
            Err(HttpError::forbidden("no"))
        });
    let app = Router::new()
        .get("/links/:code", |_req| -> Result<(), HttpError> {
            Err(HttpError::not_found("no such link"))
        })
        .nest("/admin", admin)
        .on_error(recording_hook(&log));
    let h = start(ServerConfig::default(), app);
    let mut c = connect(h.local_addr());

    c.send(&get("/links/abc?full=1"));
    assert_hooked(&c.response(), 404, "404");
    let s = last(&log);
    assert_eq!(
        (s.method.as_deref(), s.path.as_deref(), s.query.as_deref()),
        (Some("GET"), Some("/links/abc"), Some("full=1"))
    );
    assert_eq!(s.route.as_deref(), Some("/links/:code"));
    assert_eq!(s.activity.as_deref(), Some("GET /links/abc?full=1"));

    c.send(b"DELETE /admin/links/xyz HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_hooked(&c.response(), 503, "503");
    let s = last(&log);
    assert_eq!(
        (s.method.as_deref(), s.path.as_deref()),
        (Some("DELETE"), Some("/admin/links/xyz"))
    );
    assert_eq!(s.route.as_deref(), Some("/admin/links/:code"));
    assert_eq!(s.activity.as_deref(), Some("deleting xyz"));

    c.send(&get("/admin/"));
    assert_hooked(&c.response(), 403, "403");
    assert_eq!(last(&log).route.as_deref(), Some("/admin"));

    // No route: no pattern, but the request is named.
    c.send(&get("/nowhere"));
    assert_hooked(&c.response(), 404, "router 404");
    let s = last(&log);
    assert_eq!((s.route, s.path.as_deref()), (None, Some("/nowhere")));
    c.send(b"PUT /links/abc HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    assert_hooked(&c.response(), 405, "405");
    assert_eq!(last(&log).method.as_deref(), Some("PUT"));

    // The server's own answer before a request exists names none.
    let mut c = connect(h.local_addr());
    c.send(b"NOT HTTP\r\n\r\n");
    assert_hooked(&c.response(), 400, "400");
    assert_eq!(last(&log).method, None);
}

/// A nested route that panics, and the line of its `panic!`.
fn panic_app(log: &SeenLog) -> (Router, u32) {
    let line = line!() + 3;
    let admin = Router::new().post("/boom/:n", |req| -> Response {
        let n = req.param("n").unwrap().to_owned();
        panic!("boom {n} (expected by the test)");
    });
    let app = Router::new()
        .nest("/admin", admin)
        .on_error(recording_hook(log));
    (app, line)
}

#[test]
fn a_panic_keeps_message_location_and_route_for_the_hook_only() {
    for mode in modes() {
        let log = SeenLog::default();
        let (app, line) = panic_app(&log);
        let h = start(ServerConfig::default().thread_mode(mode), app);
        let mut c = connect(h.local_addr());
        c.send(b"POST /admin/boom/7?x=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
        let r = c.response();
        assert_hooked(&r, 500, "panic");
        assert_eq!(body_json(&r)["error"], "Internal Server Error");
        assert!(!r.text().contains("boom"), "{}", r.text());
        let s = last(&log);
        assert_eq!(s.status, 500);
        let cause = s.cause.expect("the panic is the cause");
        let at = format!("{}:{line}:", file!());
        assert!(
            cause.starts_with(&format!("handler panicked at {at}")),
            "{cause} (expected at {at})"
        );
        assert!(
            cause.ends_with(": boom 7 (expected by the test)"),
            "{cause}"
        );
        assert_eq!(s.route.as_deref(), Some("/admin/boom/:n"));
        assert_eq!(
            (s.method.as_deref(), s.path.as_deref(), s.query.as_deref()),
            (Some("POST"), Some("/admin/boom/7"), Some("x=1"))
        );
    }
}

// ---------------------------------------------------------------------------
// Routers that compose

#[test]
fn nest_strips_the_prefix_for_every_method_and_inherits_state() {
    struct Db(&'static str);
    struct Own(&'static str);
    let admin = Router::new()
        .state(Own("admin"))
        .get("/", |req| format!("admin home, path {}", req.path()))
        .get("/links/:code", |req| {
            format!(
                "{} {} {} via {}",
                req.state::<Db>().0,
                req.state::<Own>().0,
                req.param("code").unwrap(),
                req.original_path()
            )
        })
        .delete("/links/:code", |req| {
            format!("deleted {}", req.param("code").unwrap())
        })
        .route("PATCH", "/links/:code", |_req| "patched");
    let users = Router::new().get("/posts", |req| {
        format!("posts of {} ({})", req.param("user").unwrap(), req.path())
    });
    let app = Router::new()
        .get("/admin/health", |_req| "outer route added first wins")
        .nest("/admin", admin)
        .nest("/users/:user", users)
        .get("/", |req| {
            req.try_state::<Own>().map_or("no Own here", |o| o.0)
        })
        .state(Db("db")) // added after the nest: still inherited
        .on_error(json_hook);
    let h = start(ServerConfig::default(), app);
    let mut c = connect(h.local_addr());
    let mut ask = |req: &[u8]| {
        c.send(req);
        c.response()
    };
    let r = ask(&get("/admin/links/x%20y"));
    assert_eq!(
        (r.status, r.text()),
        (200, "db admin x y via /admin/links/x%20y")
    );
    let r = ask(b"DELETE /admin/links/z HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.text(), "deleted z");
    let r = ask(b"PATCH /admin/links/z HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(r.text(), "patched");
    assert_eq!(ask(&get("/admin")).text(), "admin home, path /");
    assert_eq!(ask(&get("/admin/")).text(), "admin home, path /");
    assert_eq!(
        ask(&get("/admin/health")).text(),
        "outer route added first wins"
    );
    assert_eq!(
        ask(&get("/users/ann/posts")).text(),
        "posts of ann (/posts)"
    );
    assert_eq!(ask(&get("/")).text(), "no Own here");
    // The nest claims its prefix: its 404 and 405, through the outer hook.
    assert_hooked(&ask(&get("/admin/nope")), 404, "nested 404");
    let r = ask(b"POST /admin/links/z HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    assert_hooked(&r, 405, "nested 405");
    assert_eq!(r.header("allow"), Some("GET, DELETE, PATCH, HEAD"));
    // Not the prefix: the outer router's 404.
    assert_hooked(&ask(&get("/administrator")), 404, "outer 404");
    // HEAD falls back to the nested GET route.
    c.send(b"HEAD /admin/links/q HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.response_to(true).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
}

#[test]
fn merge_combines_routes_states_mappers_and_keeps_the_first_hook() {
    struct Db(&'static str);
    struct Other(&'static str);
    let links = Router::with_state(Db("links db"))
        .state(Other("other"))
        .get("/links", |req| {
            format!("{} {}", req.state::<Db>().0, req.state::<Other>().0)
        })
        .get("/quota", |_req| -> Result<(), HttpError> {
            Err(AppError::Quota)?
        })
        .map_error(|_: &AppError| Some(HttpError::too_many_requests("later")))
        .fallback(|_req| "links fallback")
        .on_error(|e: &HttpError| Response::text("links hook").with_status(e.status()));
    let app = Router::with_state(Db("app db"))
        .get("/", |_req| "home")
        .map_error(|e: &AppError| {
            matches!(e, AppError::Upstream(_)).then(|| HttpError::bad_gateway("app"))
        })
        .on_error(json_hook)
        .merge(links);
    let h = start(ServerConfig::default(), app);
    let mut c = connect(h.local_addr());
    c.send(&get("/"));
    assert_eq!(c.response().text(), "home");
    c.send(&get("/links"));
    assert_eq!(c.response().text(), "app db other");
    c.send(&get("/quota"));
    let r = c.response();
    assert_hooked(&r, 429, "merged mapper, first hook");
    assert_eq!(body_json(&r)["error"], "later");
    c.send(&get("/nowhere"));
    assert_eq!(c.response().text(), "links fallback");
}
