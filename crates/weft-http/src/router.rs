//! Handlers and a small router with path parameters, shared state, error
//! mapping, an error hook, and composition (`nest`, `merge`).
//!
//! # Design
//!
//! A handler is plain blocking code with one shape, `Fn(&mut Request) ->
//! impl IntoResponse`: no extractor arguments as in axum, because a
//! closure's argument types are only inferred from a plain `Fn` bound, and
//! `|req| …` must keep compiling. What axum's extractors do is a method on
//! [`Request`] instead: [`param`](Request::param),
//! [`query_as`](Request::query_as), [`json`](Request::json),
//! [`state`](Request::state). They return `Result<_, HttpError>`, so `?`
//! turns bad input into a `4xx`.
//!
//! State is given once, to the router ([`Router::with_state`]), not
//! cloned into every closure; a handler reaches it by type with
//! [`Request::state`] (an `Arc` clone: it does not borrow the request, so
//! reading the body afterwards still compiles).
//!
//! Every error answer — the router's `404`/`405`, the server's
//! `400`/`408`/`413`/`417`/`431`/`500`/`503`, and the [`HttpError`]s and
//! [`Response::error`]s handlers return — goes through one hook,
//! [`Router::on_error`], so a JSON API answers JSON everywhere. Errors that
//! `?` converted are first offered to [`Router::map_error`], which gives
//! the application's error types their status in one place.
//!
//! Composition: [`Router::nest`] keeps the nested router whole (its
//! routes, fallback, mappers and hook) behind a prefix match that narrows
//! [`Request::path`]; states are resolved when the router is built (each
//! nested router holds its own values and then its parent's, updated by
//! every `state`/`nest`/`merge` call), so a request pays one `Arc` clone
//! for them as before. [`Router::merge`] appends another router's entries.
//! A panic passing through a route drops a guard that notes the route's
//! pattern for the error hook (the guard is forgotten on the normal path).

use std::sync::Arc;

use crate::error::{HttpError, render};
use crate::request::{Request, States, Value, percent_decode};
use crate::response::{IntoResponse, Response};

/// Something that answers requests. Implemented for every
/// `Fn(&mut Request) -> R + Send + Sync + 'static` closure or function
/// whose result `R` is [`IntoResponse`] (a [`Response`], a string, a
/// `Result<_, HttpError>`, a [`Json`](crate::Json), …), and for
/// [`Router`].
///
/// Handlers are plain blocking code: they may sleep, lock, read sockets and
/// call other services. In [`ThreadMode::Virtual`](crate::ThreadMode) each
/// connection runs on its own virtual thread, so a blocking handler parks
/// only that thread. A panic in a handler becomes a `500` for that request.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request.
    fn handle(&self, req: &mut Request<'_>) -> Response;

    /// Renders an error answer: the server calls this for its own errors
    /// (`400`, `408`, `413`, `417`, `431`, a panic's `500`, `503`) and for
    /// error responses that reach it unrendered. The default is
    /// [`HttpError::text_response`]; [`Router`] uses its
    /// [`on_error`](Router::on_error) hook.
    fn render_error(&self, err: &HttpError) -> Response {
        err.text_response()
    }
}

impl<F, R> Handler for F
where
    F: Fn(&mut Request<'_>) -> R + Send + Sync + 'static,
    R: IntoResponse,
{
    fn handle(&self, req: &mut Request<'_>) -> Response {
        self(req).into_response()
    }
}

impl<H: Handler + ?Sized> Handler for Arc<H> {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        (**self).handle(req)
    }
    fn render_error(&self, err: &HttpError) -> Response {
        (**self).render_error(err)
    }
}

impl Handler for Box<dyn Handler> {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        (**self).handle(req)
    }
    fn render_error(&self, err: &HttpError) -> Response {
        (**self).render_error(err)
    }
}

/// The error hook: see [`Router::on_error`].
type ErrorHook = Box<dyn Fn(&HttpError) -> Response + Send + Sync>;

/// An error mapper: see [`Router::map_error`].
type Mapper = Box<dyn Fn(&(dyn std::error::Error + 'static)) -> Option<HttpError> + Send + Sync>;

#[derive(Debug)]
enum Seg {
    Lit(String),
    Param(String),
    /// `*name`: the rest of the path (possibly empty).
    Rest(String),
}

struct Route {
    method: String,
    /// As given (for [`RequestInfo::route`](crate::RequestInfo::route)).
    pattern: String,
    segs: Vec<Seg>,
    handler: Box<dyn Handler>,
}

/// A router mounted with [`Router::nest`].
struct Nest {
    /// Normalised: `/a/b`, no trailing slash; `""` for `/`.
    prefix: String,
    segs: Vec<Seg>,
    router: Router,
}

/// What a router tries, in order.
enum Entry {
    Route(Route),
    Nest(Nest),
}

/// Routes requests by method and path pattern, with shared state, error
/// mapping and an error hook; routers compose with [`nest`](Router::nest)
/// and [`merge`](Router::merge).
///
/// Patterns are `/`-separated segments: literals, `:name` (one segment,
/// available as [`Request::param`]) and a final `*name` (the rest of the
/// path). The first matching route wins. A path that matches no route gets
/// `404`; a path that matches only under other methods gets `405` with an
/// `Allow` header. `HEAD` falls back to the `GET` route.
///
/// ```
/// use weft_http::{Response, Router};
/// let router = Router::new()
///     .get("/hello", |_req| Response::text("hi"))
///     .get("/users/:id", |req| Response::text(format!("user {}", req.param("id").unwrap())))
///     .post("/users", |req| match req.body_string() {
///         Ok(body) => Response::text(body).with_status(201),
///         Err(_) => Response::error(400),
///     })
///     .get("/files/*path", |req| Response::text(req.param("path").unwrap().to_owned()));
/// # let _ = router;
/// ```
///
/// With state, `?` and JSON errors:
///
/// ```
/// use std::sync::Mutex;
/// use weft_http::{HttpError, Router};
///
/// struct Counter(Mutex<u64>);
///
/// # #[cfg(feature = "json")]
/// let router = Router::with_state(Counter(Mutex::new(0)))
///     .post("/hit", |req| -> Result<String, HttpError> {
///         let counter = req.state::<Counter>();
///         let mut n = counter.0.lock().map_err(|_| HttpError::from_status(500))?;
///         *n += 1;
///         Ok(n.to_string())
///     })
///     .on_error(HttpError::json_response);
/// ```
#[derive(Default)]
pub struct Router {
    entries: Vec<Entry>,
    fallback: Option<Box<dyn Handler>>,
    /// What handlers see: `own`, then the `inherited` values of types not
    /// in `own` (shared with every request: one `Arc` clone per request).
    states: States,
    own: Vec<Value>,
    /// The nesting router's `states`.
    inherited: States,
    on_error: Option<ErrorHook>,
    mappers: Vec<Mapper>,
    /// The prefixes this router is nested under (`/api/admin`), for the
    /// full route pattern in [`RequestInfo::route`](crate::RequestInfo::route).
    mount: String,
}

impl Router {
    /// An empty router (everything is 404).
    pub fn new() -> Router {
        Router::default()
    }

    /// An empty router with `state`, which its handlers reach with
    /// [`Request::state`]. Give the state by value (an `Arc` inside it, a
    /// pool, a config …); it is shared, never cloned per route or request.
    pub fn with_state<S: Send + Sync + 'static>(state: S) -> Router {
        Router::new().state(state)
    }

    /// Adds a state value of another type (replacing an earlier one of the
    /// same type). Routers mounted with [`nest`](Router::nest) see it too,
    /// unless they have a value of that type of their own; a router mounted
    /// with [`route_handler`](Router::route_handler) that has states shows
    /// its handlers only its own.
    pub fn state<S: Send + Sync + 'static>(mut self, state: S) -> Router {
        self.own.retain(|s| !s.is::<S>());
        self.own.push(Arc::new(state));
        self.sync();
        self
    }

    /// Sets the hook that renders every error answer: the router's `404`
    /// and `405`, the server's own (`400`, `408`, `413`, `417`, `431`, a
    /// panic's `500`, `503`) when this router is the server's handler, and
    /// the [`HttpError`]s / [`Response::error`]s its handlers return. The
    /// hook shapes body and headers; the status stays the error's, and
    /// headers of the answer such as `Allow` are kept. A hook that panics
    /// falls back to plain text. A router mounted with [`nest`](Router::nest)
    /// without a hook of its own leaves its errors to this one.
    ///
    /// The error names the request it answers ([`HttpError::request`]:
    /// method, path, route pattern, activity) and keeps its cause
    /// ([`HttpError::source`]; for a panic, a
    /// [`HandlerPanic`](crate::HandlerPanic) with message and location),
    /// neither of which is sent to the client. The server logs every `5xx`
    /// with both ([`ServerConfig::error_log`](crate::ServerConfig::error_log),
    /// on by default), so the hook only shapes the answer:
    ///
    /// ```
    /// use weft_http::{HttpError, Response, Router};
    /// # #[cfg(feature = "json")]
    /// let api = Router::new().on_error(HttpError::json_response);
    /// let custom = Router::new().on_error(|e| {
    ///     Response::text(format!("error {}: {}", e.status(), e.message()))
    /// });
    /// ```
    pub fn on_error<F, R>(mut self, hook: F) -> Router
    where
        F: Fn(&HttpError) -> R + Send + Sync + 'static,
        R: IntoResponse,
    {
        self.on_error = Some(Box::new(move |e| hook(e).into_response()));
        self
    }

    /// Maps errors of type `E` to answers, in one place for every route.
    ///
    /// `?` in a handler turns any error into an [`HttpError`] whose status
    /// comes from the error's type: `500`, or for types weft-http knows
    /// its own pick (its client's errors: `502`/`504`; with feature `pg`,
    /// weft-pg's: `409`, `503`). When such an error leaves a route of this
    /// router, `f` is asked about each error of type `E` in its
    /// [`source`](std::error::Error::source) chain, outermost first; the
    /// first `Some` replaces the answer (keeping the cause for the logs).
    /// Errors the handler built itself (`HttpError::new`, …) are left
    /// alone. Mappers of a nested router are asked first.
    ///
    /// ```
    /// use weft_http::{HttpError, Router};
    ///
    /// #[derive(Debug)]
    /// struct QuotaExceeded;
    /// impl std::fmt::Display for QuotaExceeded {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    ///         f.write_str("quota exceeded")
    ///     }
    /// }
    /// impl std::error::Error for QuotaExceeded {}
    ///
    /// fn shorten(_: &mut weft_http::Request<'_>) -> Result<String, QuotaExceeded> {
    ///     Err(QuotaExceeded)
    /// }
    ///
    /// let router = Router::new()
    ///     .post("/links", |req| -> Result<String, HttpError> { Ok(shorten(req)?) })
    ///     .map_error(|_: &QuotaExceeded| {
    ///         Some(HttpError::too_many_requests("slow down").with_header("Retry-After", "60"))
    ///     });
    /// let server = weft_http::serve("127.0.0.1:0", router)?;
    /// let url = format!("http://{}/links", server.local_addr());
    /// let r = weft_http::Client::new().post(&url).send()?;
    /// assert_eq!((r.status(), r.header("retry-after")), (429, Some("60")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn map_error<E, F>(mut self, f: F) -> Router
    where
        E: std::error::Error + 'static,
        F: Fn(&E) -> Option<HttpError> + Send + Sync + 'static,
    {
        self.mappers
            .push(Box::new(move |e| e.downcast_ref::<E>().and_then(&f)));
        self
    }

    /// Adds a route for `method` (e.g. `"PATCH"`) and `pattern`.
    ///
    /// # Panics
    /// If the pattern does not start with `/` or has `*name` before its
    /// last segment.
    pub fn route<F, R>(mut self, method: &str, pattern: &str, handler: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> R + Send + Sync + 'static,
        R: IntoResponse,
    {
        self.add(method, pattern, Box::new(handler));
        self
    }

    /// Adds a route with any [`Handler`]. To mount a [`Router`] under a
    /// prefix for every method, use [`nest`](Router::nest).
    pub fn route_handler(mut self, method: &str, pattern: &str, handler: impl Handler) -> Router {
        self.add(method, pattern, Box::new(handler));
        self
    }

    /// Mounts `router` under `prefix` for every method: a request whose
    /// path starts with the prefix's segments goes to `router`, which sees
    /// the rest of the path ([`Request::path`]; `/` for the prefix itself,
    /// [`Request::original_path`] for all of it). So its patterns do not
    /// repeat the prefix. The prefix may have `:name` segments (their
    /// values are path parameters of the nested routes).
    ///
    /// The nested router sees this router's states (its own win), and its
    /// errors go to this router's mappers and hook unless it has its own.
    /// It claims its prefix: a path under it that it does not route is its
    /// `404` (or its fallback's answer); routes of this router added
    /// before the nest still win.
    ///
    /// ```
    /// use weft_http::{Client, Router};
    /// struct Name(&'static str);
    /// let admin = Router::new()
    ///     .get("/stats", |req| format!("{} stats at {}", req.state::<Name>().0, req.path()))
    ///     .delete("/links/:code", |req| format!("deleted {}", req.param("code").unwrap()));
    /// let app = Router::with_state(Name("shortener"))
    ///     .get("/", |_req| "home")
    ///     .nest("/admin", admin);
    /// let server = weft_http::serve("127.0.0.1:0", app)?;
    /// let base = format!("http://{}", server.local_addr());
    /// let c = Client::new();
    /// assert_eq!(c.get(&format!("{base}/admin/stats")).send()?.text()?, "shortener stats at /stats");
    /// assert_eq!(c.delete(&format!("{base}/admin/links/x")).send()?.text()?, "deleted x");
    /// assert_eq!(c.get(&format!("{base}/admin/nope")).send()?.status(), 404);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Panics
    /// If the prefix does not start with `/` or has a `*name` segment.
    pub fn nest(mut self, prefix: &str, router: Router) -> Router {
        let segs = parse(prefix);
        assert!(
            !segs.iter().any(|s| matches!(s, Seg::Rest(_))),
            "a nest prefix cannot have a '*name' segment: {prefix:?}"
        );
        let mut norm = String::new();
        for p in split_path(prefix) {
            norm.push('/');
            norm.push_str(p);
        }
        self.entries.push(Entry::Nest(Nest {
            prefix: norm,
            segs,
            router,
        }));
        self.sync();
        self
    }

    /// Adds the routes and nested routers of `other` after this router's,
    /// with its states (for types this router has none of), its error
    /// mappers (after this router's), and its fallback and error hook if
    /// this router has none.
    ///
    /// ```
    /// use weft_http::Router;
    /// let links = Router::new().get("/links/:code", |req| req.param("code").unwrap().to_owned());
    /// let health = Router::new().get("/health", |_req| "ok");
    /// let app = Router::new().merge(links).merge(health);
    /// # drop(app);
    /// ```
    pub fn merge(mut self, other: Router) -> Router {
        let Router {
            entries,
            fallback,
            own,
            on_error,
            mappers,
            ..
        } = other;
        self.entries.extend(entries);
        for s in own {
            if !self.own.iter().any(|o| same_type(o, &s)) {
                self.own.push(s);
            }
        }
        if self.fallback.is_none() {
            self.fallback = fallback;
        }
        if self.on_error.is_none() {
            self.on_error = on_error;
        }
        self.mappers.extend(mappers);
        self.sync();
        self
    }

    /// Recomputes what handlers see (own states, then inherited ones) and
    /// hands it, with the mount prefix, to the nested routers.
    fn sync(&mut self) {
        let mut all = self.own.clone();
        for s in self.inherited.iter() {
            if !self.own.iter().any(|o| same_type(o, s)) {
                all.push(s.clone());
            }
        }
        self.states = Arc::new(all);
        for e in &mut self.entries {
            if let Entry::Nest(n) = e {
                n.router.inherited = self.states.clone();
                n.router.mount = format!("{}{}", self.mount, n.prefix);
                n.router.sync();
            }
        }
    }

    fn add(&mut self, method: &str, pattern: &str, handler: Box<dyn Handler>) {
        self.entries.push(Entry::Route(Route {
            method: method.to_owned(),
            pattern: pattern.to_owned(),
            segs: parse(pattern),
            handler,
        }));
    }

    /// Adds a `GET` route.
    pub fn get<F, R>(self, pattern: &str, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> R + Send + Sync + 'static,
        R: IntoResponse,
    {
        self.route("GET", pattern, f)
    }

    /// Adds a `POST` route.
    pub fn post<F, R>(self, pattern: &str, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> R + Send + Sync + 'static,
        R: IntoResponse,
    {
        self.route("POST", pattern, f)
    }

    /// Adds a `PUT` route.
    pub fn put<F, R>(self, pattern: &str, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> R + Send + Sync + 'static,
        R: IntoResponse,
    {
        self.route("PUT", pattern, f)
    }

    /// Adds a `DELETE` route.
    pub fn delete<F, R>(self, pattern: &str, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> R + Send + Sync + 'static,
        R: IntoResponse,
    {
        self.route("DELETE", pattern, f)
    }

    /// Adds a `PATCH` route.
    pub fn patch<F, R>(self, pattern: &str, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> R + Send + Sync + 'static,
        R: IntoResponse,
    {
        self.route("PATCH", pattern, f)
    }

    /// Answers requests that match no route (instead of `404`).
    pub fn fallback<F, R>(mut self, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> R + Send + Sync + 'static,
        R: IntoResponse,
    {
        self.fallback = Some(Box::new(f));
        self
    }
}

fn same_type(a: &Value, b: &Value) -> bool {
    (**a).type_id() == (**b).type_id()
}

/// The segments of a route pattern or nest prefix.
///
/// # Panics
/// If the pattern does not start with `/` or has `*name` before its last
/// segment.
fn parse(pattern: &str) -> Vec<Seg> {
    assert!(
        pattern.starts_with('/'),
        "route pattern must start with '/': {pattern:?}"
    );
    let parts: Vec<&str> = split_path(pattern).collect();
    let mut segs = Vec::with_capacity(parts.len());
    for (i, p) in parts.iter().enumerate() {
        let seg = if let Some(name) = p.strip_prefix(':') {
            Seg::Param(name.to_owned())
        } else if let Some(name) = p.strip_prefix('*') {
            assert!(
                i + 1 == parts.len(),
                "'*{name}' must be the last segment of {pattern:?}"
            );
            Seg::Rest(name.to_owned())
        } else {
            Seg::Lit((*p).to_owned())
        };
        segs.push(seg);
    }
    segs
}

/// Path segments, ignoring empty ones from repeated or trailing slashes
/// (so `/a/`, `//a` and `/a` are the same path).
fn split_path(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

fn matches(segs: &[Seg], path: &str) -> Option<Vec<(String, String)>> {
    let mut params = Vec::new();
    let mut parts = split_path(path);
    for seg in segs {
        match seg {
            Seg::Rest(name) => {
                // The remainder of the path after the matched segments.
                let rest: Vec<&str> = parts.collect();
                params.push((
                    name.clone(),
                    percent_decode(&rest.join("/"), false).into_owned(),
                ));
                return Some(params);
            }
            Seg::Lit(l) => {
                if parts.next()? != l {
                    return None;
                }
            }
            Seg::Param(name) => {
                let v = parts.next()?;
                params.push((name.clone(), percent_decode(v, false).into_owned()));
            }
        }
    }
    if parts.next().is_some() {
        return None;
    }
    Some(params)
}

/// Matches the segments of a nest prefix (literals and parameters) at the
/// start of `path`: the parameters, and the rest of the path (`/` when
/// nothing is left).
fn match_prefix<'p>(segs: &[Seg], path: &'p str) -> Option<(Vec<(String, String)>, &'p str)> {
    let mut params = Vec::new();
    let mut rest = path;
    for seg in segs {
        let trimmed = rest.trim_start_matches('/');
        let end = trimmed.find('/').unwrap_or(trimmed.len());
        let part = &trimmed[..end];
        if part.is_empty() {
            return None;
        }
        match seg {
            Seg::Lit(l) if part == l => {}
            Seg::Param(name) => {
                params.push((name.clone(), percent_decode(part, false).into_owned()))
            }
            _ => return None,
        }
        rest = &trimmed[end..];
    }
    if rest.trim_start_matches('/').is_empty() {
        rest = "/";
    }
    Some((params, rest))
}

impl Handler for Router {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        self.route_request(req)
    }

    fn render_error(&self, err: &HttpError) -> Response {
        match &self.on_error {
            Some(hook) => hook(err),
            None => err.text_response(),
        }
    }
}

impl Router {
    fn set_states(&self, req: &mut Request<'_>) {
        if !self.states.is_empty() {
            req.states = Some(self.states.clone());
        }
    }

    /// The pattern of `route` with the prefixes this router is nested
    /// under.
    fn full_pattern(&self, route: &Route) -> String {
        if self.mount.is_empty() {
            route.pattern.clone()
        } else if split_path(&route.pattern).next().is_none() {
            self.mount.clone()
        } else {
            format!("{}{}", self.mount, route.pattern)
        }
    }

    /// Runs the handler of the matched `route`. A panic passing through
    /// notes the route for the error hook: the guard is dropped only while
    /// unwinding (no cost otherwise).
    #[inline]
    fn call(&self, route: &Route, req: &mut Request<'_>) -> Response {
        let guard = NoteRoute {
            router: self,
            route,
        };
        let resp = route.handler.handle(req);
        std::mem::forget(guard);
        self.done(req, resp, Some(route))
    }

    /// An answer leaving this router: errors are finished here.
    #[inline]
    fn done(&self, req: &mut Request<'_>, resp: Response, route: Option<&Route>) -> Response {
        if resp.error.is_none() {
            return resp;
        }
        self.finish_error(req, resp, route)
    }

    /// Maps (with this router's mappers), names the request and renders
    /// (with this router's hook) an error leaving this router.
    #[cold]
    fn finish_error(
        &self,
        req: &mut Request<'_>,
        mut resp: Response,
        route: Option<&Route>,
    ) -> Response {
        if !self.mappers.is_empty() {
            resp = self.map(resp);
        }
        if let Some(err) = &mut resp.error
            && err.request.is_none()
        {
            let route = route.map(|r| self.full_pattern(r));
            err.request = Some(Box::new(req.info(route)));
        }
        match &self.on_error {
            Some(hook) => render(resp, hook),
            None => resp,
        }
    }

    /// Replaces an error that `?` converted with the answer of the first
    /// mapper that knows an error of its source chain.
    fn map(&self, mut resp: Response) -> Response {
        let Some(err) = resp.error.as_deref() else {
            return resp;
        };
        if !err.converted {
            return resp;
        }
        let mut mapped = None;
        let mut next = err
            .source()
            .map(|s| s as &(dyn std::error::Error + 'static));
        'chain: while let Some(e) = next {
            for m in &self.mappers {
                if let Some(h) = m(e) {
                    mapped = Some(h);
                    break 'chain;
                }
            }
            next = e.source();
        }
        let Some(mut new) = mapped else {
            return resp;
        };
        let Some(old) = resp.error.take() else {
            return resp;
        };
        let old = *old;
        if new.source().is_none()
            && let Some(s) = old.source
        {
            new = new.with_source(s);
        }
        new.request = old.request;
        let mut out = new.into_response();
        // Keep headers the handler added to the answer.
        for (n, v) in resp.headers {
            let from_error = old.headers.iter().any(|(m, w)| *m == n && *w == v);
            if !from_error && !n.eq_ignore_ascii_case("content-type") && out.header(&n).is_none() {
                out.headers.push((n, v));
            }
        }
        out
    }

    /// Routes `req` and finishes an error answer (mappers, request info,
    /// hook).
    fn route_request(&self, req: &mut Request<'_>) -> Response {
        let method = req.method();
        let mut allowed: Vec<&str> = Vec::new();
        let mut head_fallback = None;
        for entry in &self.entries {
            let route = match entry {
                Entry::Route(r) => r,
                Entry::Nest(n) => {
                    if head_fallback.is_some() {
                        break;
                    }
                    let Some((params, rest)) = match_prefix(&n.segs, req.path) else {
                        continue;
                    };
                    let path = req.path;
                    req.path = rest;
                    req.set_params(params);
                    let resp = n.router.handle(req);
                    req.path = path;
                    return self.done(req, resp, None);
                }
            };
            let Some(params) = matches(&route.segs, req.path()) else {
                continue;
            };
            if route.method == method {
                req.set_params(params);
                self.set_states(req);
                return self.call(route, req);
            }
            if method == "HEAD" && route.method == "GET" && head_fallback.is_none() {
                head_fallback = Some((route, params));
            }
            if !allowed.contains(&route.method.as_str()) {
                allowed.push(&route.method);
            }
        }
        if let Some((route, params)) = head_fallback {
            req.set_params(params);
            self.set_states(req);
            return self.call(route, req);
        }
        if allowed.is_empty() {
            let resp = match &self.fallback {
                Some(f) => {
                    self.set_states(req);
                    f.handle(req)
                }
                None => Response::error(404),
            };
            return self.done(req, resp, None);
        }
        if allowed.contains(&"GET") && !allowed.contains(&"HEAD") {
            allowed.push("HEAD");
        }
        let allow = allowed.join(", ");
        let resp = HttpError::new(
            405,
            format!("method {method} is not allowed here (allowed: {allow})"),
        )
        .with_header("Allow", allow)
        .into_response();
        self.done(req, resp, None)
    }
}

/// Notes the pattern of the route whose handler panics, for the error
/// hook; dropped only while unwinding.
struct NoteRoute<'r> {
    router: &'r Router,
    route: &'r Route,
}

impl Drop for NoteRoute<'_> {
    fn drop(&mut self) {
        crate::panic::note_route(|| self.router.full_pattern(self.route));
    }
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut l = f.debug_list();
        for e in &self.entries {
            match e {
                Entry::Route(r) => l.entry(&format_args!("{} {}", r.method, r.pattern)),
                Entry::Nest(n) => l.entry(&format_args!("* {}/… {:?}", n.prefix, n.router)),
            };
        }
        l.finish()?;
        if !self.states.is_empty() || self.on_error.is_some() || !self.mappers.is_empty() {
            write!(
                f,
                " (states: {}, error mappers: {}, error hook: {})",
                self.states.len(),
                self.mappers.len(),
                self.on_error.is_some()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(p: &str) -> Vec<Seg> {
        parse(p)
    }

    #[test]
    fn matching() {
        assert_eq!(matches(&segs("/a/b"), "/a/b"), Some(vec![]));
        assert_eq!(matches(&segs("/a/b"), "/a/b/"), Some(vec![]));
        assert_eq!(matches(&segs("/a/b"), "/a"), None);
        assert_eq!(matches(&segs("/a/b"), "/a/b/c"), None);
        assert_eq!(
            matches(&segs("/u/:id"), "/u/a%20b"),
            Some(vec![("id".into(), "a b".into())])
        );
        assert_eq!(
            matches(&segs("/f/*p"), "/f/x/y"),
            Some(vec![("p".into(), "x/y".into())])
        );
        assert_eq!(
            matches(&segs("/f/*p"), "/f"),
            Some(vec![("p".into(), "".into())])
        );
        assert_eq!(matches(&segs("/"), "/"), Some(vec![]));
        assert_eq!(matches(&segs("/"), "/x"), None);
    }

    #[test]
    fn prefix_matching_strips_the_prefix() {
        let p = |prefix: &str, path: &'static str| match_prefix(&parse(prefix), path);
        assert_eq!(p("/admin", "/admin/links/x"), Some((vec![], "/links/x")));
        assert_eq!(p("/admin", "/admin"), Some((vec![], "/")));
        assert_eq!(p("/admin", "/admin/"), Some((vec![], "/")));
        assert_eq!(p("/admin", "//admin//x"), Some((vec![], "//x")));
        assert_eq!(p("/admin", "/administrator"), None);
        assert_eq!(p("/admin", "/"), None);
        assert_eq!(p("/a/b", "/a"), None);
        assert_eq!(p("/", "/x"), Some((vec![], "/x")));
        assert_eq!(
            p("/u/:id", "/u/a%20b/posts"),
            Some((vec![("id".into(), "a b".into())], "/posts"))
        );
    }

    #[test]
    fn nested_routers_inherit_states_and_know_their_mount() {
        struct A(u8);
        struct B(u8);
        let inner = Router::new()
            .state(B(2))
            .nest("/deep", Router::new().get("/", |_req| ""));
        let outer = Router::with_state(A(1)).nest("/in/", inner).state(B(9));
        let Entry::Nest(n) = &outer.entries[0] else {
            unreachable!()
        };
        let find = |r: &Router, pick: fn(&Value) -> Option<u8>| r.states.iter().find_map(pick);
        let a = |v: &Value| v.downcast_ref::<A>().map(|a| a.0);
        let b = |v: &Value| v.downcast_ref::<B>().map(|b| b.0);
        // Added after the nest, still inherited; the inner B wins.
        assert_eq!((find(&n.router, a), find(&n.router, b)), (Some(1), Some(2)));
        assert_eq!(n.router.mount, "/in");
        let Entry::Nest(deep) = &n.router.entries[0] else {
            unreachable!()
        };
        assert_eq!(deep.router.mount, "/in/deep");
        assert_eq!(
            (find(&deep.router, a), find(&deep.router, b)),
            (Some(1), Some(2))
        );
        let Entry::Route(r) = &deep.router.entries[0] else {
            unreachable!()
        };
        assert_eq!(deep.router.full_pattern(r), "/in/deep");
    }
}
