//! The import graph of `weft` reads bottom-up.
//!
//! Reads `src/**/*.rs`, takes every path a file names (`crate::…`,
//! `super::…`, `self::…`, a child module's, and the names a `use …::*`
//! brings in) outside comments, string literals and `#[cfg(test)]`
//! modules, and resolves each to the file that *defines* the item (through
//! `use` re-exports). Two graphs come out: files, and top-level modules
//! (`sched/carrier.rs` counts as `sched`). Then:
//!
//! 1. no strongly connected component of modules holds a diagnostics
//!    module together with anything else (diagnostics only read the layers
//!    below);
//! 2. every component of more than one module is one of [`ALLOWED_CYCLES`]:
//!    a new cycle fails this test until it is broken or argued for (in
//!    ARCHITECTURE.md, "Layers") and listed here;
//! 3. any other module names a diagnostics module only through
//!    [`ALLOWED_DIAGNOSTIC_EDGES`] (recording an event; see ARCHITECTURE.md);
//! 4. no import circle of files is larger than [`MAX_FILE_CYCLE`] files;
//! 5. no file names an item through a re-export of the crate root
//!    (`crate::current` for `crate::thread::current`): lower modules import
//!    from the module that defines the item, so that no import runs back up
//!    to `lib.rs`;
//! 6. the layer picture of ARCHITECTURE.md ("Layers") names every module
//!    once, and every import points to the module's own layer or one below
//!    it, except the diagnostic edges of rule 3;
//! 7. inside `transparent/`, every import goes down one of
//!    [`TRANSPARENT_LAYERS`] (`transparent_reads_top_down`);
//! 8. inside `tls/`, every import goes down one of [`TLS_LAYERS`]
//!    (`tls_reads_bottom_up`).
//!
//! `WEFT_PRINT_LAYERS=1 cargo test -p weft --test layers -- --nocapture`
//! prints both graphs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Modules that only read the rest of the runtime.
const DIAGNOSTICS: &[&str] = &["dump", "metrics", "events", "sample", "symbols", "panic"];

/// Cycles of modules we keep, each one concept seen from two sides.
const ALLOWED_CYCLES: &[&[&str]] = &[
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
    // The transparent hooks tell the event sink that they are turned off
    // (WEFT_TRANSPARENT=0), so a cure can say so without events naming
    // the hooks.
    ("transparent", "events"),
    // Starting a runtime installs the SIGQUIT handler that prints a dump
    // (like the JVM's); the runtime never calls into a dump otherwise.
    ("runtime", "dump"),
    // Likewise the panic hook that names the virtual thread that panicked.
    ("runtime", "panic"),
    // A deadlocked simulation reports its threads as a grouped dump, and a
    // stuck one the running thread's sampled stack.
    ("sim", "dump"),
    ("sim", "symbols"),
];

/// The largest import circle of files allowed (a type and its two sides,
/// say); larger ones are what makes a core unreadable bottom-up.
const MAX_FILE_CYCLE: usize = 3;

/// Imports through a crate-root re-export allowed for now (file, name):
/// none is left. A file owned by work in flight may need an entry while it
/// changes; the list only shrinks.
const PENDING_ROOT_IMPORTS: &[(&str, &str)] = &[];

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

/// One module of the crate: what it defines, imports and re-exports.
#[derive(Default)]
struct Module {
    /// Its file, relative to `src` (`sched/mod.rs`).
    file: String,
    /// Child modules that have files of their own.
    children: BTreeSet<String>,
    /// Items defined at the top of its file (inline modules included).
    items: BTreeSet<String>,
    /// Names brought in by top-level `use`s: local name -> absolute path.
    imports: BTreeMap<String, Vec<String>>,
    /// Modules glob-imported (`use super::*`), as absolute paths.
    globs: Vec<Vec<String>>,
    /// Every path its `use`s name (any depth), absolute.
    used: Vec<Vec<String>>,
    /// Its code with the `use` statements blanked out.
    code: String,
}

type Modules = BTreeMap<Vec<String>, Module>;

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod",
];

/// An identifier of some code: where, what, at which brace depth, and
/// inside how many inline modules (`mod imp { … }`).
#[derive(Clone, Copy)]
struct Token<'a> {
    at: usize,
    word: &'a str,
    depth: i32,
    inline: usize,
}

/// The identifier tokens of `code`.
fn tokens(code: &str) -> Vec<Token<'_>> {
    let b = code.as_bytes();
    let mut out: Vec<Token<'_>> = Vec::new();
    let mut depth = 0;
    // Brace depths of the bodies of the inline modules we are in.
    let mut mods: Vec<i32> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'{' {
            depth += 1;
            let n = out.len();
            if n >= 2
                && out[n - 2].word == "mod"
                && code[out[n - 1].at + out[n - 1].word.len()..i]
                    .trim()
                    .is_empty()
            {
                mods.push(depth);
            }
        } else if c == b'}' {
            if mods.last() == Some(&depth) {
                mods.pop();
            }
            depth -= 1;
        }
        if is_ident(c) && (i == 0 || !is_ident(b[i - 1])) {
            let start = i;
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
            out.push(Token {
                at: start,
                word: &code[start..i],
                depth,
                inline: mods.len(),
            });
            continue;
        }
        i += 1;
    }
    out
}

/// The paths of a `use` tree (the text after `use`, up to the `;`):
/// (segments, local name or `None` for a glob).
fn use_tree(text: &str) -> Vec<(Vec<String>, Option<String>)> {
    fn tree(
        t: &[char],
        i: &mut usize,
        prefix: &[String],
        out: &mut Vec<(Vec<String>, Option<String>)>,
    ) {
        let mut path = prefix.to_vec();
        loop {
            while *i < t.len() && t[*i].is_whitespace() {
                *i += 1;
            }
            if *i >= t.len() {
                break;
            }
            if t[*i] == '{' {
                *i += 1;
                loop {
                    tree(t, i, &path, out);
                    while *i < t.len() && t[*i].is_whitespace() {
                        *i += 1;
                    }
                    if *i < t.len() && t[*i] == ',' {
                        *i += 1;
                        continue;
                    }
                    if *i < t.len() && t[*i] == '}' {
                        *i += 1;
                    }
                    return;
                }
            }
            if t[*i] == '*' {
                *i += 1;
                out.push((path, None));
                return;
            }
            if t[*i] == '}' || t[*i] == ',' {
                // An empty group item (`{a, }`).
                return;
            }
            let start = *i;
            while *i < t.len() && (t[*i].is_alphanumeric() || t[*i] == '_') {
                *i += 1;
            }
            let seg: String = t[start..*i].iter().collect();
            if seg.is_empty() {
                *i += 1;
                continue;
            }
            if seg == "self"
                && !path.is_empty()
                && start > 0
                && t[..start].iter().rev().find(|c| !c.is_whitespace()) != Some(&':')
            {
                // `{self, …}`: the prefix module itself.
                let name = path.last().cloned();
                out.push((path, name));
                return;
            }
            path.push(seg);
            while *i < t.len() && t[*i].is_whitespace() {
                *i += 1;
            }
            if t[*i..].starts_with(&[':', ':']) {
                *i += 2;
                continue;
            }
            let mut name = path.last().cloned();
            let rest: String = t[*i..].iter().collect();
            if let Some(r) = rest.strip_prefix("as") {
                *i += 2;
                let r2 = r.trim_start();
                *i += r.len() - r2.len();
                let start = *i;
                while *i < t.len() && (t[*i].is_alphanumeric() || t[*i] == '_') {
                    *i += 1;
                }
                name = Some(t[start..*i].iter().collect());
            }
            out.push((path, name));
            return;
        }
    }
    let t: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let t = if t.starts_with(&[':', ':']) {
        &t[2..]
    } else {
        &t[..]
    };
    tree(t, &mut i, &[], &mut out);
    out
}

/// `path` (as written in module `at`, inside `inline` inline modules of its
/// file) made absolute, or `None` if it names another crate. An inline
/// module counts as its file's module.
fn absolute(
    path: &[String],
    at: &[String],
    inline: usize,
    children: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let mut skip = 0;
    while skip < inline && path.get(skip).is_some_and(|s| s == "super") {
        skip += 1;
    }
    let path = &path[skip..];
    if skip > 0 && path.first().is_some_and(|s| s != "super") {
        let mut b = at.to_vec();
        b.extend(path.iter().cloned());
        return Some(b);
    }
    let first = path.first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" => at.to_vec(),
        "super" => {
            let mut b = at.to_vec();
            let mut k = 0;
            while path.get(k).is_some_and(|s| s == "super") {
                b.pop();
                k += 1;
            }
            b.extend(path[k..].iter().cloned());
            return Some(b);
        }
        c if children.contains(c) => {
            let mut b = at.to_vec();
            b.push(c.to_string());
            b.extend(path[1..].iter().cloned());
            return Some(b);
        }
        _ => return None,
    };
    base.extend(path[1..].iter().cloned());
    Some(base)
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

/// Reads every module of the crate under `src`.
fn read_modules(src: &Path) -> Modules {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut mods = Modules::new();
    for f in &files {
        let rel = f.strip_prefix(src).expect("under src");
        let mut path: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let last = path.pop().expect("a file name");
        if last != "mod.rs" && last != "lib.rs" {
            path.push(last.trim_end_matches(".rs").to_string());
        }
        let code = drop_test_modules(&strip(&std::fs::read_to_string(f).expect("read")));
        mods.insert(
            path,
            Module {
                file: rel.to_string_lossy().into_owned(),
                code,
                ..Module::default()
            },
        );
    }
    let keys: Vec<Vec<String>> = mods.keys().cloned().collect();
    for key in &keys {
        let children: BTreeSet<String> = keys
            .iter()
            .filter(|k| k.len() == key.len() + 1 && k.starts_with(key))
            .map(|k| k.last().expect("child").clone())
            .collect();
        let m = mods.get_mut(key).expect("module");
        m.children = children;
        let toks = tokens(&m.code);
        for w in toks.windows(2) {
            let (kw, name) = (w[0].word, w[1].word);
            if w[0].depth == 0
                && ITEM_KEYWORDS.contains(&kw)
                && !ITEM_KEYWORDS.contains(&name)
                && !(kw == "mod" && m.children.contains(name))
            {
                m.items.insert(name.to_string());
            }
            if kw == "macro_rules" {
                m.items.insert(name.to_string());
            }
        }
        // `use` statements: record, then blank them out of the code.
        let mut code = m.code.clone().into_bytes();
        for t in &toks {
            let (at, depth) = (t.at, t.depth);
            if t.word != "use" {
                continue;
            }
            let Some(end) = m.code[at..].find(';') else {
                continue;
            };
            let text = &m.code[at + 3..at + end];
            for (p, name) in use_tree(text) {
                let Some(abs) = absolute(&p, key, t.inline, &m.children) else {
                    continue;
                };
                if depth == 0 {
                    match &name {
                        Some(n) if n != "_" => {
                            m.imports.insert(n.clone(), abs.clone());
                        }
                        Some(_) => {}
                        None => m.globs.push(abs.clone()),
                    }
                }
                if name.is_some() {
                    m.used.push(abs);
                }
            }
            for b in &mut code[at..at + end] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
        }
        m.code = String::from_utf8(code).expect("utf-8");
    }
    mods
}

/// The file that defines what `path` (absolute) names.
fn resolve(mods: &Modules, path: &[String], hops: usize) -> Option<String> {
    if hops > 16 {
        return None;
    }
    let mut at: Vec<String> = Vec::new();
    for (i, seg) in path.iter().enumerate() {
        let m = mods.get(&at)?;
        let rest = &path[i + 1..];
        if m.children.contains(seg) && !(rest.is_empty() && m.imports.contains_key(seg)) {
            at.push(seg.clone());
            continue;
        }
        if m.items.contains(seg) {
            return Some(m.file.clone());
        }
        if let Some(target) = m.imports.get(seg) {
            let mut p = target.clone();
            p.extend(rest.iter().cloned());
            return resolve(mods, &p, hops + 1);
        }
        for g in &m.globs {
            let mut p = g.clone();
            p.push(seg.clone());
            if mods.get(g).is_some_and(|gm| {
                gm.items.contains(seg) || gm.imports.contains_key(seg) || gm.children.contains(seg)
            }) {
                p.extend(rest.iter().cloned());
                return resolve(mods, &p, hops + 1);
            }
        }
        // Something this parser does not see (a macro's item): the module.
        if std::env::var_os("WEFT_LAYERS_DEBUG").is_some() {
            eprintln!("unresolved {path:?} in {}", m.file);
        }
        return Some(m.file.clone());
    }
    mods.get(&at).map(|m| m.file.clone())
}

/// Whether `path` (absolute) names an item through a crate-root re-export.
fn through_root_reexport(mods: &Modules, path: &[String]) -> bool {
    let root = &mods[&Vec::new()];
    let Some(first) = path.first() else {
        return false;
    };
    root.imports.contains_key(first) && (path.len() == 1 || !root.children.contains(first))
}

/// Every absolute path module `key` names, each once.
fn paths_named(mods: &Modules, key: &[String]) -> BTreeSet<Vec<String>> {
    let m = &mods[key];
    let mut out: BTreeSet<Vec<String>> = m.used.iter().cloned().collect();
    let b = m.code.as_bytes();
    let toks = tokens(&m.code);
    let own: BTreeSet<&str> = m.items.iter().map(String::as_str).collect();
    let mut k = 0;
    while k < toks.len() {
        let Token {
            at, word, inline, ..
        } = toks[k];
        let before = m.code[..at].trim_end();
        let after_path_sep = before.ends_with("::");
        let after_dot = before.ends_with('.') && !before.ends_with("..");
        let followed = m.code[at + word.len()..].trim_start().starts_with("::");
        // A field (`park: ParkState`, `Foo { park: x }`) is not a path.
        let field = {
            let rest = m.code[at + word.len()..].trim_start();
            rest.starts_with(':') && !rest.starts_with("::")
        };
        if after_path_sep || after_dot || field || b.get(at.wrapping_sub(1)) == Some(&b'$') {
            k += 1;
            continue;
        }
        // The segments of the path starting here.
        let mut segs = vec![word.to_string()];
        let mut j = k;
        let mut end = at + word.len();
        while m.code[end..].trim_start().starts_with("::") {
            let next = toks.get(j + 1);
            match next {
                Some(&Token {
                    at: nat, word: nw, ..
                }) if m.code[end..nat].trim() == "::" => {
                    segs.push(nw.to_string());
                    end = nat + nw.len();
                    j += 1;
                }
                _ => break,
            }
        }
        k = j + 1;
        let abs = match word {
            "crate" | "super" | "self" if followed => absolute(&segs, key, inline, &m.children),
            _ if followed && m.children.contains(word) => absolute(&segs, key, inline, &m.children),
            _ if followed && m.imports.contains_key(word) => {
                let mut p = m.imports[word].clone();
                p.extend(segs[1..].iter().cloned());
                Some(p)
            }
            _ if !own.contains(word) && !m.imports.contains_key(word) => m
                .globs
                .iter()
                .find(|g| {
                    mods.get(*g).is_some_and(|gm| {
                        gm.items.contains(word)
                            || gm.imports.contains_key(word)
                            || (followed && gm.children.contains(word))
                    })
                })
                .map(|g| {
                    let mut p = g.clone();
                    p.extend(segs.iter().cloned());
                    p
                }),
            _ => None,
        };
        if let Some(p) = abs {
            out.insert(p);
        }
    }
    out
}

/// The import graph of files, and the crate-root re-exports each file
/// names (file, name).
fn file_graph(src: &Path) -> (Graph, Vec<(String, String)>) {
    let mods = read_modules(src);
    let mut g = Graph::new();
    let mut via_root = Vec::new();
    for (key, m) in &mods {
        let deps = g.entry(m.file.clone()).or_default();
        for p in paths_named(&mods, key) {
            if !key.is_empty() && through_root_reexport(&mods, &p) {
                via_root.push((m.file.clone(), p[0].clone()));
            }
            if let Some(f) = resolve(&mods, &p, 0)
                && f != m.file
            {
                deps.insert(f);
            }
        }
    }
    via_root.sort();
    via_root.dedup();
    (g, via_root)
}

/// The top-level module of a file (`sched/carrier.rs` -> `sched`).
fn top_module(file: &str) -> String {
    file.split('/')
        .next()
        .expect("a path")
        .trim_end_matches(".rs")
        .to_string()
}

/// The graph of top-level modules, from the graph of files.
fn module_graph(files: &Graph) -> Graph {
    let mut g = Graph::new();
    for (f, deps) in files {
        if f == "lib.rs" {
            continue;
        }
        let from = top_module(f);
        let entry = g.entry(from.clone()).or_default();
        for d in deps {
            let to = top_module(d);
            if to != from && d != "lib.rs" {
                entry.insert(to);
            }
        }
    }
    for deps in g.clone().values() {
        for d in deps {
            g.entry(d.clone()).or_default();
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

/// Everything wrong with the module graph `g`, one line each.
fn violations(g: &Graph) -> Vec<String> {
    let mut bad = Vec::new();
    for c in sccs(g).into_iter().filter(|c| c.len() > 1) {
        if c.iter().any(|m| DIAGNOSTICS.contains(&m.as_str())) {
            bad.push(format!("cycle through diagnostics: {c:?}"));
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

/// Import circles of more than [`MAX_FILE_CYCLE`] files: none is allowed.
fn file_cycle_violations(files: &Graph) -> Vec<String> {
    sccs(files)
        .into_iter()
        .filter(|c| c.len() > MAX_FILE_CYCLE)
        .map(|c| format!("import circle of {} files: {c:?}", c.len()))
        .collect()
}

/// The layers of ARCHITECTURE.md's picture, top first: (name, modules).
fn layer_picture(doc: &str) -> Vec<(String, Vec<String>)> {
    let at = doc
        .find("## Layers")
        .expect("ARCHITECTURE.md has a Layers section");
    let open = at + doc[at..].find("```text").expect("a text picture") + "```text".len();
    let close = open + doc[open..].find("```").expect("the picture ends");
    let mut layers = Vec::new();
    let mut section = String::new();
    let lines: Vec<&str> = doc[open..close].lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let rule = line.trim_start().starts_with('─');
        if !rule {
            section.push_str(line);
            section.push('\n');
        }
        if rule || n + 1 == lines.len() {
            // Drop `{…}` and `(…)`: the files of a module, and remarks.
            let mut plain = String::new();
            let mut depth = 0;
            for ch in section.chars() {
                match ch {
                    '{' | '(' => depth += 1,
                    '}' | ')' => depth -= 1,
                    _ if depth == 0 => plain.push(ch),
                    _ => {}
                }
            }
            let mut words = plain
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .map(str::to_string);
            if let Some(name) = words.next() {
                layers.push((name, words.collect()));
            }
            section.clear();
        }
    }
    layers
}

/// Everything in which the picture and the module graph `g` disagree.
fn picture_violations(layers: &[(String, Vec<String>)], g: &Graph) -> Vec<String> {
    let mut bad = Vec::new();
    let mut level: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, (name, mods)) in layers.iter().enumerate() {
        for m in mods {
            if !g.contains_key(m) {
                bad.push(format!(
                    "the picture's layer {name} names {m}, not a module"
                ));
            } else if level.insert(m, i).is_some() {
                bad.push(format!("the picture names {m} twice"));
            }
        }
    }
    for (from, deps) in g {
        let Some(&lf) = level.get(from.as_str()) else {
            bad.push(format!("the picture does not name {from}"));
            continue;
        };
        for to in deps {
            let Some(&lt) = level.get(to.as_str()) else {
                continue;
            };
            let allowed = ALLOWED_DIAGNOSTIC_EDGES.contains(&(from.as_str(), to.as_str()));
            if lt < lf && !allowed {
                bad.push(format!(
                    "{from} ({}) imports {to}, in the layer above ({})",
                    layers[lf].0, layers[lt].0
                ));
            }
        }
    }
    bad
}

#[test]
fn imports_read_bottom_up() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (files, via_root) = file_graph(&dir.join("src"));
    let g = module_graph(&files);
    // The parser must see the graph at all: a few edges every version has.
    assert!(g["dump"].contains("thread"), "parser lost dump -> thread");
    assert!(g["sched"].contains("thread"), "parser lost sched -> thread");
    assert!(
        files["sched/slot.rs"].contains("thread/record.rs"),
        "parser lost sched/slot.rs -> thread/record.rs"
    );
    if std::env::var_os("WEFT_PRINT_LAYERS").is_some() {
        for (m, d) in &g {
            eprintln!("{m} -> {d:?}");
        }
        for (f, d) in &files {
            eprintln!("{f} -> {d:?}");
        }
    }
    let mut bad = violations(&g);
    bad.extend(file_cycle_violations(&files));
    for (file, name) in &via_root {
        if !PENDING_ROOT_IMPORTS.contains(&(file.as_str(), name.as_str())) {
            bad.push(format!(
                "{file} names crate::{name}, a re-export of the crate root: import it from its module"
            ));
        }
    }
    let doc = std::fs::read_to_string(dir.join("../../ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    bad.extend(picture_violations(&layer_picture(&doc), &g));
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

/// The files of `transparent/`, top down (ARCHITECTURE.md, "Transparent
/// blocking"): a file imports only files of the layers below its own —
/// none of its own layer, none above — so a hooked call goes down them
/// (hook -> call engine -> pipes -> parking -> descriptor view -> …) and
/// enters each file once. A new file there is placed in a layer here.
const TRANSPARENT_LAYERS: &[&[&str]] = &[
    // The interposed functions (`hooks/` by family).
    &["hooks/*", "sim.rs", "futex.rs"],
    // The socket-call engine, then pipes, then parking.
    &["call.rs"],
    &["pipe.rs"],
    &["wait.rs", "queue.rs"],
    // Weft's view of a descriptor: classify, forget, hand over.
    &["fds.rs"],
    // The module's root: enabled, the park counters.
    &["mod.rs"],
    // Copies of a socket, poller registrations.
    &["copies.rs", "regs.rs"],
    // Whether a signal handler runs (and the sigaction hooks).
    &["signals.rs"],
    // The state table, the fork marker, buffers, raw system calls.
    &["state.rs", "fork.rs", "iov.rs", "sys.rs"],
];

/// The files of `tls/`, top down (`tls/mod.rs`, "Files, bottom up"): as
/// in [`TRANSPARENT_LAYERS`], a file imports only files of the layers
/// below its own, so a contributor reads the thread-local area from its
/// leaves (the thread pointer, the header) up to the `dlopen` guard. A new
/// file there is placed in a layer here.
const TLS_LAYERS: &[&[&str]] = &[
    // The module's root: its docs, and what the rest of the crate uses.
    &["mod.rs"],
    // The `dlopen` guard (runs a load on the carrier's own TCB).
    &["dlopen.rs"],
    // glibc's per-thread entry points: clean-up at a thread's end, and
    // `pthread_getattr_np`.
    &["dtors.rs", "getattr.rs"],
    // Making, adopting and seeding an area; running on one (the switch).
    &["area.rs", "switch.rs"],
    // An area's own `dtv`.
    &["dtv.rs"],
    // The process's layout, found once.
    &["layout.rs"],
    // The loaded modules with thread-locals; the SIGSETXID relay.
    &["modules.rs", "setxid.rs"],
    // The header, the thread pointer, and the stand-in for other
    // platforms.
    &["header.rs", "tp.rs", "stub.rs"],
];

/// The layer of `file` (a path under `src/`) in `layers`, the layers of
/// directory `dir` (`"transparent/"`).
fn dir_layer(dir: &str, layers: &[&[&str]], file: &str) -> Option<usize> {
    let rel = file.strip_prefix(dir)?;
    layers.iter().position(|layer| {
        layer.iter().any(|p| match p.strip_suffix('*') {
            Some(sub) => rel.starts_with(sub),
            None => rel == *p,
        })
    })
}

/// Imports between files of `dir` that do not go down a layer of
/// `layers`, and files there that no layer names.
fn dir_violations(dir: &str, layers: &[&[&str]], files: &Graph) -> Vec<String> {
    let mut bad = Vec::new();
    for (f, deps) in files {
        if !f.starts_with(dir) {
            continue;
        }
        let Some(from) = dir_layer(dir, layers, f) else {
            bad.push(format!("{f} is in no layer of {dir}'s list"));
            continue;
        };
        for d in deps {
            if let Some(to) = dir_layer(dir, layers, d)
                && to <= from
            {
                bad.push(format!(
                    "{f} (layer {from}) imports {d} (layer {to}): {dir} imports go down only"
                ));
            }
        }
    }
    bad
}

/// Checks the layers of `dir` on the crate's files: the parser still sees
/// the edge `seen` (so an empty result means something), no import breaks
/// the rule, and the rule itself catches each edge of `bad` (an import up,
/// across one layer, or from a file no layer names).
fn check_dir_layers(dir: &str, layers: &[&[&str]], seen: (&str, &str), bad: &[(&str, &str)]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (files, _) = file_graph(&src);
    assert!(
        files[seen.0].contains(seen.1),
        "parser lost {} -> {}",
        seen.0,
        seen.1
    );
    let found = dir_violations(dir, layers, &files);
    assert!(found.is_empty(), "{}", found.join("\n"));
    assert_eq!(dir_violations(dir, layers, &graph(bad)).len(), bad.len());
}

#[test]
fn tls_reads_bottom_up() {
    check_dir_layers(
        "tls/",
        TLS_LAYERS,
        ("tls/area.rs", "tls/dtv.rs"),
        &[
            ("tls/tp.rs", "tls/layout.rs"),
            ("tls/area.rs", "tls/switch.rs"),
            ("tls/new.rs", "tls/tp.rs"),
        ],
    );
}

#[test]
fn transparent_reads_top_down() {
    check_dir_layers(
        "transparent/",
        TRANSPARENT_LAYERS,
        ("transparent/hooks/io.rs", "transparent/call.rs"),
        &[
            ("transparent/wait.rs", "transparent/call.rs"),
            ("transparent/hooks/io.rs", "transparent/hooks/poll.rs"),
            ("transparent/new.rs", "transparent/sys.rs"),
        ],
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
    assert!(violations(&graph(&[("builder", "runtime"), ("runtime", "builder")])).is_empty());
    // The scheduler and the record knowing each other: a new cycle.
    let g = graph(&[("sched", "thread"), ("thread", "sched")]);
    assert!(violations(&g).iter().any(|b| b.contains("new cycle")));
    // The scheduler reaching back into a dump: a cycle through diagnostics.
    let g = graph(&[("sched", "dump"), ("dump", "sched")]);
    let bad = violations(&g);
    assert!(bad.iter().any(|b| b.contains("diagnostics")), "{bad:?}");
    assert!(
        bad.iter().any(|b| b.contains("uses diagnostics")),
        "{bad:?}"
    );
    // A circle of 4 files.
    let g = graph(&[
        ("a.rs", "b.rs"),
        ("b.rs", "c.rs"),
        ("c.rs", "d.rs"),
        ("d.rs", "a.rs"),
    ]);
    assert!(
        file_cycle_violations(&g)
            .iter()
            .any(|b| b.contains("4 files"))
    );
    let g = graph(&[("a.rs", "b.rs"), ("b.rs", "c.rs"), ("c.rs", "a.rs")]);
    assert!(file_cycle_violations(&g).is_empty());
    // Inside one directory too (a module's own files).
    let g = graph(&[
        ("thread/a.rs", "thread/b.rs"),
        ("thread/b.rs", "thread/c.rs"),
        ("thread/c.rs", "thread/d.rs"),
        ("thread/d.rs", "thread/a.rs"),
    ]);
    assert!(!file_cycle_violations(&g).is_empty());
}

#[test]
fn picture_checks_layers() {
    let doc = "## Layers\n```text\n top   a · b (remark: c)\n ────\n low  c/{x, y}\n d\n```\n";
    let layers = layer_picture(doc);
    assert_eq!(
        layers,
        [
            ("top".to_string(), vec!["a".to_string(), "b".to_string()]),
            ("low".to_string(), vec!["c".to_string(), "d".to_string()]),
        ]
    );
    let g = graph(&[("a", "c"), ("b", "a"), ("c", "d")]);
    assert!(picture_violations(&layers, &g).is_empty());
    let g = graph(&[("c", "a")]);
    let bad = picture_violations(&layers, &g);
    assert!(bad.iter().any(|b| b.contains("layer above")), "{bad:?}");
    let g = graph(&[("e", "c")]);
    let bad = picture_violations(&layers, &g);
    assert!(bad.iter().any(|b| b.contains("does not name e")), "{bad:?}");
}

#[test]
fn parser_resolves_to_defining_files() {
    let dir = std::env::temp_dir().join(format!("weft-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("t")).unwrap();
    let w = |p: &str, s: &str| std::fs::write(dir.join(p), s).unwrap();
    w("lib.rs", "mod t;\nmod u;\npub use t::Rec;\n");
    w(
        "t/mod.rs",
        "mod rec;\nmod park;\npub use rec::Rec;\npub(crate) use park::park;\n",
    );
    w(
        "t/rec.rs",
        "use super::*;\npub struct Rec;\nfn f() { park(); }\n",
    );
    w("t/park.rs", "pub fn park() {}\n");
    w(
        "u.rs",
        "use crate::{t::{self}, Rec as R};\n// crate::commented\n\
         fn g() { let s = \"crate::quoted\"; t::park(); $crate::no!(); }\n\
         #[cfg(test)]\nmod tests { use crate::tested; }\n",
    );
    let (files, via_root) = file_graph(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        files["u.rs"],
        BTreeSet::from([
            "t/mod.rs".to_string(),
            "t/park.rs".to_string(),
            "t/rec.rs".to_string()
        ])
    );
    assert_eq!(files["t/rec.rs"], BTreeSet::from(["t/park.rs".to_string()]));
    assert_eq!(via_root, [("u.rs".to_string(), "Rec".to_string())]);
}
