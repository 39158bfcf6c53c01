//! Handlers and a small router with path parameters.

use std::sync::Arc;

use crate::request::{Request, percent_decode};
use crate::response::Response;

/// Something that answers requests. Implemented for every
/// `Fn(&mut Request) -> Response + Send + Sync + 'static` closure and for
/// [`Router`].
///
/// Handlers are plain blocking code: they may sleep, lock, read sockets and
/// call other services. In [`ThreadMode::Virtual`](crate::ThreadMode) each
/// connection runs on its own virtual thread, so a blocking handler parks
/// only that thread. A panic in a handler becomes a `500` for that request.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request.
    fn handle(&self, req: &mut Request<'_>) -> Response;
}

impl<F> Handler for F
where
    F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
{
    fn handle(&self, req: &mut Request<'_>) -> Response {
        self(req)
    }
}

impl<H: Handler + ?Sized> Handler for Arc<H> {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        (**self).handle(req)
    }
}

impl Handler for Box<dyn Handler> {
    fn handle(&self, req: &mut Request<'_>) -> Response {
        (**self).handle(req)
    }
}

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

/// Routes requests by method and path pattern.
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
#[derive(Default)]
pub struct Router {
    routes: Vec<Route>,
    fallback: Option<Box<dyn Handler>>,
}

impl Router {
    /// An empty router (everything is 404).
    pub fn new() -> Router {
        Router::default()
    }

    /// Adds a route for `method` (e.g. `"PATCH"`) and `pattern`.
    ///
    /// # Panics
    /// If the pattern does not start with `/` or has `*name` before its
    /// last segment.
    pub fn route<F>(mut self, method: &str, pattern: &str, handler: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
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
    pub fn get<F>(self, pattern: &str, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.route("GET", pattern, f)
    }

    /// Adds a `POST` route.
    pub fn post<F>(self, pattern: &str, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.route("POST", pattern, f)
    }

    /// Adds a `PUT` route.
    pub fn put<F>(self, pattern: &str, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.route("PUT", pattern, f)
    }

    /// Adds a `DELETE` route.
    pub fn delete<F>(self, pattern: &str, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.route("DELETE", pattern, f)
    }

    /// Adds a `PATCH` route.
    pub fn patch<F>(self, pattern: &str, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
    {
        self.route("PATCH", pattern, f)
    }

    /// Answers requests that match no route (instead of `404`).
    pub fn fallback<F>(mut self, f: F) -> Router
    where
        F: Fn(&mut Request<'_>) -> Response + Send + Sync + 'static,
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
        let method = req.method();
        let mut allowed: Vec<&str> = Vec::new();
        let mut head_fallback = None;
        for route in &self.routes {
            let Some(params) = matches(&route.segs, req.path()) else {
                continue;
            };
            if route.method == method {
                req.set_params(params);
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
            return route.handler.handle(req);
        }
        if allowed.is_empty() {
            return match &self.fallback {
                Some(f) => f.handle(req),
                None => Response::error(404),
            };
        }
        if allowed.contains(&"GET") && !allowed.contains(&"HEAD") {
            allowed.push("HEAD");
        }
        Response::error(405).with_header("Allow", allowed.join(", "))
    }
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut l = f.debug_list();
        for r in &self.routes {
            l.entry(&format_args!("{} {:?}", r.method, r.segs));
        }
        l.finish()
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
