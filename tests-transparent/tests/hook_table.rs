//! The hook table (`weft/src/libc_next.rs`) is the one list of the
//! functions Weft defines in place of libc's — the transparent hooks and
//! the rest (`tls/`, `thread/native.rs`, `thread/os_state.rs`,
//! `sched/starter.rs`): each row
//! must be defined, in the file its row names, and interposed in this
//! executable; no function may be defined without a row; the transparent
//! module docs' list ("Covered calls") names exactly the transparent rows,
//! and the docs of every other row's file name its rows.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::path::{Path, PathBuf};

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/weft/src")
}

/// Every `.rs` file under `dir`, as (path relative to `root`, text).
fn sources(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).expect("read the weft sources") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            sources(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.push((rel, std::fs::read_to_string(&p).expect("read a source")));
        }
    }
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The `#[unsafe(no_mangle)]` functions of the sources, as (name, file).
/// A file whose exported function is a macro's (`fn $name(`) defines one
/// per row of that macro's invocations: each line `kind fn name(` (a
/// lower-case word before `fn` that is no Rust keyword).
fn definitions() -> BTreeSet<(String, String)> {
    let root = src_dir();
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    let mut defs = BTreeSet::new();
    for (file, text) in files {
        let mut exported = false;
        let mut by_macro = false;
        for line in text.lines() {
            let line = line.trim();
            if line == "#[unsafe(no_mangle)]" {
                exported = true;
            } else if exported && let Some(at) = line.find("fn ") {
                let name = ident(&line[at + 3..]);
                if name.is_empty() && line[at + 3..].starts_with('$') {
                    by_macro = true;
                } else {
                    defs.insert((name, file.clone()));
                }
                exported = false;
            }
        }
        if by_macro {
            const KEYWORDS: &[&str] = &["pub", "unsafe", "extern", "const", "async", "\"C\""];
            for line in text.lines() {
                let mut words = line.split_whitespace();
                let (Some(kind), Some("fn"), Some(rest)) =
                    (words.next(), words.next(), words.next())
                else {
                    continue;
                };
                let name = ident(rest);
                if !KEYWORDS.contains(&kind)
                    && kind.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                    && !name.is_empty()
                    && rest[name.len()..].starts_with('(')
                {
                    defs.insert((name, file.clone()));
                }
            }
        }
    }
    defs
}

/// The backquoted names in `text`, with `{a,b}` alternatives expanded
/// (`pthread_key_{create,delete}` names two).
fn backquoted(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (k, part) in text.split('`').enumerate() {
        if k % 2 == 0 {
            continue;
        }
        match (part.find('{'), part.find('}')) {
            (Some(open), Some(close)) if open < close => {
                for alt in part[open + 1..close].split(',') {
                    out.insert(format!(
                        "{}{}{}",
                        &part[..open],
                        alt.trim(),
                        &part[close + 1..]
                    ));
                }
            }
            _ => {
                out.insert(part.to_string());
            }
        }
    }
    out
}

fn table() -> BTreeSet<(String, String)> {
    weft::transparent::hook_table()
        .iter()
        .map(|(n, f)| (n.to_string(), f.to_string()))
        .collect()
}

#[test]
fn every_row_is_defined_in_its_file_and_every_hook_has_a_row() {
    let rows = table();
    assert_eq!(
        rows.len(),
        weft::transparent::hook_table().len(),
        "a name is in the table twice"
    );
    let defs = definitions();
    let missing: Vec<_> = rows.difference(&defs).collect();
    let unlisted: Vec<_> = defs.difference(&rows).collect();
    assert!(
        missing.is_empty() && unlisted.is_empty(),
        "rows not defined in their file: {missing:?}; definitions without a row: {unlisted:?}"
    );
}

#[test]
fn the_module_docs_list_the_rows() {
    let text = std::fs::read_to_string(src_dir().join("transparent/mod.rs")).unwrap();
    let section = text
        .split("//! # Covered calls")
        .nth(1)
        .expect("mod.rs has a \"Covered calls\" section");
    // The list: the "- " items after the section's first paragraph, up to
    // the first blank line after them.
    let mut listed = BTreeSet::new();
    let mut in_list = false;
    for line in section.lines() {
        let line = line.trim_start_matches("//!");
        if line.starts_with(" - ") {
            in_list = true;
        } else if in_list && line.trim().is_empty() {
            break;
        }
        if in_list {
            // Backquoted lower-case identifiers are function names (file
            // names have a '/' or '.', constants are upper case).
            for (k, part) in line.split('`').enumerate() {
                if k % 2 == 1
                    && !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                {
                    listed.insert(part.to_string());
                }
            }
        }
    }
    let rows: BTreeSet<String> = table()
        .into_iter()
        .filter(|(_, f)| f.starts_with("transparent/"))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        listed, rows,
        "transparent/mod.rs's \"Covered calls\" list and the hook table's transparent rows differ"
    );
}

#[test]
fn every_other_row_is_named_in_its_files_docs() {
    let mut unnamed = Vec::new();
    for (name, file) in table() {
        if file.starts_with("transparent/") {
            continue;
        }
        let text = std::fs::read_to_string(src_dir().join(&file)).unwrap();
        let docs: String = text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        if !backquoted(&docs).contains(&name) {
            unnamed.push(format!("{name} ({file})"));
        }
    }
    assert!(
        unnamed.is_empty(),
        "rows their file's module docs do not name: {unnamed:?}"
    );
    // The table holds every interposed function, not only the transparent
    // hooks: the thread-local area's, the C locks', the kernel-state calls'.
    for dir in ["tls/", "thread/native.rs", "thread/os_state.rs"] {
        assert!(
            table().iter().any(|(_, f)| f.starts_with(dir)),
            "no row under {dir}"
        );
    }
}

#[test]
fn every_row_is_interposed_in_this_executable() {
    for (name, _) in weft::transparent::hook_table() {
        let c = CString::new(*name).unwrap();
        // SAFETY: dlsym with a NUL-terminated name and the pseudo-handles.
        let (first, libc_own) = unsafe {
            (
                libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()),
                libc::dlsym(libc::RTLD_NEXT, c.as_ptr()),
            )
        };
        assert!(!first.is_null(), "{name}: not defined at all");
        assert_ne!(
            first, libc_own,
            "{name}: the first definition is libc's, not Weft's"
        );
    }
}

#[test]
fn every_counted_name_is_a_park_counter() {
    let counted: Vec<&str> = weft::transparent::parks().iter().map(|(n, _)| *n).collect();
    assert_eq!(counted, weft::transparent::CALLS);
    let distinct: BTreeSet<&str> = counted.iter().copied().collect();
    assert_eq!(distinct.len(), counted.len(), "a counter is listed twice");
}
