//! Project identity: the normalized git remote (so ssh, https, scp-like and `.git` forms
//! are one project, on any machine), or a `.baton.toml` name, or the path as a last resort.

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub mod git;
pub mod remotes;

/// How a project key was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    BatonToml(PathBuf),
    GitRemote(String),
    Path,
    /// As the conversation's SessionStart found it (its record on this machine).
    Recorded,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BatonToml(file) => write!(f, "{}", file.display()),
            Self::GitRemote(remote) => write!(f, "git remote {remote}"),
            Self::Path => f.write_str("the directory's path: no git remote or .baton.toml"),
            Self::Recorded => f.write_str("the conversation's record"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub key: String,
    pub source: Source,
    /// The repository (or `.baton.toml`) root, else the directory itself.
    pub root: PathBuf,
}

#[derive(Debug, Deserialize)]
struct BatonToml {
    project: Option<String>,
}

/// Normalizes a git remote URL to `host/path` (lower-case host, no user, port, scheme or
/// `.git`): `git@github.com:org/repo.git`, `https://github.com/org/repo`,
/// `ssh://git@github.com:22/org/repo` → `github.com/org/repo`.
pub fn normalize_remote(url: &str) -> Option<String> {
    let url = url.trim();
    let (host, path) = if let Some((_, rest)) = url.split_once("://") {
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host = host.split_once(':').map_or(host, |(h, _)| h);
        (host, path)
    } else if let Some((authority, path)) = url.split_once(':') {
        // scp-like: [user@]host:path (not a Windows drive or a local path)
        if authority.contains('/') || authority.len() < 2 {
            return None;
        }
        (authority.rsplit_once('@').map_or(authority, |(_, h)| h), path)
    } else {
        return None;
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path).trim_end_matches('/');
    if host.is_empty() || path.is_empty() {
        return None;
    }
    Some(format!("{}/{}", host.to_ascii_lowercase(), path))
}

/// Finds the project of `dir`.
pub fn identify(dir: &Path) -> Project {
    identify_in(dir, git::toplevel(dir))
}

/// Finds the project of `dir`, its git toplevel already known.
pub fn identify_in(dir: &Path, toplevel: Option<PathBuf>) -> Project {
    // A .baton.toml names the project explicitly: at the repository's root, or in `dir`
    // itself outside a repository; never in another parent (anyone can write one in /tmp
    // or a shared folder above your checkout and take its writes).
    let home = toplevel.clone().unwrap_or_else(|| dir.to_path_buf());
    let file = home.join(".baton.toml");
    if let Ok(text) = std::fs::read_to_string(&file)
        && let Ok(BatonToml { project: Some(name) }) = toml::from_str::<BatonToml>(&text)
        && !name.trim().is_empty()
    {
        return Project { key: name.trim().to_owned(), source: Source::BatonToml(file), root: home };
    }
    if let Some(root) = toplevel {
        let data_dir = crate::config::dirs().ok().map(|(_, data)| data);
        if let Some(remote) =
            crate::project::remotes::url(data_dir.as_deref(), &root).and_then(|u| normalize_remote(&u))
        {
            return Project { key: remote.clone(), source: Source::GitRemote(remote), root };
        }
        return Project { key: format!("path:{}", root.display()), source: Source::Path, root };
    }
    let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    Project { key: format!("path:{}", abs.display()), source: Source::Path, root: abs }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_baton_toml_counts_only_at_the_root() -> std::io::Result<()> {
        let parent = tempfile::tempdir()?;
        std::fs::write(parent.path().join(".baton.toml"), "project = \"planted\"\n")?;
        let dir = parent.path().join("work");
        std::fs::create_dir(&dir)?;
        // Outside a repository: only the working directory's own file.
        assert_ne!(identify_in(&dir, None).key, "planted");
        std::fs::write(dir.join(".baton.toml"), "project = \"mine\"\n")?;
        assert_eq!(identify_in(&dir, None).key, "mine");
        // In a repository: only the root's, also from a subdirectory.
        let sub = dir.join("src");
        std::fs::create_dir(&sub)?;
        assert_eq!(identify_in(&sub, Some(dir.clone())).key, "mine");
        assert_ne!(identify_in(&sub, None).key, "mine");
        Ok(())
    }

    #[test]
    fn remote_forms_are_one_project() {
        for url in [
            "git@github.com:org/repo.git",
            "https://github.com/org/repo",
            "https://github.com/org/repo.git/",
            "ssh://git@github.com/org/repo",
            "ssh://git@GitHub.com:22/org/repo.git",
            "https://user:pw@github.com/org/repo",
        ] {
            assert_eq!(normalize_remote(url).as_deref(), Some("github.com/org/repo"), "{url}");
        }
        assert_eq!(
            normalize_remote("git@gitlab.example.com:group/sub/repo.git").as_deref(),
            Some("gitlab.example.com/group/sub/repo")
        );
        assert_eq!(normalize_remote("/local/path/repo"), None);
        assert_eq!(normalize_remote("C:/x"), None);
    }
}
