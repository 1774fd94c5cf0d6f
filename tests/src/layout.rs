//! The client's and the server's modules depend on each other one way down: no set of two
//! or more top-level modules of a crate (a folder with its submodules counts as one;
//! `lib.rs`'s and `main.rs`'s own items as `lib`) reaches each other through `crate::` or
//! `super::` paths, in `use` lines or in code. A circle is named with the modules in it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text without `//` comments (doc comments name paths that are not dependencies).
fn code(text: &str) -> String {
    text.lines().map(|l| l.find("//").map_or(l, |at| &l[..at])).collect::<Vec<_>>().join("\n")
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The first names after each `crate::` (a `{…}` group gives each of its first names).
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        out.push(ident(&group[i..]).to_owned());
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident(rest).to_owned());
        }
    }
    out
}

/// The module a file belongs to, and how many `super::` reach the crate root from it.
fn owner(src: &Path, file: &Path) -> (String, usize) {
    let rel = file.strip_prefix(src).expect("under src");
    let parts: Vec<&str> = rel.iter().map(|p| p.to_str().unwrap_or("")).collect();
    let depth = if parts.last().is_some_and(|f| *f == "mod.rs") { parts.len() - 1 } else { parts.len() };
    let top = parts[0].trim_end_matches(".rs");
    let top = if top == "lib" || top == "main" { "lib" } else { top };
    (top.to_owned(), depth)
}

fn edges(src: &Path, modules: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let (from, depth) = owner(src, &file);
        let text = code(&std::fs::read_to_string(&file).expect("read"));
        let mut targets = crate_paths(&text);
        // `super::` as many times as the file is deep reaches the crate root; inside the
        // file's inline module (its tests) once more.
        let inline = text.match_indices('\n').map(|(at, _)| at).find(|at| {
            let line = text[at + 1..].lines().next().unwrap_or_default();
            (line.starts_with("mod ") || line.starts_with("pub mod ")) && line.trim_end().ends_with('{')
        });
        let (outer, inner) = text.split_at(inline.unwrap_or(text.len()));
        for (part, deep) in [(outer, depth), (inner, depth + 1)] {
            if deep == 0 {
                continue;
            }
            let root = "super::".repeat(deep);
            for (at, _) in part.match_indices(&root) {
                let rest = &part[at + root.len()..];
                if !rest.starts_with("super::") {
                    targets.push(ident(rest).to_owned());
                }
            }
        }
        // In lib.rs the modules are in scope by their names.
        if from == "lib" {
            for m in modules {
                let bare = format!("{m}::");
                let found = text.match_indices(&bare).any(|(at, _)| {
                    !text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
                });
                if found {
                    targets.push(m.clone());
                }
            }
        }
        for target in targets {
            let to = if modules.contains(&target) { target } else { "lib".to_owned() };
            if to != from {
                graph.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    graph
}

/// Strongly connected sets of two or more (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let lw = self.low[w.as_str()];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(lw));
                } else if self.on.contains(w.as_str()) {
                    let iw = self.index[w.as_str()];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(iw));
                }
            }
            if self.low[v] == self.index[v] {
                let mut set = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    set.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.out.push(set);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.out
}

/// The circles among the top-level modules of the crate whose sources are in `src`, each
/// with its edges, for a message ("a → b").
pub fn circles_in(src: &Path) -> Vec<String> {
    let modules: BTreeSet<String> = std::fs::read_dir(src)
        .expect("read src")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let name = name.strip_suffix(".rs").map_or(name.clone(), str::to_owned);
            (name != "lib" && name != "main").then_some(name)
        })
        .collect();
    let graph = edges(src, &modules);
    circles(&graph)
        .iter()
        .map(|set| {
            let inside: Vec<String> = set
                .iter()
                .flat_map(|m| graph[m].iter().filter(|t| set.contains(t)).map(move |t| format!("{m} → {t}")))
                .collect();
            format!("circle of {}: {}", set.len(), inside.join(", "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_src(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name).join("src")
    }

    #[test]
    fn the_client_has_no_circles() {
        let found = circles_in(&crate_src("client"));
        assert!(found.is_empty(), "modules that reach each other: {found:#?}");
    }

    #[test]
    fn the_server_has_no_circles() {
        let found = circles_in(&crate_src("server"));
        assert!(found.is_empty(), "modules that reach each other: {found:#?}");
    }

    #[test]
    fn a_circle_is_found() {
        let graph: BTreeMap<String, BTreeSet<String>> =
            [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a", "d"]), ("d", vec![])]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
                .collect();
        assert_eq!(circles(&graph), [["a", "b", "c"]]);
        assert_eq!(crate_paths("use crate::{a::b, c, d::{e, f}}; crate::g::h(); x"), ["a", "c", "d", "g"]);
    }
}
