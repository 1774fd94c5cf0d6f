//! A repository's remote URL, remembered while the git configuration that decides it is
//! unchanged. Finding the project is on every hook's path, and asking `git` is a process
//! each time. This device serves hook-bench's SessionStart rows (docs/performance.md).
//!
//! Remembered per repository root with the size and modification time of each config file
//! git reads (the repository's, the user's, the system's), and for at most ten minutes.
//! Nothing is remembered when the configuration may come from elsewhere: a worktree or
//! submodule (`.git` is a file) or `GIT_CONFIG_*` / `GIT_DIR` in the environment. A file
//! pulled in by an `[include]` is not watched; the ten minutes bound what that can cost.

use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::project::git;

const FRESH_FOR: Duration = Duration::from_mins(10);

/// What a config file looked like: (path, size, mtime in ns), or absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    path: PathBuf,
    seen: Option<(u64, u128)>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Remembered {
    root: PathBuf,
    stamps: Vec<Stamp>,
    url: Option<String>,
    checked_us: i64,
}

/// `origin`'s URL (else the first remote's) of the repository at `root`, from what was
/// remembered under `data_dir` when still true, else from git (and then remembered).
pub fn url(data_dir: Option<&Path>, root: &Path) -> Option<String> {
    let Some((data_dir, stamps)) = data_dir.zip(stamps(root)) else {
        return git::remote_url(root);
    };
    let file = path(data_dir, root);
    let now = crate::clock::now_us();
    let fresh_for = i64::try_from(FRESH_FOR.as_micros()).unwrap_or(i64::MAX);
    if let Ok(bytes) = std::fs::read(&file)
        && let Ok(r) = serde_json::from_slice::<Remembered>(&bytes)
        && r.root == root
        && r.stamps == stamps
        && (0..fresh_for).contains(&(now - r.checked_us))
    {
        return r.url;
    }
    let url = git::remote_url(root);
    let remembered = Remembered { root: root.to_path_buf(), stamps, url: url.clone(), checked_us: now };
    // A cache: failing to keep it only costs the next call a `git` process.
    let _ = store(&file, &remembered);
    url
}

fn store(file: &Path, remembered: &Remembered) -> anyhow::Result<()> {
    if let Some(dir) = file.parent() {
        crate::fsperm::create_private_dir(dir)?;
    }
    // Hooks of several agents may write the same repository's at once: each through a
    // temporary file of its own.
    crate::fsperm::write_cache(file, &serde_json::to_vec(remembered)?)?;
    Ok(())
}

fn path(data_dir: &Path, root: &Path) -> PathBuf {
    let digest = hex::encode(Sha256::digest(root.as_os_str().as_encoded_bytes()));
    data_dir.join("remotes").join(format!("{}.json", &digest[..24]))
}

/// The config files git reads for `root`, stamped; None when the configuration may come
/// from somewhere they do not show.
fn stamps(root: &Path) -> Option<Vec<Stamp>> {
    let dot_git = root.join(".git");
    if !dot_git.is_dir() {
        return None;
    }
    let from_env =
        ["GIT_DIR", "GIT_CONFIG", "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_NOSYSTEM"];
    if from_env.iter().any(|v| std::env::var_os(v).is_some()) {
        return None;
    }
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = var("HOME");
    let xdg = var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
    let files = [
        Some(dot_git.join("config")),
        var("GIT_CONFIG_GLOBAL").or_else(|| home.as_ref().map(|h| h.join(".gitconfig"))),
        xdg.map(|x| x.join("git").join("config")),
        Some(var("GIT_CONFIG_SYSTEM").unwrap_or_else(|| PathBuf::from("/etc/gitconfig"))),
    ];
    Some(files.into_iter().flatten().map(|path| Stamp { seen: seen(&path), path }).collect())
}

fn seen(path: &Path) -> Option<(u64, u128)> {
    let meta = std::fs::metadata(path).ok()?;
    let modified = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?.as_nanos();
    Some((meta.len(), modified))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::process::Command;

    use super::*;

    fn git_in(dir: &Path, args: &[&str]) {
        let ok = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap().status.success();
        assert!(ok, "git {args:?}");
    }

    /// A repository with an origin, asked once (so remembered), and a data dir; returns
    /// them with the remembered file's path and contents.
    fn remembered_repo() -> (tempfile::TempDir, tempfile::TempDir, PathBuf, Remembered) {
        let repo = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        git_in(repo.path(), &["init", "-q"]);
        git_in(repo.path(), &["remote", "add", "origin", "git@github.com:org/one.git"]);
        assert_eq!(url(Some(data.path()), repo.path()).as_deref(), Some("git@github.com:org/one.git"));
        let file = path(data.path(), repo.path());
        assert!(file.exists(), "remembered");
        let r: Remembered = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        (repo, data, file, r)
    }

    #[test]
    fn remembered_until_the_config_changes() {
        let (repo, data, file, mut r) = remembered_repo();

        // What is remembered is what is answered while the config is unchanged…
        r.url = Some("remembered".into());
        std::fs::write(&file, serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(url(Some(data.path()), repo.path()).as_deref(), Some("remembered"));

        // …and a changed config is asked again.
        git_in(
            repo.path(),
            &["remote", "set-url", "origin", "https://github.com/org/two-with-a-longer-name"],
        );
        assert_eq!(
            url(Some(data.path()), repo.path()).as_deref(),
            Some("https://github.com/org/two-with-a-longer-name")
        );
    }

    #[test]
    fn stale_after_ten_minutes() {
        let (repo, data, file, mut r) = remembered_repo();
        r.url = Some("remembered".into());
        r.checked_us -= 11 * 60 * 1_000_000;
        std::fs::write(&file, serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(url(Some(data.path()), repo.path()).as_deref(), Some("git@github.com:org/one.git"));
    }

    #[test]
    fn no_repository_no_remote() {
        let dir = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        assert_eq!(url(Some(data.path()), dir.path()), None);
        assert!(!data.path().join("remotes").exists(), "nothing remembered outside a repository");
    }
}
