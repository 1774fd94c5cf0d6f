//! What a commit link is made of, from git: the commits a range of HEAD's history added,
//! and of each its subject, time, files, `git patch-id --stable` and the fingerprints of the
//! lines it added (the CommitService comment in `proto/baton/v1/commit.proto` says how a
//! fingerprint is made; the server finds lines by them after a squash merge).

use std::collections::HashMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::run;

/// Fingerprints kept for one commit, at most (the hub's cap).
pub const MAX_LINES: usize = 5000;
/// Paths kept for one commit, at most (the hub's cap).
pub const MAX_FILES: usize = 1000;
/// Commits one range may add, at most: more is a branch switch or a pull, not work.
const MAX_RANGE: usize = 200;

/// A line's fingerprint: `None` for a line with fewer than two letters or digits (braces,
/// blank lines: in every file, they tell nothing).
pub fn fingerprint(path: &str, line: &str) -> Option<String> {
    let normal = line.split_whitespace().collect::<Vec<_>>().join(" ");
    if normal.chars().filter(|c| c.is_alphanumeric()).count() < 2 {
        return None;
    }
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update([0]);
    h.update(normal.as_bytes());
    let mut hex = hex::encode(h.finalize());
    hex.truncate(16);
    Some(hex)
}

/// A commit as a link records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Described {
    pub id: String,
    pub parents: Vec<String>,
    pub committed_us: i64,
    pub subject: String,
    pub files: Vec<String>,
    /// "" for a merge or an empty commit.
    pub patch_id: String,
    /// The fingerprints of the lines it added (distinct, at most `MAX_LINES`).
    pub fingerprints: Vec<String>,
    pub truncated: bool,
}

/// This repository's committer's email (`user.email`), if it has one.
pub fn own_email(root: &Path) -> Option<String> {
    let out = run(root, &["config", "user.email"], None).ok()?;
    Some(String::from_utf8_lossy(&out).trim().to_owned()).filter(|e| !e.is_empty())
}

/// The commits `to` has that `from` had not, oldest first, committed at or after
/// `since_us` (older ones came from elsewhere: a pull, a merge of others' work), and, with
/// `committer`, only those that email committed; `None` when the range is not one of new
/// work (more than `MAX_RANGE` commits, or git failed).
pub fn added(
    root: &Path,
    from: &str,
    to: &str,
    since_us: i64,
    committer: Option<&str>,
) -> Option<Vec<String>> {
    let range = format!("{from}..{to}");
    let max = format!("--max-count={}", MAX_RANGE + 1);
    let out = run(root, &["log", "--reverse", "--format=%H %ct %ce", &max, &range, "--"], None).ok()?;
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() > MAX_RANGE {
        return None;
    }
    // Committer times are whole seconds; clocks of one machine agree within that.
    let since_s = since_us.div_euclid(1_000_000) - 1;
    Some(
        lines
            .iter()
            .filter_map(|l| {
                let mut parts = l.splitn(3, ' ');
                Some((parts.next()?, parts.next()?, parts.next().unwrap_or_default()))
            })
            .filter(|(_, t, _)| t.parse::<i64>().is_ok_and(|t| t >= since_s))
            .filter(|(_, _, e)| committer.is_none_or(|mine| mine == *e))
            .map(|(id, _, _)| id.to_owned())
            .collect(),
    )
}

/// Whether `a` is an ancestor of `b` (or the same commit).
pub fn is_ancestor(root: &Path, a: &str, b: &str) -> bool {
    run(root, &["merge-base", "--is-ancestor", a, b], None).is_ok()
}

/// Describes commits (in their order), with three `git` processes: which of them git has,
/// `git log -p` of those, read here and by `git patch-id --stable`. A commit git does not
/// have is left out.
pub fn describe(root: &Path, ids: &[String]) -> Result<Vec<Described>, String> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let asked = ids.join("\n") + "\n";
    let kinds =
        run(root, &["cat-file", "--batch-check=%(objectname) %(objecttype)"], Some(asked.as_bytes()))?;
    let kinds = String::from_utf8_lossy(&kinds);
    let revs: Vec<&str> = kinds.lines().filter_map(|l| l.strip_suffix(" commit")).collect();
    if revs.is_empty() {
        return Ok(Vec::new());
    }
    let args = [
        "log",
        "--no-walk=unsorted",
        "--stdin",
        "-p",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "--diff-algorithm=myers",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        // Every line after the first indented: patch-id takes a line that starts with an
        // object name for a commit's start.
        "--format=commit %H%n    %P%n    %ct%n    %s",
    ];
    let patch = run(root, &args, Some((revs.join("\n") + "\n").as_bytes()))?;
    let ids_out = run(root, &["patch-id", "--stable"], Some(&patch))?;
    let patch_ids: HashMap<String, String> = String::from_utf8_lossy(&ids_out)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(patch, commit)| (commit.to_owned(), patch.to_owned()))
        .collect();
    let mut out = parse(&String::from_utf8_lossy(&patch));
    for d in &mut out {
        if d.parents.len() <= 1 {
            d.patch_id = patch_ids.get(&d.id).cloned().unwrap_or_default();
        }
    }
    Ok(out)
}

/// Reads `git log -p` in the format `describe` asks for.
fn parse(text: &str) -> Vec<Described> {
    let mut out: Vec<Described> = Vec::new();
    let mut meta = 0;
    let mut path = String::new();
    let mut in_hunk = false;
    for line in text.lines() {
        if let Some(id) = line.strip_prefix("commit ").filter(|id| is_object_id(id)) {
            out.push(Described { id: id.to_owned(), ..Described::default() });
            meta = 3;
            in_hunk = false;
            continue;
        }
        let Some(d) = out.last_mut() else { continue };
        if meta > 0 {
            let value = line.strip_prefix("    ").unwrap_or(line);
            match meta {
                3 => d.parents = value.split_whitespace().map(str::to_owned).collect(),
                2 => d.committed_us = value.trim().parse::<i64>().unwrap_or(0).saturating_mul(1_000_000),
                _ => value.clone_into(&mut d.subject),
            }
            meta -= 1;
            continue;
        }
        if let Some(rest) = line.strip_prefix("diff --git ") {
            path = header_path(rest).unwrap_or_default();
            in_hunk = false;
            if !path.is_empty() && d.files.len() < MAX_FILES && !d.files.contains(&path) {
                d.files.push(path.clone());
            }
            continue;
        }
        if !in_hunk {
            if let Some(name) = line.strip_prefix("+++ b/").or_else(|| line.strip_prefix("--- a/")) {
                if path.is_empty() {
                    name.trim_end_matches('\t').clone_into(&mut path);
                    if d.files.len() < MAX_FILES && !d.files.contains(&path) {
                        d.files.push(path.clone());
                    }
                }
                continue;
            }
            in_hunk = line.starts_with("@@");
            continue;
        }
        if line.starts_with("@@") {
            continue;
        }
        if let Some(added) = line.strip_prefix('+')
            && let Some(f) = fingerprint(&path, added)
            && !d.fingerprints.contains(&f)
        {
            if d.fingerprints.len() >= MAX_LINES {
                d.truncated = true;
            } else {
                d.fingerprints.push(f);
            }
        }
    }
    out
}

/// The path of `a/P b/P` (renames are off, so both halves are one path); `None` for a
/// quoted one (the `---`/`+++` lines give it).
fn header_path(rest: &str) -> Option<String> {
    if rest.starts_with('"') || rest.len() < 5 {
        return None;
    }
    let n = (rest.len() - 5) / 2;
    let (a, b) = (rest.get(2..2 + n)?, rest.get(5 + n..)?);
    (rest.starts_with("a/") && rest.get(2 + n..5 + n) == Some(" b/") && a == b).then(|| a.to_owned())
}

pub fn is_object_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::super::test_git as git;
    use super::*;

    #[test]
    fn fingerprints_ignore_spacing_and_skip_what_tells_nothing() {
        assert_eq!(fingerprint("a.rs", "  let x =   1;"), fingerprint("a.rs", "let x = 1;\t"));
        assert_ne!(fingerprint("a.rs", "let x = 1;"), fingerprint("b.rs", "let x = 1;"));
        assert_eq!(fingerprint("a.rs", "}"), None);
        assert_eq!(fingerprint("a.rs", "   "), None);
        assert_eq!(fingerprint("a.rs", "x;").map(|f| f.len()), None, "one letter");
        assert_eq!(fingerprint("a.rs", "ok").map(|f| f.len()), Some(16));
    }

    #[test]
    fn describes_commits_as_git_patch_id_sees_them() {
        let repo = tempfile::tempdir().unwrap();
        let dir = repo.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a.txt"), "first line\n}\n").unwrap();
        std::fs::write(dir.join("my file.txt"), "spaced name\n").unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-q", "-m", "--- looks like a diff"]);
        let one = git(dir, &["rev-parse", "HEAD"]);
        std::fs::write(dir.join("a.txt"), "first line\nsecond line\n}\n").unwrap();
        std::fs::write(dir.join("bin.dat"), [0u8, 1, 2, 3]).unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-q", "-m", "two"]);
        let two = git(dir, &["rev-parse", "HEAD"]);
        let empty = {
            git(dir, &["commit", "-q", "--allow-empty", "-m", "nothing"]);
            git(dir, &["rev-parse", "HEAD"])
        };
        let got = describe(dir, &[one.clone(), two.clone(), empty.clone()]).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].subject, "--- looks like a diff");
        assert_eq!(got[0].files, vec!["a.txt", "my file.txt"]);
        assert_eq!(got[0].fingerprints.len(), 2, "`}}` is not fingerprinted");
        assert_eq!(got[1].files, vec!["a.txt", "bin.dat"]);
        assert_eq!(got[1].fingerprints, vec![fingerprint("a.txt", "second line").unwrap()]);
        assert_eq!(got[1].parents, vec![one.clone()]);
        assert!(got[1].committed_us > 0);
        let show = Command::new("sh")
            .arg("-c")
            .arg(format!("git show {two} | git patch-id --stable"))
            .current_dir(dir)
            .output()
            .unwrap();
        let expected = String::from_utf8_lossy(&show.stdout).split(' ').next().unwrap_or_default().to_owned();
        assert_eq!(got[1].patch_id, expected, "the patch id `git show | git patch-id --stable` gives");
        assert_eq!(got[2].patch_id, "", "an empty commit has none");
        // The same change cherry-picked elsewhere has the same patch id.
        git(dir, &["checkout", "-q", "-b", "other", &one]);
        git(dir, &["commit", "-q", "--allow-empty", "-m", "side"]);
        git(dir, &["cherry-pick", &two]);
        let picked = git(dir, &["rev-parse", "HEAD"]);
        assert_ne!(picked, two);
        assert_eq!(describe(dir, std::slice::from_ref(&picked)).unwrap()[0].patch_id, got[1].patch_id);
        // Ranges: what a move of HEAD added, oldest first.
        assert_eq!(added(dir, &one, &empty, 0, None).unwrap(), vec![two.clone(), empty.clone()]);
        assert_eq!(
            added(dir, &one, &empty, i64::MAX / 2, None).unwrap(),
            Vec::<String>::new(),
            "older than asked"
        );
        assert_eq!(added(dir, &one, &empty, 0, Some("t@t")).unwrap().len(), 2, "committed by this user");
        assert!(
            added(dir, &one, &empty, 0, Some("someone@else")).unwrap().is_empty(),
            "committed by another"
        );
        git(dir, &["config", "user.email", "t@t"]);
        assert_eq!(own_email(dir).as_deref(), Some("t@t"));
        assert!(is_ancestor(dir, &one, &two) && !is_ancestor(dir, &two, &one));
        assert!(describe(dir, &["0".repeat(40)]).unwrap().is_empty(), "a commit git lacks is left out");
    }
}
