//! The error log ([`ServerConfig::error_log`](super::ServerConfig::error_log)):
//! one line on stderr per `5xx` error answer to a request, written after
//! the response. Called by request processing with the error the hook
//! rendered.

use std::fmt::Write as _;
use std::io::Write as _;

use crate::error::{HandlerPanic, HttpError};

/// Writes the line for `err` (a `5xx` answer) to stderr in one write, so
/// that the lines of concurrent requests do not interleave.
#[cold]
pub(super) fn log_error(err: &HttpError) {
    let mut line = error_line(err);
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `weft-http: GET /links/:code (GET /links/x): 500 Internal Server
/// Error: cause` — the request (route pattern, else the path; its
/// activity) when known, then the error as it displays, except that a
/// panic whose hook recorded it (its location is known) is named by its
/// location only: the panic hook has printed its message.
pub(super) fn error_line(err: &HttpError) -> String {
    let mut line = String::from("weft-http: ");
    if let Some(r) = err.request() {
        let route = r.route().unwrap_or(r.path());
        let _ = write!(line, "{} {route} ({}): ", r.method(), r.activity());
    }
    let panic = err
        .source()
        .and_then(|s| s.downcast_ref::<HandlerPanic>())
        .and_then(|p| p.location());
    match panic {
        Some(location) => {
            let _ = write!(
                line,
                "{} {}: handler panicked at {location} (its message is in the panic report above)",
                err.status(),
                err.message()
            );
        }
        None => {
            let _ = write!(line, "{err}");
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_named_by_its_location_and_other_causes_in_full() {
        let p = HandlerPanic {
            message: "boom".into(),
            location: Some("src/x.rs:1:2".into()),
        };
        let line = error_line(&HttpError::from_status(500).with_source(p));
        assert_eq!(
            line,
            "weft-http: 500 Internal Server Error: handler panicked at src/x.rs:1:2 \
             (its message is in the panic report above)"
        );
        assert!(!line.contains("boom"));
        // Unknown location (the hook was replaced): the message, once.
        let p = HandlerPanic {
            message: "boom".into(),
            location: None,
        };
        let line = error_line(&HttpError::from_status(500).with_source(p));
        assert_eq!(
            line,
            "weft-http: 500 Internal Server Error: handler panicked: boom"
        );
        let line = error_line(&HttpError::from(std::io::Error::other("disk on fire")));
        assert_eq!(line, "weft-http: 500 Internal Server Error: disk on fire");
    }
}
