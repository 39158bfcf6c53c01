//! Panic messages that name the virtual thread.
//!
//! Rust's default panic hook names the OS thread: on a carrier that is
//! `thread 'weft-carrier-0' panicked at …`, which says nothing about which
//! request failed. When the first runtime starts, Weft wraps the process's
//! panic hook once:
//!
//! - if the hook in place is Rust's default, a panic on a virtual thread
//!   prints `virtual thread 'http 127.0.0.1:5123' (#812) panicked at
//!   src/handlers.rs:42:9:` and the message, then the stack (innermost
//!   first, the first frame outside Weft and std marked) when
//!   `RUST_BACKTRACE` asks for one, or the usual note the first time when it
//!   does not. Panics on OS threads go to the default hook unchanged.
//! - if the program installed its own hook before that, Weft calls it for
//!   every panic and prints nothing itself: the program's hook is kept (it
//!   can name the thread with [`crate::current`]).
//!
//! A program that installs its hook *after* the runtime started replaces
//! Weft's, as `std::panic::set_hook` does; `WEFT_PANIC_HOOK=0` leaves the
//! process's hook alone altogether.
//!
//! Telling Rust's default hook from a program's: `take_hook` hands back the
//! hook in place and leaves the default one there, so a second `take_hook`
//! returns the default hook for sure. The two boxes are compared as trait
//! objects (data pointer and vtable). A false "different" only means the
//! default hook keeps printing the carrier's name, as it would without Weft.

use std::io::Write as _;
use std::panic::PanicHookInfo;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

type Hook = Box<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;

/// Wraps the process's panic hook (once per process).
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var("WEFT_PANIC_HOOK").is_ok_and(|v| v == "0" || v == "off") {
            return;
        }
        let prev: Hook = std::panic::take_hook();
        let default: Hook = std::panic::take_hook();
        let prev_is_default = std::ptr::eq(
            &*prev as *const (dyn Fn(&PanicHookInfo<'_>) + Sync + Send),
            &*default as *const (dyn Fn(&PanicHookInfo<'_>) + Sync + Send),
        );
        drop(default);
        std::panic::set_hook(Box::new(move |info| {
            if prev_is_default && let Some(thread) = crate::thread::current_virtual() {
                let (name, id) = crate::thread::Thread::peek_name_id(thread);
                report(info, name.unwrap_or(""), id);
            } else {
                prev(info);
            }
        }));
    });
}

/// What Rust's default hook prints, with the virtual thread's name and id.
fn report(info: &PanicHookInfo<'_>, name: &str, id: u64) {
    let msg = message(info);
    let mut out = format!("\nvirtual thread '{name}' (#{id}) panicked at ");
    match info.location() {
        Some(l) => out.push_str(&format!("{}:{}:{}", l.file(), l.line(), l.column())),
        None => out.push_str("<unknown location>"),
    }
    out.push_str(":\n");
    out.push_str(msg);
    out.push('\n');
    match std::env::var("RUST_BACKTRACE").as_deref() {
        Ok("0") | Err(_) => {
            static NOTED: AtomicBool = AtomicBool::new(false);
            if !NOTED.swap(true, Ordering::Relaxed) {
                out.push_str(
                    "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
                );
            }
        }
        Ok(_) => {
            let mut ips = Vec::with_capacity(32);
            backtrace::trace(|f| {
                ips.push(f.ip() as usize);
                ips.len() < crate::sample::MAX_FRAMES
            });
            let frames = crate::symbols::Resolver::default().frames(&ips);
            // Drop the hook and std's panic machinery above the panic site:
            // everything up to the innermost-but-last frame of
            // `{core,std}::panicking` above the first frame outside Weft and std.
            let user = crate::symbols::first_user_frame(&frames).unwrap_or(frames.len());
            let top = frames[..user]
                .iter()
                .rposition(|f| {
                    f.function.contains("panicking::")
                        || f.function.contains("rust_begin_unwind")
                        || f.file.as_deref().is_some_and(|p| {
                            p.ends_with("/src/panicking.rs") && p.contains("library/")
                        })
                })
                .map_or(0, |i| i + 1);
            out.push_str("stack backtrace (virtual thread, innermost first):\n");
            out.push_str(&crate::symbols::format_stack(&frames[top..]));
        }
    }
    // One write, so lines of concurrent panics do not interleave.
    let _ = std::io::stderr().lock().write_all(out.as_bytes());
}

/// The panic's message, as the default hook shows it.
fn message<'a>(info: &'a PanicHookInfo<'_>) -> &'a str {
    crate::thread::panic_message(info.payload())
}
