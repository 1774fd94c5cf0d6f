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
        cached_at_us: crate::write::now_us(),
    };
    // Hooks of parallel conversations store at once: each writes its own temporary file.
    let tmp = p.with_extension(format!("{}.tmp", std::process::id()));
    crate::fsperm::write_private(&tmp, &serde_json::to_vec(&brief)?)?;
    std::fs::rename(tmp, p)?;
    Ok(())
}

pub fn load(data_dir: &Path, project: &str) -> Option<CachedBrief> {
    let bytes = std::fs::read(path(data_dir, project)).ok()?;
    serde_json::from_slice::<CachedBrief>(&bytes).ok().filter(|b| b.project == project)
}
