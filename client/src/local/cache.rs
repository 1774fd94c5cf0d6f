//! The last brief seen per project, printed (with its age) when the hub is unreachable.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CachedBrief {
    pub project: String,
    pub text: String,
    pub cached_at_us: i64,
}

fn path(data_dir: &Path, project: &str) -> PathBuf {
    let digest = hex::encode(Sha256::digest(project.as_bytes()));
    data_dir.join("briefs").join(format!("{}.json", &digest[..24]))
}

pub fn store(data_dir: &Path, project: &str, text: &str) -> anyhow::Result<()> {
    let p = path(data_dir, project);
    if let Some(dir) = p.parent() {
        crate::fsperm::create_private_dir(dir)?;
    }
    let brief = CachedBrief {
        project: project.to_owned(),
        text: text.to_owned(),
        cached_at_us: crate::clock::now_us(),
    };
    // Hooks of parallel conversations store at once: each writes a temporary file of its
    // own (`write_cache`), then renames it over the brief.
    crate::fsperm::write_cache(&p, &serde_json::to_vec(&brief)?)?;
    Ok(())
}

pub fn load(data_dir: &Path, project: &str) -> Option<CachedBrief> {
    let bytes = std::fs::read(path(data_dir, project)).ok()?;
    serde_json::from_slice::<CachedBrief>(&bytes).ok().filter(|b| b.project == project)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hooks of parallel conversations store and read the same project's brief at once:
    /// a reader sees a whole brief, never a half-written one.
    #[test]
    fn stores_and_loads_at_once_never_tear() {
        let dir = tempfile::tempdir().unwrap();
        let texts: Vec<String> = (0..4).map(|i| format!("brief {i} ").repeat(2000 + i * 3000)).collect();
        store(dir.path(), "p", &texts[0]).unwrap();
        std::thread::scope(|s| {
            for t in &texts {
                s.spawn(|| {
                    for _ in 0..50 {
                        store(dir.path(), "p", t).unwrap();
                    }
                });
            }
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let got = load(dir.path(), "p").expect("a whole brief");
                        assert!(texts.contains(&got.text), "a torn brief of {} chars", got.text.len());
                    }
                });
            }
        });
    }
}
