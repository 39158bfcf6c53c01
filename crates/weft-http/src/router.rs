//! Handlers and a small router with path parameters, shared state and
//! an error hook.
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
//! [`Router::on_error`], so a JSON API answers JSON everywhere.

use std::any::Any;
use std::sync::Arc;

use crate::error::{HttpError, render};
use crate::request::{Request, percent_decode};
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

/// Values given to [`Router::with_state`] / [`Router::state`], found by
/// type.
pub(crate) type States = Arc<Vec<Arc<dyn Any + Send + Sync>>>;

#[derive(Debug)]
enum Seg {
    Lit(String),
    Param(String),
    /// `*name`: the rest of the path (possibly empty).
    Rest(String),
}

struct Route {
    method: String,
    segs: Vec<Seg>,
    handler: Box<dyn Handler>,
}

/// Routes requests by method and path pattern, with shared state and an
/// error hook.
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
    routes: Vec<Route>,
    fallback: Option<Box<dyn Handler>>,
    /// Shared with every request (one `Arc` clone per request).
    states: States,
    on_error: Option<ErrorHook>,
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
    /// same type). A nested router with states of its own shows its
    /// handlers only its own.
    pub fn state<S: Send + Sync + 'static>(mut self, state: S) -> Router {
        let states = Arc::make_mut(&mut self.states);
        states.retain(|s| !s.is::<S>());
        states.push(Arc::new(state));
        self
    }

    /// Sets the hook that renders every error answer: the router's `404`
    /// and `405`, the server's own (`400`, `408`, `413`, `417`, `431`, a
    /// panic's `500`, `503`) when this router is the server's handler, and
    /// the [`HttpError`]s / [`Response::error`]s its handlers return. The
    /// hook shapes body and headers; the status stays the error's, and
    /// headers of the answer such as `Allow` are kept. A hook that panics
    /// falls back to plain text.
    ///
    /// ```
    /// use weft_http::{HttpError, Response, Router};
    /// # #[cfg(feature = "json")]
    /// let api = Router::new().on_error(HttpError::json_response);
    /// let custom = Router::new().on_error(|e| {
    ///     if e.status() >= 500 {
    ///         eprintln!("error: {e}"); // with the cause, which the client does not see
    ///     }
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

    /// Adds a route with any [`Handler`] (e.g. a nested [`Router`]).
    pub fn route_handler(mut self, method: &str, pattern: &str, handler: impl Handler) -> Router {
        self.add(method, pattern, Box::new(handler));
        self
    }

    fn add(&mut self, method: &str, pattern: &str, handler: Box<dyn Handler>) {
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
        self.routes.push(Route {
            method: method.to_owned(),
            segs,
            handler,
        });
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

/// Path segments, ignoring empty ones from repeated or trailing slashes
/// (so `/a/`, `//a` and `/a` are the same path).
fn split_path(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

fn matches(segs: &[Seg], path: &str) -> Option<Vec<(String, String)>> {
    let mut params = Vec::new();
    let mut parts = split_path(path);
    for (i, seg) in segs.iter().enumerate() {
        match seg {
            Seg::Rest(name) => {
                // The remainder of the path after the matched segments.
                let rest: Vec<&str> = parts.collect();
                let _ = i;
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

impl Handler for Router {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        let resp = self.route_request(req);
        match &self.on_error {
            Some(hook) if resp.error.is_some() => render(resp, hook),
            _ => resp,
        }
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

    fn route_request(&self, req: &mut Request<'_>) -> Response {
        let method = req.method();
        let mut allowed: Vec<&str> = Vec::new();
        let mut head_fallback = None;
        for route in &self.routes {
            let Some(params) = matches(&route.segs, req.path()) else {
                continue;
            };
            if route.method == method {
                req.set_params(params);
                self.set_states(req);
                return route.handler.handle(req);
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
            return route.handler.handle(req);
        }
        if allowed.is_empty() {
            return match &self.fallback {
                Some(f) => {
                    self.set_states(req);
                    f.handle(req)
                }
                None => Response::error(404),
            };
        }
        if allowed.contains(&"GET") && !allowed.contains(&"HEAD") {
            allowed.push("HEAD");
        }
        let allow = allowed.join(", ");
        HttpError::new(
            405,
            format!("method {method} is not allowed here (allowed: {allow})"),
        )
        .with_header("Allow", allow)
        .into_response()
    }
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut l = f.debug_list();
        for r in &self.routes {
            l.entry(&format_args!("{} {:?}", r.method, r.segs));
        }
        l.finish()?;
        if !self.states.is_empty() || self.on_error.is_some() {
            write!(
                f,
                " (states: {}, error hook: {})",
                self.states.len(),
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
        let mut r = Router::new();
        r.add("GET", p, Box::new(|_: &mut Request<'_>| Response::ok()));
        r.routes.pop().unwrap().segs
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
}
