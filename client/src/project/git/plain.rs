//! `git::info` without a `git` process, for the plain layout only: a `.git` directory owned
//! by this user, HEAD naming a branch with a loose or packed ref, or a detached commit.
//! Anything else (linked worktrees and submodules, whose `.git` is a file; `GIT_*` variables
//! that move the repository; reftable; a branch without commits; someone else's repository,
//! which git's `safe.directory` rules refuse) is left to `git` itself, so the answer is
//! always git's. It exists for hook-bench's "SessionStart, 4 at once" row: the `git`
//! process was a fifth of each hook's CPU, on two cores shared by four hooks.

use std::fs;
use std::path::{Path, PathBuf};

use super::Info;

/// Variables that change where git looks: with any of them set, ask git.
const MOVES_THE_REPOSITORY: [&str; 6] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_CONFIG_PARAMETERS",
];

pub fn read(dir: &Path) -> Option<Info> {
    if MOVES_THE_REPOSITORY.iter().any(|v| std::env::var_os(v).is_some()) {
        return None;
    }
    // git reports the physical path of the work tree.
    let dir = fs::canonicalize(dir).ok()?;
    let top = dir.ancestors().find(|d| d.join(".git").symlink_metadata().is_ok())?.to_path_buf();
    let git_dir = top.join(".git");
    let meta = git_dir.symlink_metadata().ok()?;
    if !meta.is_dir() || !owned_by_this_user(&meta) || git_dir.join("reftable").exists() {
        return None;
    }
    let head = fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let head = head.trim_end();
    if let Some(name) = head.strip_prefix("ref: ") {
        let branch = name.strip_prefix("refs/heads/")?;
        let commit = loose_ref(&git_dir, name).or_else(|| packed_ref(&git_dir, name))?;
        return Some(Info { toplevel: Some(top), head: Some(commit), branch: Some(branch.to_owned()) });
    }
    is_commit_id(head).then(|| Info { toplevel: Some(top), head: Some(head.to_owned()), branch: None })
}

fn loose_ref(git_dir: &Path, name: &str) -> Option<String> {
    // A ref name is git's own, but it comes from a file: no way out of `refs/`.
    if name.split('/').any(|part| part.is_empty() || part == "." || part == "..") {
        return None;
    }
    let path: PathBuf = git_dir.join(name);
    let text = fs::read_to_string(path).ok()?;
    let id = text.trim_end();
    is_commit_id(id).then(|| id.to_owned())
}

/// `packed-refs`: `<id> <name>` lines, `#` headers and `^<id>` peeled tags.
fn packed_ref(git_dir: &Path, name: &str) -> Option<String> {
    let text = fs::read_to_string(git_dir.join("packed-refs")).ok()?;
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(_, n)| *n == name)
        .map(|(id, _)| id)
        .filter(|id| is_commit_id(id))
        .map(str::to_owned)
}

fn is_commit_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(target_os = "linux")]
fn owned_by_this_user(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    // `/proc/self` belongs to the process's effective user.
    fs::metadata("/proc/self").is_ok_and(|me| me.uid() == meta.uid())
}

#[cfg(not(target_os = "linux"))]
fn owned_by_this_user(_meta: &fs::Metadata) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        super::super::test_git(dir, args);
    }

    /// What `git` says, for comparison.
    fn by_git(dir: &Path) -> (Option<PathBuf>, Option<String>, Option<String>) {
        let out = |args: &[&str]| {
            let o = Command::new("git").args(args).current_dir(dir).output().ok()?;
            o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim_end().to_owned())
        };
        (
            out(&["rev-parse", "--show-toplevel"]).map(PathBuf::from),
            out(&["rev-parse", "HEAD"]),
            out(&["symbolic-ref", "--short", "-q", "HEAD"]),
        )
    }

    fn same_as_git(dir: &Path) {
        let info = read(dir).unwrap_or_else(|| panic!("the plain layout in {}", dir.display()));
        assert_eq!((info.toplevel, info.head, info.branch), by_git(dir), "{}", dir.display());
    }

    #[test]
    fn reads_what_git_reads_in_the_plain_layout() {
        let repo = tempfile::tempdir().unwrap();
        let dir = repo.path();
        git(dir, &["init", "-q", "-b", "main"]);
        assert!(read(dir).is_none(), "no commit yet: git decides");
        git(dir, &["commit", "-q", "--allow-empty", "-m", "one"]);
        same_as_git(dir);
        fs::create_dir_all(dir.join("src/deep")).unwrap();
        same_as_git(&dir.join("src/deep"));
        git(dir, &["checkout", "-q", "-b", "feature/x"]);
        git(dir, &["commit", "-q", "--allow-empty", "-m", "two"]);
        same_as_git(dir);
        git(dir, &["pack-refs", "--all"]);
        assert!(!dir.join(".git/refs/heads/feature/x").exists());
        same_as_git(dir);
        git(dir, &["checkout", "-q", "--detach"]);
        same_as_git(dir);
    }

    #[test]
    fn leaves_other_layouts_to_git() {
        let repo = tempfile::tempdir().unwrap();
        let dir = repo.path().join("main");
        fs::create_dir(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        git(&dir, &["commit", "-q", "--allow-empty", "-m", "one"]);
        git(&dir, &["worktree", "add", "-q", "../linked"]);
        assert!(read(&repo.path().join("linked")).is_none(), "a linked worktree's .git is a file");
        fs::write(dir.join(".git/HEAD"), "ref: refs/heads/../../../../etc/passwd\n").unwrap();
        assert!(read(&dir).is_none(), "a ref name leaving refs/");
        fs::write(dir.join(".git/HEAD"), "ref: refs/heads/gone\n").unwrap();
        assert!(read(&dir).is_none(), "a branch without commits");
        if by_git(repo.path()).0.is_none() {
            assert!(read(repo.path()).is_none(), "not a repository");
        }
    }
}
