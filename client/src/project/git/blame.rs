//! `git blame` of a file's lines, as `baton why` reads them.

use std::path::Path;

use super::run;

/// The object name git gives lines not committed yet.
pub const NOT_COMMITTED: &str = "0000000000000000000000000000000000000000";

/// One line of a file, and the commit git says last changed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Line {
    /// Its number in the file (from 1).
    pub number: usize,
    pub text: String,
    pub commit: String,
    /// The file's path in that commit (blame follows renames).
    pub path: String,
    pub author: String,
    pub committed_us: i64,
    pub summary: String,
}

/// Blames `path` (relative to `root`) as it is in the work tree, lines `from..=to` (all of
/// them with `None`). Git's own message when it refuses.
pub fn blame(root: &Path, path: &str, range: Option<(usize, usize)>) -> Result<Vec<Line>, String> {
    let range = range.map(|(a, b)| format!("{a},{b}"));
    let mut args = vec!["blame", "--line-porcelain"];
    if let Some(r) = &range {
        args.extend(["-L", r.as_str()]);
    }
    args.extend(["--", path]);
    let out = run(root, &args, None)?;
    Ok(parse(&String::from_utf8_lossy(&out)))
}

/// Reads `--line-porcelain`: a header line `<commit> <orig> <final> [<n>]`, the commit's
/// fields, then the line's text after a tab.
fn parse(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut line = Line::default();
    let mut fresh = true;
    for l in text.lines() {
        if let Some(content) = l.strip_prefix('\t') {
            content.clone_into(&mut line.text);
            out.push(std::mem::take(&mut line));
            fresh = true;
            continue;
        }
        if fresh {
            let mut parts = l.split(' ');
            parts.next().unwrap_or_default().clone_into(&mut line.commit);
            line.number = parts.nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
            fresh = false;
            continue;
        }
        let (key, value) = l.split_once(' ').unwrap_or((l, ""));
        match key {
            "author" => value.clone_into(&mut line.author),
            "committer-time" => {
                line.committed_us = value.parse::<i64>().unwrap_or(0).saturating_mul(1_000_000);
            }
            "summary" => value.clone_into(&mut line.summary),
            "filename" => value.clone_into(&mut line.path),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_line_porcelain() {
        let text = "abababababababababababababababababababab 1 1 2\nauthor Ann\nauthor-mail <a@x>\n\
                    committer-time 1700000000\nsummary add it\nfilename src/old.rs\n\tfn main() {\n\
                    abababababababababababababababababababab 2 2\nauthor Ann\ncommitter-time 1700000000\n\
                    summary add it\nfilename src/old.rs\n\t}\n";
        let lines = parse(text);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].number, 1);
        assert_eq!(lines[0].text, "fn main() {");
        assert_eq!(lines[0].path, "src/old.rs");
        assert_eq!(lines[1].number, 2);
        assert_eq!(lines[1].text, "}");
        assert_eq!(lines[1].committed_us, 1_700_000_000_000_000);
    }
}
