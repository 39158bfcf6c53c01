//! The `Date` header value, formatted at most once per second for the
//! whole process.
//!
//! One cache for every thread: a virtual thread (one per connection) has
//! thread-locals of its own, so a thread-local cache would format the date
//! once per second per *connection*. The cache is a sequence lock over four
//! words: readers copy them and check that no writer was in between; the
//! first thread to see a new second writes them; a reader that meets a
//! writer formats the date itself.

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub(crate) const DATE_LEN: usize = 29;

/// Even: the words are stable; odd: a writer is storing them.
static SEQ: AtomicU64 = AtomicU64::new(0);
/// The second the words hold (`u64::MAX`: none yet).
static SECS: AtomicU64 = AtomicU64::new(u64::MAX);
static WORDS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

fn cached(secs: u64) -> Option<[u8; DATE_LEN]> {
    let s1 = SEQ.load(Ordering::Acquire);
    if s1 & 1 == 1 || SECS.load(Ordering::Relaxed) != secs {
        return None;
    }
    let mut buf = [0u8; 32];
    for (chunk, w) in buf.chunks_exact_mut(8).zip(&WORDS) {
        chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
    }
    // The loads above happen before the re-check (seqlock reader).
    fence(Ordering::Acquire);
    if SEQ.load(Ordering::Relaxed) != s1 {
        return None;
    }
    let mut out = [0u8; DATE_LEN];
    out.copy_from_slice(&buf[..DATE_LEN]);
    Some(out)
}

fn store(secs: u64, date: &[u8; DATE_LEN]) {
    let s = SEQ.load(Ordering::Relaxed);
    if s & 1 == 1
        || SEQ
            .compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        return; // another writer has it
    }
    // The odd sequence is visible before any word changes (seqlock writer).
    fence(Ordering::Release);
    let mut buf = [b' '; 32];
    buf[..DATE_LEN].copy_from_slice(date);
    for (chunk, w) in buf.chunks_exact(8).zip(&WORDS) {
        w.store(
            u64::from_ne_bytes(chunk.try_into().expect("8 bytes")),
            Ordering::Relaxed,
        );
    }
    SECS.store(secs, Ordering::Relaxed);
    SEQ.store(s + 2, Ordering::Release);
}

/// Appends the current date in IMF-fixdate form to `out`.
pub(crate) fn push_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let bytes = cached(secs).unwrap_or_else(|| {
        let s = httpdate::fmt_http_date(now);
        let mut b = [b' '; DATE_LEN];
        let n = s.len().min(DATE_LEN);
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        store(secs, &b);
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

    /// Readers racing a writer never see a torn date: every value read is
    /// one a writer stored whole.
    #[test]
    fn readers_never_see_a_torn_date() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = AtomicBool::new(false);
        let dates: Vec<[u8; super::DATE_LEN]> = (0..4u8)
            .map(|i| {
                let mut d = [b'a' + i; super::DATE_LEN];
                d[0] = b'0' + i;
                d
            })
            .collect();
        std::thread::scope(|s| {
            s.spawn(|| {
                for k in 0..200_000u64 {
                    super::store(k, &dates[(k % 4) as usize]);
                }
                stop.store(true, Ordering::SeqCst);
            });
            for _ in 0..2 {
                s.spawn(|| {
                    while !stop.load(Ordering::SeqCst) {
                        let k = super::SECS.load(Ordering::Relaxed);
                        if let Some(d) = super::cached(k) {
                            // Or a real date, stored by a test running
                            // beside this one.
                            let real = std::str::from_utf8(&d)
                                .is_ok_and(|t| httpdate::parse_http_date(t.trim_end()).is_ok());
                            assert!(dates.contains(&d) || real, "torn: {d:?}");
                        }
                    }
                });
            }
        });
    }
}
