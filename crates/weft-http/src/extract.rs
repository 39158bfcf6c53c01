//! Typed input and output with serde: [`Request::query_as`] (feature
//! `serde`), [`Request::json`] and [`Json`] (feature `json`, on by
//! default).
//!
//! Extraction errors are [`HttpError`]s that name the field at fault
//! (through `serde_path_to_error`), so a handler that uses `?` answers bad
//! input with a `4xx` that says what was wrong — rendered by the app's
//! error hook like every other error:
//!
//! | input | status |
//! |---|---|
//! | query string that does not fit `T` | `400` |
//! | body without `Content-Type: application/json` (or `…+json`) | `415` |
//! | malformed JSON, trailing data | `400` |
//! | well-formed JSON that does not fit `T` (wrong type, missing field) | `422` |
//! | body over the server's limit / too slow | `413` / `408` |

use serde::de::DeserializeOwned;

use crate::error::HttpError;
use crate::request::Request;
#[cfg(feature = "json")]
use crate::{IntoResponse, Response, request::BodyError};

impl Request<'_> {
    /// Deserializes the query string (`a=1&b=x%20y`, `+` as space) into
    /// `T`; no query is the same as an empty one. Repeated keys fill a
    /// `Vec` field; an `Option` field may be absent. Anything that does not
    /// fit is a `400` naming the parameter.
    ///
    /// (The raw query string stays available as [`Request::query`].)
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use weft_http::{HttpError, Request, Router};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Search { q: String, page: Option<u32>, tag: Vec<String> }
    ///
    /// let router = Router::new().get("/search", |req| -> Result<String, HttpError> {
    ///     let s: Search = req.query_as()?;
    ///     Ok(format!("{} p{} {:?}", s.q, s.page.unwrap_or(1), s.tag))
    /// });
    /// let server = weft_http::serve("127.0.0.1:0", router)?;
    /// let url = format!("http://{}/search", server.local_addr());
    /// let client = weft_http::Client::new();
    /// let r = client.get(&url).query(&[("q", "a&b"), ("tag", "x"), ("tag", "é")]).send()?;
    /// assert_eq!(r.text()?, r#"a&b p1 ["x", "é"]"#);
    /// let r = client.get(&url).query(&[("q", "a"), ("page", "two")]).send()?;
    /// assert_eq!(r.status(), 400);
    /// assert!(r.text()?.contains("page"));
    /// # Ok(()) }
    /// ```
    pub fn query_as<T: DeserializeOwned>(&self) -> Result<T, HttpError> {
        let q = self.query.unwrap_or("");
        let de = serde_html_form::Deserializer::from_bytes(q.as_bytes());
        serde_path_to_error::deserialize(de).map_err(|e| {
            let (field, msg) = field_and_message(&e);
            let err = HttpError::bad_request(format!("invalid query string: {msg}"));
            match field {
                Some(f) => err.with_field(f),
                None => err,
            }
        })
    }

    /// Reads the body and deserializes it as JSON into `T`.
    ///
    /// Errors: `415` unless the request says `Content-Type:
    /// application/json` (or `application/…+json`); `400` for malformed
    /// JSON; `422` for JSON that does not fit `T`, naming the field (e.g.
    /// `items[1].qty`); `413`/`408` when the body is over the limit or too
    /// slow.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use weft_http::{HttpError, Json, Router};
    ///
    /// #[derive(serde::Deserialize, serde::Serialize)]
    /// struct Todo { title: String, done: bool }
    ///
    /// let router = Router::new()
    ///     .post("/todos", |req| -> Result<_, HttpError> {
    ///         let todo: Todo = req.json()?;
    ///         Ok((201, Json(todo)))
    ///     })
    ///     .on_error(HttpError::json_response);
    /// let server = weft_http::serve("127.0.0.1:0", router)?;
    /// let url = format!("http://{}/todos", server.local_addr());
    /// let client = weft_http::Client::new();
    ///
    /// let r = client.post(&url).json(&serde_json::json!({"title": "a", "done": false})).send()?;
    /// assert_eq!(r.status(), 201);
    /// let r = client.post(&url).json(&serde_json::json!({"title": "a", "done": "no"})).send()?;
    /// assert_eq!(r.status(), 422);
    /// let e: serde_json::Value = r.json()?;
    /// assert_eq!(e["field"], "done");
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "json")]
    pub fn json<T: DeserializeOwned>(&mut self) -> Result<T, HttpError> {
        if !self.header("content-type").is_some_and(is_json_type) {
            return Err(HttpError::new(
                415,
                "expected a request with Content-Type: application/json",
            ));
        }
        let body = self.read_body().map_err(|e| {
            let status = match self.body.error {
                Some(BodyError::TooLarge) => 413,
                Some(BodyError::Timeout) => 408,
                _ => 400,
            };
            HttpError::new(status, format!("could not read the request body: {e}"))
        })?;
        let mut de = serde_json::Deserializer::from_slice(&body);
        let e = match serde_path_to_error::deserialize(&mut de) {
            Ok(v) => {
                return match de.end() {
                    Ok(()) => Ok(v),
                    Err(e) => Err(HttpError::bad_request(format!("invalid JSON body: {e}"))),
                };
            }
            Err(e) => e,
        };
        let (field, msg) = field_and_message(&e);
        let status = match e.inner().classify() {
            serde_json::error::Category::Data => 422,
            _ => 400,
        };
        let err = HttpError::new(status, format!("invalid JSON body: {msg}"));
        Err(match field {
            Some(f) => err.with_field(f),
            None => err,
        })
    }
}

#[cfg(feature = "json")]
fn is_json_type(ct: &str) -> bool {
    let mime = ct.split(';').next().unwrap_or("").trim();
    let Some((top, sub)) = mime.split_once('/') else {
        return false;
    };
    top.eq_ignore_ascii_case("application")
        && (sub.eq_ignore_ascii_case("json")
            || sub.len() > 5 && sub[sub.len() - 5..].eq_ignore_ascii_case("+json"))
}

/// The path of the field at fault (`None` at the root) and the error's
/// message. For a missing field serde reports the enclosing object, so the
/// field's own name is taken from serde's message (`missing field `x``).
fn field_and_message<E: std::fmt::Display>(
    e: &serde_path_to_error::Error<E>,
) -> (Option<String>, String) {
    let msg = e.inner().to_string();
    let path = e.path().to_string();
    let mut field = (path != ".").then_some(path);
    if let Some(rest) = msg.strip_prefix("missing field `")
        && let Some(name) = rest.split('`').next()
    {
        field = Some(match field {
            Some(p) => format!("{p}.{name}"),
            None => name.to_owned(),
        });
    }
    let msg = match &field {
        Some(f) if !msg.contains(&format!("`{f}`")) => format!("{f}: {msg}"),
        _ => msg,
    };
    (field, msg)
}

/// A JSON body: as a return value, `200 application/json` with `T`
/// serialized (a serialization failure is a `500`). Axum's `Json`,
/// without the extractor half — for input, use [`Request::json`].
///
/// ```
/// use weft_http::{IntoResponse, Json};
/// let r = Json(serde_json::json!({"id": 7})).into_response();
/// assert_eq!((r.status(), r.header("content-type")), (200, Some("application/json")));
/// let r = (201, Json(vec![1, 2])).into_response();
/// assert_eq!(r.status(), 201);
/// ```
#[cfg(feature = "json")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Json<T>(pub T);

#[cfg(feature = "json")]
impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        match serde_json::to_vec(&self.0) {
            Ok(v) => Response::bytes(v).with_header("Content-Type", "application/json"),
            Err(e) => HttpError::internal(e).into_response(),
        }
    }
}

#[cfg(all(test, feature = "json"))]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/problem+json",
        ] {
            assert!(is_json_type(ok), "{ok}");
        }
        for bad in [
            "text/json",
            "application/jsonx",
            "application/+json",
            "",
            "json",
        ] {
            assert!(!is_json_type(bad), "{bad}");
        }
    }
}
