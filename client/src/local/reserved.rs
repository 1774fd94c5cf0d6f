//! The last view of a project's reservations, kept for the pre-tool hook when the hub cannot
//! be reached (it then warns from this view, marked with its age, and never refuses).

use std::path::{Path, PathBuf};

use baton_proto::v1::Reservation;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A project's held reservations as last seen.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cached {
    pub project: String,
    pub seen_at_us: i64,
    /// Encoded `Reservation`s (prost), held ones only.
    pub reservations: Vec<Vec<u8>>,
}

impl Cached {
    pub fn reservations(&self) -> Vec<Reservation> {
        self.reservations.iter().filter_map(|b| prost::Message::decode(b.as_slice()).ok()).collect()
    }
}

fn path(data_dir: &Path, project: &str) -> PathBuf {
    let digest = hex::encode(Sha256::digest(project.as_bytes()));
    data_dir.join("reservations").join(format!("{}.json", &digest[..24]))
}

/// Replaces the project's view (a temporary file renamed over it: hooks run at once).
pub fn store(data_dir: &Path, project: &str, held: &[Reservation]) -> anyhow::Result<()> {
    let p = path(data_dir, project);
    if let Some(dir) = p.parent() {
        crate::fsperm::create_private_dir(dir)?;
    }
    let cached = Cached {
        project: project.to_owned(),
        seen_at_us: crate::clock::now_us(),
        reservations: held.iter().map(prost::Message::encode_to_vec).collect(),
    };
    crate::fsperm::write_cache(&p, &serde_json::to_vec(&cached)?)?;
    Ok(())
}

pub fn load(data_dir: &Path, project: &str) -> Option<Cached> {
    let bytes = std::fs::read(path(data_dir, project)).ok()?;
    serde_json::from_slice::<Cached>(&bytes).ok().filter(|c| c.project == project)
}
