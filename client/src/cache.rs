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

/// Rewrites the project's cached brief in place under a lock: a file made new on every
/// SessionStart (write, then rename) cost hook-bench's "SessionStart, 4 at once" row an
/// inode allocation each, slow on ext4 beside many recently deleted files. A write cut
/// short leaves a cache that does not parse: no cached brief until the next SessionStart.
pub fn store(data_dir: &Path, project: &str, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let p = path(data_dir, project);
    if let Some(dir) = p.parent() {
        crate::fsperm::create_private_dir(dir)?;
    }
    let brief = CachedBrief {
        project: project.to_owned(),
        text: text.to_owned(),
        cached_at_us: crate::write::now_us(),
    };
    let bytes = serde_json::to_vec(&brief)?;
    let mut file = crate::fsperm::open_private_keep(&p)?;
    file.lock()?;
    file.set_len(0)?;
    file.write_all(&bytes)?;
    Ok(())
}

pub fn load(data_dir: &Path, project: &str) -> Option<CachedBrief> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path(data_dir, project)).ok()?;
    file.lock_shared().ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
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
