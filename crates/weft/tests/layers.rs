//! The module graph of `weft` has no cycle through diagnostics and no cycle
//! larger than a known mutual pair.
//!
//! Reads `src/**/*.rs`, takes every `crate::module` path (and `crate::Name`
//! re-exported at the crate root, resolved through `lib.rs`) outside
//! comments, string literals and `#[cfg(test)]` modules, and builds the
//! graph of top-level modules (`sched/carrier.rs` counts as `sched`). Then:
//!
//! 1. no strongly connected component holds a diagnostics module together
//!    with anything else (diagnostics only read the layers below);
//! 2. no component is larger than 3 modules;
//! 3. every component of more than one module is one of [`ALLOWED_CYCLES`]:
//!    a new cycle fails this test until it is broken or argued for (in
//!    ARCHITECTURE.md, "Layers") and listed here;
//! 4. any other module names a diagnostics module only through
//!    [`ALLOWED_DIAGNOSTIC_EDGES`] (recording an event; see ARCHITECTURE.md).
//!
//! `WEFT_PRINT_LAYERS=1 cargo test -p weft --test layers -- --nocapture`
//! prints the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Modules that only read the rest of the runtime.
const DIAGNOSTICS: &[&str] = &["dump", "metrics", "events", "sample", "symbols"];

/// Cycles we keep, each one concept seen from two sides.
const ALLOWED_CYCLES: &[&[&str]] = &[
    // Who runs (the scheduler) and what is run (the virtual-thread record):
    // a carrier mounts records; a record parks by switching to its carrier.
    &["sched", "thread"],
    // A runtime and spawning onto it: `Runtime::spawn` is `Builder::spawn_on`.
    &["builder", "runtime"],
];

/// Edges from the rest of the runtime into a diagnostics module: the scheduler's
/// monitor and the pinned park record events, sampling and symbolising the
/// stack that goes into them. `events`, `sample` and `symbols` are leaves:
/// they read nothing of the runtime back.
const ALLOWED_DIAGNOSTIC_EDGES: &[(&str, &str)] = &[
    ("sched", "events"),
    ("sched", "sample"),
    ("sched", "symbols"),
    ("thread", "events"),
    ("thread", "sample"),
    ("thread", "symbols"),
    // Starting a runtime installs the SIGQUIT handler that prints a dump
    // (like the JVM's); the runtime never calls into a dump otherwise.
    ("runtime", "dump"),
];

type Graph = BTreeMap<String, BTreeSet<String>>;

/// `src` with comments and the contents of string and char literals
/// removed (kept: code, and the quotes of string literals).
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (i == 0 || !is_ident(b[i - 1]))
        {
            // Raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c as char);
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            out.push_str("\"\"");
            i = j + close.len();
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' && (b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\')) {
            // A char literal ('x', '\n', '\''), not a lifetime.
            i += 1;
            if b[i] == b'\\' {
                i += 1;
            }
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            // Copy one UTF-8 character.
            let ch = src[i..].chars().next().expect("in bounds");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `code` without the `#[cfg(test)] mod name { … }` items.
fn drop_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let t = after.trim_start();
        let is_mod = t.starts_with("mod ") || t.starts_with("pub(crate) mod ");
        match (is_mod, t.find(['{', ';'])) {
            (true, Some(open)) if t.as_bytes()[open] == b'{' => {
                let mut depth = 0;
                let mut end = t.len();
                for (k, ch) in t.char_indices().skip(open) {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &t[end..];
            }
            _ => {
                out.push_str("#[cfg(test)]");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Names that follow `prefix::` in `code`: `prefix::a`, and each top-level
/// name of `prefix::{a, b::c, d}`.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let b = code.as_bytes();
    let pat = format!("{prefix}::");
    let mut names = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find(&pat) {
        let at = from + k;
        from = at + pat.len();
        if at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b'$' || b[at - 1] == b':') {
            continue;
        }
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            let mut at_item_start = true;
            for ch in group.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => {
                        if !item.is_empty() {
                            names.push(std::mem::take(&mut item));
                        }
                        at_item_start = true;
                        continue;
                    }
                    _ => {}
                }
                if depth == 1 && at_item_start {
                    if ch.is_alphanumeric() || ch == '_' {
                        item.push(ch);
                        continue;
                    }
                    if !item.is_empty() {
                        names.push(std::mem::take(&mut item));
                        at_item_start = false;
                    }
                }
            }
            if !item.is_empty() {
                names.push(item);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.push(name);
            }
        }
    }
    names
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src dir") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Top-level modules, and what each crate-root re-export resolves to.
fn roots(lib: &str) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let code = strip(lib);
    let mut modules = BTreeSet::new();
    let mut reexports = BTreeMap::new();
    for stmt in code.split(';') {
        let s = stmt.trim();
        let words: Vec<&str> = s.split_whitespace().collect();
        if let Some(i) = words.iter().position(|w| *w == "mod")
            && let Some(name) = words.get(i + 1)
        {
            modules.insert(name.to_string());
        }
        if let Some(at) = s.find("use ") {
            let path = s[at + 4..].trim();
            let Some((module, rest)) = path.split_once("::") else {
                continue;
            };
            let module = module.trim().to_string();
            for name in paths_after(&format!("x::{rest}"), "x") {
                reexports.insert(name, module.clone());
            }
        }
    }
    (modules, reexports)
}

fn module_graph(src: &Path) -> Graph {
    let (modules, reexports) =
        roots(&std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs"));
    let resolve = |name: &str| -> Option<String> {
        if modules.contains(name) {
            Some(name.to_string())
        } else {
            reexports.get(name).cloned()
        }
    };
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut g = Graph::new();
    for m in &modules {
        g.entry(m.clone()).or_default();
    }
    for f in files {
        let rel = f.strip_prefix(src).expect("under src");
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts == ["lib.rs"] {
            continue;
        }
        let module = parts[0].trim_end_matches(".rs").to_string();
        let top_file = parts.len() == 1 || (parts.len() == 2 && parts[1] == "mod.rs");
        let code = drop_test_modules(&strip(&std::fs::read_to_string(&f).expect("read")));
        let mut names = paths_after(&code, "crate");
        if top_file {
            // In a top-level module's own file, `super::` is the crate root.
            names.extend(paths_after(&code, "super"));
        }
        let deps = g.entry(module.clone()).or_default();
        for n in names {
            if let Some(d) = resolve(&n)
                && d != module
            {
                deps.insert(d);
            }
        }
    }
    g
}

/// Strongly connected components (Tarjan), each sorted.
fn sccs(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        if let Some(ws) = t.g.get(v) {
            for w in ws {
                let w = w.as_str();
                if !t.index.contains_key(w) {
                    if !t.g.contains_key(w) {
                        continue;
                    }
                    visit(t, w);
                    let l = t.low[w].min(t.low[v]);
                    t.low.insert(v, l);
                } else if t.on.contains(w) {
                    let l = t.index[w].min(t.low[v]);
                    t.low.insert(v, l);
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            loop {
                let w = t.stack.pop().expect("on stack");
                t.on.remove(w);
                c.push(w.to_string());
                if w == v {
                    break;
                }
            }
            c.sort();
            t.out.push(c);
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// Everything wrong with `g`, one line each.
fn violations(g: &Graph) -> Vec<String> {
    let mut bad = Vec::new();
    for c in sccs(g).into_iter().filter(|c| c.len() > 1) {
        if c.iter().any(|m| DIAGNOSTICS.contains(&m.as_str())) {
            bad.push(format!("cycle through diagnostics: {c:?}"));
        }
        if c.len() > 3 {
            bad.push(format!("cycle of {} modules: {c:?}", c.len()));
        }
        if !ALLOWED_CYCLES.iter().any(|a| *a == c.as_slice()) {
            bad.push(format!("new cycle: {c:?}"));
        }
    }
    for (from, deps) in g {
        if DIAGNOSTICS.contains(&from.as_str()) {
            continue;
        }
        for to in deps.iter().filter(|d| DIAGNOSTICS.contains(&d.as_str())) {
            if !ALLOWED_DIAGNOSTIC_EDGES.contains(&(from.as_str(), to.as_str())) {
                bad.push(format!("{from} uses diagnostics module {to}"));
            }
        }
    }
    bad
}

#[test]
fn no_new_cycles_and_diagnostics_only_read() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = module_graph(&src);
    // The parser must see the graph at all: a few edges every version has.
    assert!(g["dump"].contains("thread"), "parser lost dump -> thread");
    assert!(g["sched"].contains("thread"), "parser lost sched -> thread");
    assert!(g["thread"].contains("sched"), "parser lost thread -> sched");
    if std::env::var_os("WEFT_PRINT_LAYERS").is_some() {
        for (m, d) in &g {
            eprintln!("{m} -> {d:?}");
        }
    }
    let bad = violations(&g);
    assert!(
        bad.is_empty(),
        "module layering broken (see ARCHITECTURE.md, \"Layers\"):\n  {}\n\ngraph:\n{}",
        bad.join("\n  "),
        g.iter()
            .map(|(m, d)| format!("  {m} -> {d:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn graph(edges: &[(&str, &str)]) -> Graph {
    let mut g = Graph::new();
    for (a, b) in edges {
        g.entry(a.to_string()).or_default().insert(b.to_string());
        g.entry(b.to_string()).or_default();
    }
    g
}

#[test]
fn checker_rejects_cycles() {
    // A known pair is fine.
    assert!(violations(&graph(&[("sched", "thread"), ("thread", "sched")])).is_empty());
    // The scheduler reaching back into a dump: a cycle through diagnostics.
    let g = graph(&[
        ("sched", "thread"),
        ("thread", "sched"),
        ("sched", "dump"),
        ("dump", "sched"),
    ]);
    let bad = violations(&g);
    assert!(bad.iter().any(|b| b.contains("diagnostics")), "{bad:?}");
    assert!(
        bad.iter().any(|b| b.contains("uses diagnostics")),
        "{bad:?}"
    );
    // A 4-cycle.
    let g = graph(&[("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")]);
    assert!(violations(&g).iter().any(|b| b.contains("4 modules")));
    // A new pair.
    let g = graph(&[("poll", "net"), ("net", "poll")]);
    assert!(violations(&g).iter().any(|b| b.contains("new cycle")));
}

#[test]
fn parser_reads_paths_not_comments_or_strings() {
    let code = strip(
        "use crate::{a, b::{c, d}, e as f};\n\
         // crate::commented\n\
         /* crate::block */ let s = \"crate::quoted\"; let c = '\"';\n\
         crate::g::h(); $crate::macro_only!(); x::crate::no;\n\
         #[cfg(test)]\nmod tests { use crate::tested; }\n",
    );
    let names = paths_after(&drop_test_modules(&code), "crate");
    assert_eq!(names, ["a", "b", "e", "g"]);
}
