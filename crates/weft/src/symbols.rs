//! From return addresses to frames a reader can act on: symbol lookup
//! (cached, up to a bound), trimming of the runtime's own
//! plumbing, and the *first frame outside Weft and std* — the line of user
//! code that called into the blocking function.
//!
//! File and line come from debug info: a release build that should show
//! them needs `debug = "line-tables-only"` (or more) in its profile;
//! without it frames carry function names only.

use crate::unpoison::Unpoison;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// One stack frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Demangled function name (`"<unknown>"` if no symbol).
    pub function: String,
    /// Source file, if debug info has it.
    pub file: Option<String>,
    /// Line number, if debug info has it.
    pub line: Option<u32>,
}

impl Frame {
    /// Whether this frame belongs to Weft, the Rust standard library, the
    /// C library or the context-switch and unwinding plumbing — anything
    /// but the program's own code (or a third-party crate it calls).
    pub fn is_runtime(&self) -> bool {
        // Debug info names inlined frames by their bare name (`sleep`,
        // `slow_handler`), so the source file decides when there is one.
        if let Some(file) = &self.file {
            return is_runtime_file(file);
        }
        let f = self.function.trim_start_matches('<');
        const OWN: [&str; 14] = [
            "std::",
            "core::",
            "alloc::",
            "weft::",
            "weft_http::",
            "weft_pg::",
            "corosensei::",
            "backtrace::",
            "__rust",
            // What `backtrace` symbolizes with.
            "gimli::",
            "addr2line::",
            "object::",
            "rustc_demangle::",
            "miniz_oxide::",
        ];
        OWN.iter().any(|p| f.starts_with(p))
            || f.starts_with("<unknown>")
            // C functions (libc's `clock_nanosleep`, `__libc_recv`, …) have
            // no Rust path: the C library, not the caller that blocked.
            || !f.contains("::")
    }
}

/// Whether a source file belongs to the runtime: the Rust standard library
/// (`/rustc/<hash>/library/…`), C sources (the C library), or the sources
/// of Weft and the crates it switches and unwinds with — in this
/// repository (`…/weft/src/…`) or from a registry (`…/weft-0.1.0/src/…`).
fn is_runtime_file(file: &str) -> bool {
    if file.starts_with("/rustc/") || file.contains("/library/std/src/") {
        return true;
    }
    if !file.ends_with(".rs") {
        return true;
    }
    const CRATES: [&str; 10] = [
        "weft",
        "weft-http",
        "weft-pg",
        "corosensei",
        "backtrace",
        // What `backtrace` symbolizes with: a stall inside them is Weft's
        // own symbolizer at work, not the program's code.
        "gimli",
        "addr2line",
        "object",
        "rustc-demangle",
        "miniz_oxide",
    ];
    crate_of(file).is_some_and(|(name, _)| CRATES.iter().any(|c| is_crate(name, c)))
}

/// The crate directory (`weft`, `weft-0.1.0`) and the path inside its
/// `src/` of a Rust source file.
fn crate_of(file: &str) -> Option<(&str, &str)> {
    let src = file.rfind("/src/")?;
    let dir = &file[..src];
    Some((
        &dir[dir.rfind('/').map_or(0, |i| i + 1)..],
        &file[src + "/src/".len()..],
    ))
}

/// Whether a crate directory is `krate`'s, in this repository (`weft`) or
/// from a registry (`weft-0.1.0`).
fn is_crate(dir: &str, krate: &str) -> bool {
    dir == krate
        || dir
            .strip_prefix(krate)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|v| v.starts_with(|ch: char| ch.is_ascii_digit()))
}

/// Weft's own diagnostics, which read the runtime: dumps, stack samples,
/// symbols, events, metrics.
const DIAGNOSTICS: [&str; 6] = ["dump", "sample", "symbols", "events", "metrics", "panic"];

/// Whether a frame is Weft's own diagnostics at work (a dump, a stack
/// sample, symbol lookup): a stall with such a frame on its stack was
/// caused by Weft looking, not by the program.
pub(crate) fn is_own_diagnostics(f: &Frame) -> bool {
    if let Some((dir, path)) = f.file.as_deref().and_then(crate_of)
        && is_crate(dir, "weft")
    {
        return DIAGNOSTICS
            .iter()
            .any(|m| path.strip_suffix(".rs") == Some(m) || path.starts_with(&format!("{m}/")));
    }
    let name = f.function.trim_start_matches('<');
    DIAGNOSTICS.iter().any(|m| {
        name.strip_prefix("weft::")
            .and_then(|rest| rest.strip_prefix(m))
            .is_some_and(|rest| rest.starts_with("::"))
    })
}

/// Frames parsed back from [`format_stack`]'s text (as kept in an event):
/// function, file and line; the marker of the first user frame dropped.
pub(crate) fn parse_stack(text: &str) -> Vec<Frame> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().strip_prefix("at ")?;
            let l = l.split("   <== ").next().unwrap_or(l).trim_end();
            if let Some(body) = l.strip_suffix(')')
                && let Some(open) = body.rfind(" (")
                && let Some((file, line)) = body[open + 2..].rsplit_once(':')
                && let Ok(line) = line.parse()
            {
                return Some(Frame {
                    function: body[..open].to_string(),
                    file: Some(file.to_string()),
                    line: Some(line),
                });
            }
            Some(Frame {
                function: l.to_string(),
                file: None,
                line: None,
            })
        })
        .collect()
}

/// The index of the innermost frame outside Weft and std, if any.
pub(crate) fn first_user_frame(frames: &[Frame]) -> Option<usize> {
    frames.iter().position(|f| !f.is_runtime())
}

/// `function at file:line` (or just the function) for a frame.
pub(crate) fn describe(f: &Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{} at {file}:{line}", f.function),
        _ => f.function.clone(),
    }
}

/// The frames as indented `at function (file:line)` lines, the first frame
/// outside Weft and std marked.
pub(crate) fn format_stack(frames: &[Frame]) -> String {
    let user = first_user_frame(frames);
    let mut out = String::new();
    for (i, fr) in frames.iter().enumerate() {
        let _ = match (&fr.file, fr.line) {
            (Some(file), Some(line)) => write!(out, "      at {} ({file}:{line})", fr.function),
            _ => write!(out, "      at {}", fr.function),
        };
        if Some(i) == user {
            out.push_str("   <== first frame outside Weft and std");
        }
        out.push('\n');
    }
    out
}

/// An event's `stack` and `call_site` (`events::Event`) from a stack's
/// frames, when there is a stack: the whole stack as [`format_stack`]
/// writes it, and its first frame outside Weft and std as [`describe`]
/// names it.
pub(crate) fn stack_and_call_site(frames: Option<Vec<Frame>>) -> (Option<String>, Option<String>) {
    match frames {
        None => (None, None),
        Some(f) => (
            Some(format_stack(&f)),
            first_user_frame(&f).map(|i| describe(&f[i])),
        ),
    }
}

/// Resolved frames by instruction pointer (code addresses do not change
/// while the process lives), at most [`SYMBOL_CACHE_MAX`] of them: when
/// full, the cache is emptied and fills again with the addresses in use.
/// Per process copy: a `fork` child does not wait on a lock the parent
/// held at the fork (the `backtrace` crate's own lock, which it takes
/// while it resolves, is out of our reach: see `fork.rs`).
fn symbols() -> &'static Mutex<HashMap<usize, Arc<[Frame]>>> {
    static SYMBOLS: crate::fork::PerProcess<Mutex<HashMap<usize, Arc<[Frame]>>>> =
        crate::fork::PerProcess::new();
    SYMBOLS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// How many addresses [`symbols`] keeps (a few MB at most). A program that
/// loads and unloads code, or whose dumps see ever new addresses, would
/// otherwise grow it for ever.
const SYMBOL_CACHE_MAX: usize = if cfg!(test) { 64 } else { 1 << 15 };

/// Resolves stacks of instruction pointers to frames, once per address and
/// per distinct stack.
#[derive(Default)]
pub(crate) struct Resolver {
    stacks: HashMap<Vec<usize>, Vec<Frame>>,
}

/// Starts loading the process's debug info on an OS thread of its own, the
/// first time it is called: the first symbol lookup of a process reads it
/// (about 60 ms here), and a caller that will look symbols up on a carrier
/// soon (a pinned wait, at its end) lets that happen meanwhile, off the
/// carrier. A lookup that comes before the loading is done waits for it
/// (the symbolizer's cache is behind one lock).
pub(crate) fn warm_up() {
    static STARTED: AtomicBool = AtomicBool::new(false);
    if STARTED.swap(true, Ordering::Relaxed) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("weft-symbols".into())
        .spawn(|| drop(resolve(warm_up as *const () as usize + 1)));
    if spawned.is_err() {
        // The caller's own first lookup will load it.
        STARTED.store(false, Ordering::Relaxed);
    }
}

/// The frames of one return address, by the system's symbolizer.
fn resolve(ip: usize) -> Arc<[Frame]> {
    let mut v = Vec::new();
    // `ip` is a return address: look up the call instruction.
    backtrace::resolve((ip.saturating_sub(1)) as *mut std::ffi::c_void, |sym| {
        v.push(Frame {
            function: sym
                .name()
                .map(|n| format!("{n:#}"))
                .unwrap_or_else(|| "<unknown>".into()),
            file: sym.filename().map(|p| p.display().to_string()),
            line: sym.lineno(),
        });
    });
    if v.is_empty() {
        v.push(Frame {
            function: format!("<unknown> @ {ip:#x}"),
            file: None,
            line: None,
        });
    }
    for f in &mut v {
        tidy(f);
    }
    v.into()
}

/// Makes a frame's name say where it is and fit on a line: a bare name
/// (debug info names inlined frames `sleep`, `recv<u64>`) gets the module
/// path of its source file (`weft::thread::park::sleep`), and the
/// runtime's frames (Weft, std, their helpers) lose their generic
/// arguments (`<weft::builder::Spawned<…> as weft::thread::Start>::run`,
/// where the full name ran to hundreds of characters). The program's own
/// frames keep theirs.
fn tidy(f: &mut Frame) {
    // A bare name: no path outside its generic arguments (`wait<weft::…>`).
    let bare = last_segment(&f.function).len() == f.function.len() && !f.function.starts_with('<');
    if bare && let Some(module) = f.file.as_deref().and_then(module_of) {
        f.function = format!("{module}::{}", f.function);
    }
    if f.is_runtime() && f.function.contains('<') {
        f.function = without_generic_arguments(&f.function);
    }
}

/// The module path of a Rust source file: `weft::thread::park` for
/// `…/weft/src/thread/park.rs` (or `…/weft-0.1.0/src/thread/park.rs`),
/// `std::thread::functions` for `/rustc/<hash>/library/std/src/thread/functions.rs`,
/// `app` for `…/app/src/main.rs`; `None` for a file outside a crate's
/// `src/` (a test, an example, C).
fn module_of(file: &str) -> Option<String> {
    let (dir, path) = crate_of(file)?;
    let path = path.strip_suffix(".rs")?;
    // `weft-0.1.0` → `weft`; `weft-http` → `weft_http`.
    let name = match dir.rfind('-') {
        Some(i) if dir[i + 1..].starts_with(|c: char| c.is_ascii_digit()) => &dir[..i],
        _ => dir,
    };
    let mut out = name.replace('-', "_");
    for seg in path.split('/') {
        if !matches!(seg, "lib" | "main" | "mod") {
            out.push_str("::");
            out.push_str(seg);
        }
    }
    Some(out)
}

/// `name` with every generic argument list that follows a name (`Foo<T>`,
/// `recv<u64>`) written `<…>`; a qualified path's own brackets (`<A as
/// B>::f`) stay.
fn without_generic_arguments(name: &str) -> String {
    let b = name.as_bytes();
    let mut out = String::with_capacity(name.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if b[i] == b'<' && i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'<' => depth += 1,
                    // `->` of a function type is no bracket.
                    b'>' if b[j - 1] != b'-' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            out.push_str(&name[copied..i]);
            out.push_str("<…>");
            i = (j + 1).min(b.len());
            copied = i;
            continue;
        }
        i += 1;
    }
    out.push_str(&name[copied..]);
    out
}

impl Resolver {
    /// The frames of `ips` (innermost first), with the runtime's plumbing
    /// trimmed (see [`trim_plumbing`]).
    pub(crate) fn frames(&mut self, ips: &[usize]) -> Vec<Frame> {
        if let Some(f) = self.stacks.get(ips) {
            return f.clone();
        }
        let mut cache = symbols().lock().unpoison();
        let mut out = Vec::new();
        for &ip in ips {
            let frames = match cache.get(&ip) {
                Some(f) => f.clone(),
                None => {
                    let f = resolve(ip);
                    if cache.len() >= SYMBOL_CACHE_MAX {
                        cache.clear();
                    }
                    cache.insert(ip, f.clone());
                    f
                }
            };
            out.extend(frames.iter().cloned());
        }
        let out = trim_plumbing(out);
        self.stacks.insert(ips.to_vec(), out.clone());
        out
    }
}

/// Drops the capture machinery above the park point and the runtime's
/// frames below the thread's entry (the unwinder follows corosensei's link
/// into the carrier's own stack).
fn trim_plumbing(frames: Vec<Frame>) -> Vec<Frame> {
    // Top: everything up to and including the park call itself.
    let top = frames
        .iter()
        .rposition(|f| f.function.contains("park_deadline") || f.function.contains("capture_here"))
        .map_or(0, |i| i + 1);
    let mut v: Vec<Frame> = frames.into_iter().skip(top).collect();
    // Bottom: from weft's spawn glue (the closure that catches panics
    // around the user's function) down.
    if let Some(end) = v.iter().position(|f| {
        let n = f.function.as_str();
        n.contains("coroutine_func")
            || n.contains("stack_init_trampoline")
            || f.file.as_deref().is_some_and(|p| p.contains("corosensei"))
    }) {
        v.truncate(end);
    }
    // Then the spawn closure and the panic-catching wrappers around the
    // user's function (std and weft plumbing at the bottom).
    while v.last().is_some_and(|f| {
        let n = last_segment(&f.function);
        n.starts_with("catch_unwind")
            || n == "__rust_try"
            || n.starts_with("do_call")
            || n.starts_with("call_once")
            || f.function.contains("spawn_unchecked")
            || f.function.contains("Start>::run")
            || f.function.contains("Body::run")
            || f.file.as_deref().is_some_and(|p| {
                p.ends_with("weft/src/builder.rs")
                    || p.ends_with("weft/src/thread/life.rs")
                    || p.ends_with("weft/src/thread/record.rs")
            })
    }) {
        v.pop();
    }
    v
}

/// The last `::` segment of a function name outside generic brackets:
/// `call_once` for `<Box<F, A> as FnOnce<Args>>::call_once`, the name
/// itself for the bare names debug info gives inlined frames.
pub(crate) fn last_segment(function: &str) -> &str {
    let mut depth = 0i32;
    let mut start = 0;
    let bytes = function.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b':' if depth == 0 && i > 0 && bytes[i - 1] == b':' => start = i + 1,
            _ => {}
        }
    }
    &function[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fr(function: &str, file: Option<&str>) -> Frame {
        Frame {
            function: function.into(),
            file: file.map(Into::into),
            line: file.map(|_| 42),
        }
    }

    #[test]
    fn the_first_user_frame_is_past_libc_std_and_weft() {
        let frames = vec![
            fr("clock_nanosleep", None),
            fr("__GI___nanosleep", None),
            fr(
                "std::thread::sleep",
                Some("/rustc/x/library/std/src/thread/mod.rs"),
            ),
            fr(
                "<weft::net::tcp::TcpStream as std::io::Read>::read",
                Some("weft/src/net/tcp.rs"),
            ),
            fr("shortener::handlers::slow", Some("src/handlers.rs")),
            fr(
                "weft_http::server::conn::serve",
                Some("weft-http/src/server.rs"),
            ),
        ];
        assert_eq!(first_user_frame(&frames), Some(4));
        let text = format_stack(&frames);
        let marked: Vec<&str> = text.lines().filter(|l| l.contains("<==")).collect();
        assert_eq!(marked.len(), 1, "{text}");
        assert!(marked[0].contains("shortener::handlers::slow (src/handlers.rs:42)"));
        assert_eq!(
            describe(&frames[4]),
            "shortener::handlers::slow at src/handlers.rs:42"
        );
    }

    #[test]
    fn trait_impls_and_closures_of_user_types_are_user_frames() {
        assert!(!fr("<app::Db as std::io::Read>::read", None).is_runtime());
        assert!(!fr("app::main::{{closure}}", None).is_runtime());
        assert!(fr("<std::io::BufReader<R> as std::io::Read>::read", None).is_runtime());
        assert!(fr("<unknown> @ 0x1234", None).is_runtime());
        assert!(first_user_frame(&[fr("std::thread::sleep", None)]).is_none());
    }

    #[test]
    fn the_symbol_cache_is_bounded() {
        let base = the_symbol_cache_is_bounded as *const () as usize;
        let mut r = Resolver::default();
        for i in 0..SYMBOL_CACHE_MAX + 10 {
            r.frames(&[base + 1 + i]);
            let len = symbols().lock().unpoison().len();
            assert!(len <= SYMBOL_CACHE_MAX, "{len} addresses cached");
        }
        // Still answers after it was emptied.
        assert!(!Resolver::default().frames(&[base + 1]).is_empty());
    }

    #[test]
    fn frames_name_their_module_and_runtime_frames_drop_generics() {
        let mut sleep = fr("sleep", Some("/work/main/crates/weft/src/thread/park.rs"));
        tidy(&mut sleep);
        assert_eq!(sleep.function, "weft::thread::park::sleep");
        let mut recv = fr(
            "recv<u64>",
            Some("/home/u/.cargo/registry/src/index/weft-0.1.0/src/channel.rs"),
        );
        tidy(&mut recv);
        assert_eq!(recv.function, "weft::channel::recv<…>");
        let mut std_sleep = fr(
            "sleep",
            Some("/rustc/abc/library/std/src/thread/functions.rs"),
        );
        tidy(&mut std_sleep);
        assert_eq!(std_sleep.function, "std::thread::functions::sleep");
        let mut handler = fr("slow", Some("/srv/my-app/src/handlers/mod.rs"));
        tidy(&mut handler);
        assert_eq!(handler.function, "my_app::handlers::slow");
        let mut main = fr("main", Some("/srv/app/src/main.rs"));
        tidy(&mut main);
        assert_eq!(main.function, "app::main");
        let mut wait = fr(
            "wait<weft::sync::latch::Node>",
            Some("/work/main/crates/weft/src/sync/waitq.rs"),
        );
        tidy(&mut wait);
        assert_eq!(wait.function, "weft::sync::waitq::wait<…>");
        // Outside a crate's src/ (a test, C): as it was.
        let mut test = fr("worker", Some("/work/main/crates/weft/tests/dump.rs"));
        tidy(&mut test);
        assert_eq!(test.function, "worker");
        let mut run = fr(
            "<weft::builder::Spawned<app::main::{{closure}}, core::result::Result<(), fn() -> u8>> \
             as weft::thread::Start>::run",
            None,
        );
        tidy(&mut run);
        assert_eq!(
            run.function,
            "<weft::builder::Spawned<…> as weft::thread::Start>::run"
        );
        // The program's own frames keep their generic arguments.
        let mut user = fr("app::Pool<app::Db>::get", None);
        tidy(&mut user);
        assert_eq!(user.function, "app::Pool<app::Db>::get");
    }

    #[test]
    fn stacks_parse_back_from_their_text() {
        let frames = vec![
            fr("clock_nanosleep", None),
            fr(
                "std::thread::sleep",
                Some("/rustc/x/library/std/src/thread/functions.rs"),
            ),
            fr("app::handlers::slow::{{closure}}", Some("src/handlers.rs")),
            fr("<fn() as core::ops::FnOnce<()>>::call_once", None),
        ];
        assert_eq!(parse_stack(&format_stack(&frames)), frames);
    }

    #[test]
    fn weft_s_own_diagnostics_are_told_from_the_rest_of_weft() {
        let own = |f: &str, file: Option<&str>| is_own_diagnostics(&fr(f, file));
        assert!(own("frames", Some("/work/main/crates/weft/src/symbols.rs")));
        assert!(own(
            "dump",
            Some("/home/u/.cargo/registry/src/index/weft-0.2.0/src/dump.rs")
        ));
        assert!(own("weft::dump::dump", None));
        assert!(own("<weft::symbols::Resolver>::frames", None));
        assert!(!own("park", Some("/work/main/crates/weft/src/park.rs")));
        assert!(!own("weft::dumpling", None));
        assert!(!own("app::dump", Some("/srv/app/src/dump.rs")));
        // The symbolizer's own crates are not the program's code either.
        assert!(
            fr(
                "parse",
                Some("/home/u/.cargo/registry/src/index/gimli-0.31.1/src/read/abbrev.rs")
            )
            .is_runtime()
        );
        assert!(fr("addr2line::Context::find_frames", None).is_runtime());
    }

    #[test]
    fn last_segments_skip_generic_paths() {
        assert_eq!(
            last_segment("<alloc::boxed::Box<F,A> as core::ops::FnOnce<Args>>::call_once"),
            "call_once"
        );
        assert_eq!(last_segment("std::panicking::catch_unwind"), "catch_unwind");
        assert_eq!(last_segment("do_call"), "do_call");
        assert_eq!(
            last_segment("weft::thread::Builder::spawn_unchecked::{{closure}}"),
            "{{closure}}"
        );
    }

    #[test]
    fn the_source_file_decides_for_bare_inlined_names() {
        let at = |f: &str, file: &str| fr(f, Some(file)).is_runtime();
        assert!(at(
            "sleep",
            "/rustc/59807616/library/std/src/thread/functions.rs"
        ));
        assert!(at(
            "__GI___clock_nanosleep",
            "./time/../sysdeps/unix/sysv/linux/clock_nanosleep.c"
        ));
        assert!(at("park", "/work/main/crates/weft/src/park.rs"));
        assert!(at(
            "serve",
            "/home/u/.cargo/registry/src/index/weft-http-0.1.0/src/server.rs"
        ));
        assert!(at(
            "resume",
            "/home/u/.cargo/registry/src/index/corosensei-0.2.1/src/coroutine.rs"
        ));
        assert!(!at(
            "slow_handler",
            "/work/main/crates/weft/tests/culprit.rs"
        ));
        assert!(!at("handler", "/srv/app/src/main.rs"));
        assert!(!at(
            "query",
            "/home/u/.cargo/registry/src/index/weftish-1.0.0/src/lib.rs"
        ));
        assert!(!at(
            "get",
            "/home/u/.cargo/registry/src/index/ureq-2.9.0/src/agent.rs"
        ));
    }
}
