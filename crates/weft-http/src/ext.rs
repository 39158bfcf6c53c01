//! `?` with a message of the application's own: [`OptionExt`] (a missing
//! value is a `404`) and [`ResultExt`] (an error keeps the status `?`
//! would give it, with the application's words for the client).
//!
//! # Design
//!
//! Without these, a handler either lets `?` pick status *and* message (a
//! unique violation answers `409 Conflict`, nothing more), or builds the
//! whole [`HttpError`] itself in a `map_err` and so repeats, at each call
//! site, the mapping of error types that lives in one place
//! (`error.rs`'s `classify`, [`Router::map_error`](crate::Router::map_error)).
//! [`ResultExt::message_on`] keeps the mapping and replaces only the
//! message, and only for the status the call site knows how to word: the
//! same insert that fails with `409` when the code is taken fails with
//! `503` while the database is down, and must not then tell the client
//! that the code is taken.

use std::borrow::Cow;

use crate::error::HttpError;

/// A missing value as a `404` error answer, for `?`.
///
/// ```
/// use weft_http::{HttpError, OptionExt};
///
/// fn title(id: u32) -> Result<&'static str, HttpError> {
///     let found = (id == 1).then_some("first");
///     found.or_not_found(format!("no bookmark {id}"))
/// }
/// assert_eq!(title(1).unwrap(), "first");
/// let e = title(2).unwrap_err();
/// assert_eq!((e.status(), e.message()), (404, "no bookmark 2"));
/// ```
///
/// A handler may also return the `Option` itself: `None` answers `404
/// Not Found` ([`IntoResponse`](crate::IntoResponse) for `Option`).
pub trait OptionExt<T> {
    /// `Some(t)` as `Ok(t)`; `None` as a `404` with `message` for the
    /// client.
    fn or_not_found(self, message: impl Into<Cow<'static, str>>) -> Result<T, HttpError>;
}

impl<T> OptionExt<T> for Option<T> {
    fn or_not_found(self, message: impl Into<Cow<'static, str>>) -> Result<T, HttpError> {
        self.ok_or_else(|| HttpError::not_found(message))
    }
}

/// An error converted as `?` converts it, worded by the call site.
///
/// ```
/// use weft_http::{HttpError, ResultExt};
///
/// fn catalogue(status: u16) -> Result<Vec<u8>, HttpError> {
///     // An I/O error: `?` makes it a `500` that keeps the cause.
///     std::fs::read("/nonexistent/catalogue").message_on(status, "the catalogue is missing")
/// }
/// let e = catalogue(500).unwrap_err();
/// assert_eq!((e.status(), e.message()), (500, "the catalogue is missing"));
/// assert!(e.source().is_some()); // the cause, for the log
/// // Worded only for the status it was meant for.
/// let e = catalogue(409).unwrap_err();
/// assert_eq!((e.status(), e.message()), (500, "Internal Server Error"));
/// ```
///
/// With feature `pg`, a weft-pg unique violation is a `409`, so
/// `db.execute(insert, &[&code]).message_on(409, format!("code {code} is taken"))?`
/// words it without a [`Router::map_error`](crate::Router::map_error).
pub trait ResultExt<T> {
    /// `Ok(t)` as is; an error converted into an [`HttpError`] as `?`
    /// would, with `message` for the client if its status is `status`
    /// (other statuses keep their own message). The cause is kept for
    /// the logs, and a [`Router::map_error`](crate::Router::map_error)
    /// does not map it again: the call site has decided.
    fn message_on(self, status: u16, message: impl Into<Cow<'static, str>>)
    -> Result<T, HttpError>;
}

impl<T, E: Into<HttpError>> ResultExt<T> for Result<T, E> {
    fn message_on(
        self,
        status: u16,
        message: impl Into<Cow<'static, str>>,
    ) -> Result<T, HttpError> {
        self.map_err(|e| {
            let e: HttpError = e.into();
            if e.status != status {
                return e;
            }
            let mut e = e.with_message(message);
            e.converted = false;
            e
        })
    }
}
