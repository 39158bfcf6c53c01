//! What a thread says it is doing ([`set_activity`]), shown in dumps.
//!
//! The text lives in the thread's record (`VThread::activity`), written by
//! the thread itself and read by a dump under a lock never held across a
//! park.

use super::current::{current_virtual, with_os_thread};
use super::record::VThread;

/// How many bytes of an activity [`set_activity`] keeps.
pub const MAX_ACTIVITY_LEN: usize = 256;

/// Says what the calling thread is doing, for thread dumps: a server sets
/// the request in progress (`"GET /slow"`), a worker the job it runs. The
/// dump shows it on the thread's line (`doing: GET /slow`);
/// `set_activity("")` clears it.
///
/// Cheap enough to call per request: the text is formatted straight into a
/// buffer the thread keeps (no allocation once it has grown; pass
/// `format_args!("{method} {path}")` rather than a `format!`ed string),
/// under a lock only a dump contends for. Text past [`MAX_ACTIVITY_LEN`] bytes is cut at a
/// character boundary and ends in `…`, so the dump shows that it was cut.
///
/// # Examples
///
/// ```
/// weft::spawn(|| {
///     weft::set_activity("GET /orders/42");
///     let me = weft::current().id();
///     let dump = weft::dump();
///     assert_eq!(dump.thread(me).unwrap().activity.as_deref(), Some("GET /orders/42"));
///     weft::set_activity("");
/// })
/// .join()
/// .unwrap();
/// ```
pub fn set_activity(what: impl std::fmt::Display) {
    let apply = |thread: &VThread| {
        // Formatted before the lock is taken: `what`'s `Display` is the
        // caller's code, which may block or park, and the monitor reads
        // the activity of a thread that holds its carrier.
        let mut text = String::new();
        let mut w = Capped {
            buf: &mut text,
            cut: false,
        };
        let _ = std::fmt::Write::write_fmt(&mut w, format_args!("{what}"));
        if w.cut {
            text.push('…');
        }
        let mut a = thread
            .rare
            .get_or_init(Box::default)
            .activity
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *a = text;
    };
    match current_virtual() {
        Some(thread) => apply(thread),
        None => with_os_thread(|t| apply(&t.inner)),
    }
}

/// A writer that keeps the first [`MAX_ACTIVITY_LEN`] bytes (less room for
/// the `…` that marks a cut) and drops the rest.
struct Capped<'a> {
    buf: &'a mut String,
    cut: bool,
}

impl std::fmt::Write for Capped<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.cut {
            return Ok(());
        }
        let room = MAX_ACTIVITY_LEN - self.buf.len();
        if s.len() <= room {
            self.buf.push_str(s);
        } else {
            // Leave room for the mark; earlier pieces may have to give some.
            let keep = MAX_ACTIVITY_LEN - '…'.len_utf8();
            if self.buf.len() > keep {
                let mut end = keep;
                while !self.buf.is_char_boundary(end) {
                    end -= 1;
                }
                self.buf.truncate(end);
            } else {
                let mut end = keep - self.buf.len();
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                self.buf.push_str(&s[..end]);
            }
            self.cut = true;
        }
        Ok(())
    }
}

/// The activity a thread last set, if any, unless its lock is taken at
/// this moment (by `set_activity` swapping in a new one, or by another
/// reader): for the monitor, which must not wait.
pub(crate) fn try_activity_of(thread: &VThread) -> Option<String> {
    let a = match thread.rare.get()?.activity.try_lock() {
        Ok(a) => a,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return None,
    };
    (!a.is_empty()).then(|| a.clone())
}

/// The activity a thread last set, if any.
pub(crate) fn activity_of(thread: &VThread) -> Option<String> {
    let a = thread
        .rare
        .get()?
        .activity
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    (!a.is_empty()).then(|| a.clone())
}
