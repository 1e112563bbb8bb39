//! The book's and README's links, anchors, includes and code samples.
//!
//! What `mdbook build` does not check, or only warns about: a relative link
//! to a page or `#anchor` that does not exist, a page missing from
//! `SUMMARY.md`, an `{{#include file:anchor}}` whose anchor is gone, and
//! hand-written Rust that no compiler sees. Links into the API docs
//! (`api/...`, rustdoc copied into the built book by `make book`) are
//! checked against `target/doc` when it has been built (`make lint` builds
//! it before `make test` runs this); under CI it must have been.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("docs/ has a parent")
        .to_path_buf()
}

fn src() -> PathBuf {
    repo().join("docs/src")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn pages(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("docs/src is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            pages(&p, out);
        } else if p.extension().is_some_and(|e| e == "md") {
            out.push(p);
        }
    }
}

/// An `{{#include path}}` or `{{#include path:anchor}}` (or line range).
struct Include {
    file: PathBuf,
    anchor: Option<String>,
}

fn includes(text: &str, dir: &Path) -> Vec<(String, Include)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("{{#include ") {
        let after = &rest[i + "{{#include ".len()..];
        let end = after.find("}}").expect("an include ends with }}");
        let spec = after[..end].trim();
        let (file, anchor) = match spec.split_once(':') {
            Some((f, a)) if !a.chars().next().is_some_and(|c| c.is_ascii_digit()) => {
                (f, Some(a.to_string()))
            }
            Some((f, _)) => (f, None),
            None => (spec, None),
        };
        out.push((
            rest[i..i + "{{#include ".len() + end + 2].to_string(),
            Include {
                file: normalise(&dir.join(file)),
                anchor,
            },
        ));
        rest = &after[end..];
    }
    out
}

/// The lines between `ANCHOR: name` and `ANCHOR_END: name`, without any
/// anchor lines (as mdbook includes them).
fn anchored(text: &str, name: &str) -> Option<String> {
    let start = format!("ANCHOR: {name}");
    let end = format!("ANCHOR_END: {name}");
    let mut lines = text.lines();
    lines.find(|l| l.trim_end().ends_with(&start))?;
    let mut out = Vec::new();
    for l in lines {
        if l.trim_end().ends_with(&end) {
            return Some(out.join("\n"));
        }
        if !l.contains("ANCHOR: ") && !l.contains("ANCHOR_END: ") {
            out.push(l);
        }
    }
    None
}

/// A page's text with its markdown includes expanded (anchors and links of
/// an included page count as the including page's).
fn expanded(page: &Path) -> String {
    let mut text = read(page);
    for (literal, inc) in includes(&text.clone(), page.parent().expect("a page has a folder")) {
        if inc.file.extension().is_some_and(|e| e == "md") && inc.anchor.is_none() {
            text = text.replace(&literal, &read(&inc.file));
        }
    }
    text
}

/// The text outside fenced code blocks, with inline code removed.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut code = false;
        for c in line.chars() {
            if c == '`' {
                code = !code;
            } else if !code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// mdbook's id for a heading: lower case, whitespace as `-`, only
/// alphanumerics, `-` and `_` kept; repeats get `-1`, `-2`, ...
fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut ids = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        // A link in a heading counts by its text.
        let title = title.replace(['[', ']'], "");
        let id: String = title
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c.to_lowercase().next().unwrap_or(c))
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let n = seen.entry(id.clone()).or_insert(0);
        ids.insert(if *n == 0 {
            id.clone()
        } else {
            format!("{id}-{n}")
        });
        *n += 1;
    }
    ids
}

/// `[text](target)` links and `[label]: target` definitions.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.to_string());
        rest = &after[end..];
    }
    for line in prose.lines() {
        let l = line.trim_start();
        if l.starts_with('[') {
            if let Some((_, target)) = l.split_once("]: ") {
                out.push(target.trim().to_string());
            }
        }
    }
    out
}

fn external(target: &str) -> bool {
    target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:")
}

fn doc_dir() -> Option<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    let target = if target.is_absolute() {
        target
    } else {
        repo().join(target)
    };
    let doc = target.join("doc");
    doc.join("wasmctrl/index.html").exists().then_some(doc)
}

/// Checks every link of `text` (found in `from`), pushing failures.
fn check_links(from: &Path, text: &str, summary: &BTreeSet<PathBuf>, errors: &mut Vec<String>) {
    let dir = from.parent().expect("a file has a folder");
    let api = src().join("api");
    for target in links(text) {
        if target.is_empty() || external(&target) {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            from.to_path_buf()
        } else {
            normalise(&dir.join(path))
        };
        let name = format!("{}: link {target:?}", from.display());
        if let Ok(rest) = resolved.strip_prefix(&api) {
            match doc_dir() {
                Some(doc) if doc.join(rest).exists() => {}
                Some(doc) => errors.push(format!(
                    "{name}: no {} (the API docs, `cargo doc`)",
                    doc.join(rest).display()
                )),
                None if std::env::var_os("CI").is_some() => errors.push(format!(
                    "{name}: target/doc is not built (make lint builds it)"
                )),
                None => {}
            }
            continue;
        }
        if !resolved.exists() {
            errors.push(format!("{name}: {} does not exist", resolved.display()));
            continue;
        }
        let in_book = resolved.starts_with(src());
        if from.starts_with(src()) && !in_book {
            errors.push(format!(
                "{name}: leaves docs/src (the built book has no such file): \
                 include it, or link the repository's copy with a full URL"
            ));
            continue;
        }
        if in_book && resolved.extension().is_some_and(|e| e == "md") {
            if !summary.contains(&resolved) {
                errors.push(format!("{name}: the page is not in SUMMARY.md"));
            }
            if let Some(anchor) = anchor {
                let ids = heading_ids(&expanded(&resolved));
                if !ids.contains(anchor) {
                    errors.push(format!(
                        "{name}: no heading with id {anchor:?} (ids: {ids:?})"
                    ));
                }
            }
        }
    }
}

/// The pages SUMMARY.md lists.
fn summary() -> BTreeSet<PathBuf> {
    let path = src().join("SUMMARY.md");
    let mut out: BTreeSet<PathBuf> = links(&read(&path))
        .into_iter()
        .filter(|t| !t.is_empty())
        .map(|t| normalise(&src().join(t)))
        .collect();
    out.insert(path);
    out
}

/// Rust code blocks: each either only `{{#include}}` lines, or preceded by
/// `<!-- excerpt: PATH -->` and then a verbatim run of PATH's lines
/// (indentation aside).
fn check_rust_blocks(from: &Path, text: &str, errors: &mut Vec<String>) {
    let dir = from.parent().expect("a file has a folder");
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        if !(fence.starts_with("```rust") || fence.starts_with("```rs")) {
            if fence.starts_with("```") {
                // Skip other blocks whole.
                i += 1;
                while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                    i += 1;
                }
            }
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let mut body = Vec::new();
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push(lines[i]);
            i += 1;
        }
        i += 1;
        let at = format!("{}:{}", from.display(), start + 1);
        if body
            .iter()
            .all(|l| l.trim().is_empty() || l.trim().starts_with("{{#include "))
        {
            continue;
        }
        let marker = lines[..start]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().strip_prefix("<!-- excerpt: "))
            .and_then(|l| l.strip_suffix(" -->"));
        let Some(file) = marker else {
            errors.push(format!(
                "{at}: a Rust sample written by hand: include it from a compiled file \
                 ({{{{#include PATH:ANCHOR}}}}) or mark it `<!-- excerpt: PATH -->` \
                 and copy it verbatim"
            ));
            continue;
        };
        let source = read(&normalise(&dir.join(file)));
        let source: Vec<&str> = source
            .lines()
            .filter(|l| !l.contains("ANCHOR: ") && !l.contains("ANCHOR_END: "))
            .collect();
        let found = (0..source.len()).any(|s| {
            body.len() <= source.len() - s
                && body
                    .iter()
                    .zip(&source[s..])
                    .all(|(a, b)| a.trim() == b.trim())
        });
        if !found {
            errors.push(format!(
                "{at}: not a verbatim excerpt of {file}: copy it again from the file"
            ));
        }
    }
}

fn check_includes(from: &Path, text: &str, errors: &mut Vec<String>) {
    for (literal, inc) in includes(text, from.parent().expect("a file has a folder")) {
        let at = format!("{}: {literal}", from.display());
        if !inc.file.exists() {
            errors.push(format!("{at}: no file {}", inc.file.display()));
            continue;
        }
        if let Some(anchor) = &inc.anchor {
            match anchored(&read(&inc.file), anchor) {
                Some(body) if !body.trim().is_empty() => {}
                _ => errors.push(format!(
                    "{at}: no `ANCHOR: {anchor}` ... `ANCHOR_END: {anchor}` in {}",
                    inc.file.display()
                )),
            }
        }
    }
}

fn report(errors: Vec<String>) {
    assert!(
        errors.is_empty(),
        "{} problem(s):\n{}",
        errors.len(),
        errors.join("\n")
    );
}

#[test]
fn every_page_is_in_the_summary_and_every_link_anchor_and_include_resolves() {
    let summary = summary();
    let mut all = Vec::new();
    pages(&src(), &mut all);
    // Fragments included into a page are no pages of their own.
    let fragments: BTreeSet<PathBuf> = all
        .iter()
        .flat_map(|p| includes(&read(p), p.parent().expect("a page has a folder")))
        .map(|(_, inc)| inc.file)
        .collect();
    let mut errors = Vec::new();
    for page in &all {
        if !summary.contains(page) && !fragments.contains(page) {
            errors.push(format!("{}: not listed in SUMMARY.md", page.display()));
        }
        let raw = read(page);
        check_includes(page, &raw, &mut errors);
        check_links(page, &expanded(page), &summary, &mut errors);
    }
    for listed in &summary {
        if !listed.exists() {
            errors.push(format!(
                "SUMMARY.md lists {}, which does not exist",
                listed.display()
            ));
        }
    }
    report(errors);
}

#[test]
fn every_rust_sample_of_the_book_and_readme_is_compiled_code() {
    let mut all = Vec::new();
    pages(&src(), &mut all);
    all.push(repo().join("README.md"));
    let mut errors = Vec::new();
    for page in &all {
        check_rust_blocks(page, &read(page), &mut errors);
    }
    report(errors);
}

#[test]
fn every_relative_link_of_the_readme_resolves() {
    let readme = repo().join("README.md");
    let mut errors = Vec::new();
    check_links(&readme, &read(&readme), &summary(), &mut errors);
    report(errors);
}

#[test]
fn heading_ids_follow_mdbook() {
    let ids = heading_ids("# What happens when…\n## `wasmctrl run` flags\n## A\n## A\n");
    let want: BTreeSet<String> = ["what-happens-when", "wasmctrl-run-flags", "a", "a-1"]
        .map(String::from)
        .into();
    assert_eq!(ids, want);
}

/// The API docs link back into the book (`api/CRATE/index.html` sits two
/// levels below the book's root): each such link names a page that exists.
#[test]
fn links_from_the_api_docs_into_the_book_resolve() {
    let summary = summary();
    let mut errors = Vec::new();
    let mut found = 0;
    for file in ["host/src/lib.rs"] {
        let text = read(&repo().join(file));
        for target in links(&text) {
            let Some(page) = target.strip_prefix("../../") else {
                continue;
            };
            found += 1;
            let (page, anchor) = match page.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (page, None),
            };
            let md = if page == "index.html" {
                src().join("introduction.md")
            } else {
                src().join(page.replace(".html", ".md"))
            };
            if !summary.contains(&md) {
                errors.push(format!("{file}: link {target:?}: no page {}", md.display()));
            } else if let Some(anchor) = anchor {
                if !heading_ids(&expanded(&md)).contains(anchor) {
                    errors.push(format!("{file}: link {target:?}: no heading {anchor:?}"));
                }
            }
        }
    }
    assert!(found > 0, "the crate docs link into the book");
    report(errors);
}
