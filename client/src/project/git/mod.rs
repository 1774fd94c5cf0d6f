//! The few git facts Baton needs, from the `git` binary (fast, and always the user's own
//! configuration).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub mod blame;
pub mod commits;
mod plain;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8_lossy(&out.stdout).trim_end().to_owned();
    Some(s)
}

/// Runs `git` in `dir` with the user's configuration but a diff format of git's defaults
/// (what patch ids and fingerprints are made of must not change with a user's settings);
/// `stdin` is written to it. Its output, or what it said on stderr.
pub(crate) fn run(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<Vec<u8>, String> {
    use std::io::Write as _;
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "core.quotepath=off", "-c", "diff.noprefix=false", "-c", "diff.mnemonicprefix=false"])
        .args(["-c", "diff.relative=false", "-c", "color.ui=never", "-c", "log.showsignature=false"])
        .args(["-c", "diff.context=3", "-c", "diff.interHunkContext=0", "-c", "diff.indentHeuristic=true"])
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run git: {e}"))?;
    let writer = child.stdin.take().zip(stdin.map(<[u8]>::to_vec)).map(|(mut pipe, bytes)| {
        // A thread: git may fill its stdout before it has read all of stdin.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        })
    });
    let out = child.wait_with_output().map_err(|e| format!("git did not finish: {e}"))?;
    if let Some(w) = writer {
        let _ = w.join();
    }
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// Where a directory stands in git, read with one `git` call (hooks are latency-bound).
#[derive(Debug, Clone, Default)]
pub struct Info {
    pub toplevel: Option<PathBuf>,
    pub head: Option<String>,
    pub branch: Option<String>,
}

pub fn info(dir: &Path) -> Info {
    if let Some(info) = plain::read(dir) {
        return info;
    }
    if let Some(out) = git(dir, &["rev-parse", "--show-toplevel", "HEAD", "--abbrev-ref", "HEAD"]) {
        let mut lines = out.lines();
        let toplevel = lines.next().filter(|s| !s.is_empty()).map(PathBuf::from);
        let head = lines.next().filter(|s| !s.is_empty()).map(str::to_owned);
        let branch = lines.next().filter(|b| !b.is_empty() && *b != "HEAD").map(str::to_owned);
        return Info { toplevel, head, branch };
    }
    // No commit yet (HEAD unresolved), or not a repository.
    Info { toplevel: toplevel(dir), head: None, branch: None }
}

pub fn toplevel(dir: &Path) -> Option<PathBuf> {
    git(dir, &["rev-parse", "--show-toplevel"]).filter(|s| !s.is_empty()).map(PathBuf::from)
}

/// `origin`'s URL, else the first remote's.
pub fn remote_url(root: &Path) -> Option<String> {
    if let Some(url) = git(root, &["remote", "get-url", "origin"]) {
        return Some(url);
    }
    let first = git(root, &["remote"])?.lines().next()?.to_owned();
    git(root, &["remote", "get-url", &first])
}

pub fn branch(dir: &Path) -> Option<String> {
    git(dir, &["rev-parse", "--abbrev-ref", "HEAD"]).filter(|b| !b.is_empty() && b != "HEAD")
}

pub fn head(dir: &Path) -> Option<String> {
    git(dir, &["rev-parse", "HEAD"]).filter(|h| !h.is_empty())
}

/// Changes from `base` to HEAD (`git diff --name-status`), newest meaning: as git lists
/// them. `Err` says why they are unknown (e.g. the commit is not in this clone).
pub fn changes_since(dir: &Path, base: &str) -> Result<Vec<String>, String> {
    if git(dir, &["cat-file", "-e", &format!("{base}^{{commit}}")]).is_none() {
        return Err(format!(
            "commit {} of the last session is not in this clone (fetch to see changes)",
            short(base)
        ));
    }
    let diff = git(dir, &["diff", "--name-status", &format!("{base}..HEAD")]).ok_or("git diff failed")?;
    Ok(diff.lines().map(|l| l.replace('\t', " ")).filter(|l| !l.is_empty()).collect())
}

pub fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// git in `dir` as a fixed author, for tests: its output; a failure fails the test.
#[cfg(test)]
pub(crate) fn test_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
