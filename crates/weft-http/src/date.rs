//! The `Date` header value, formatted at most once per second per carrier.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub(crate) const DATE_LEN: usize = 29;

std::thread_local! {
    static CACHE: Cell<(u64, [u8; DATE_LEN])> = const { Cell::new((u64::MAX, [0; DATE_LEN])) };
}

/// Appends the current date in IMF-fixdate form to `out`.
///
/// The cache is a carrier thread-local, read and written without any
/// blocking call in between (see weft's thread-local rules).
pub(crate) fn push_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let bytes = CACHE.with(|c| {
        let (cached, bytes) = c.get();
        if cached == secs {
            return bytes;
        }
        let s = httpdate::fmt_http_date(now);
        let mut b = [b' '; DATE_LEN];
        let n = s.len().min(DATE_LEN);
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        c.set((secs, b));
        b
    });
    out.extend_from_slice(&bytes);
}

#[cfg(test)]
mod tests {
    #[test]
    fn date_parses_back() {
        let mut v = Vec::new();
        super::push_date(&mut v);
        let s = String::from_utf8(v).unwrap();
        let t = httpdate::parse_http_date(&s).unwrap();
        let now = std::time::SystemTime::now();
        let diff = now.duration_since(t).unwrap_or_default();
        assert!(diff.as_secs() < 5, "{s}");
    }
}
