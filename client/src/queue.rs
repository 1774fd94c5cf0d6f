//! The offline queue: writes made while the hub is unreachable, sent later in order.
//!
//! One file per entry under `queue/pending/`, named so that names sort in write order; the
//! queue is locked (`queue/lock`) while flushed, because two agents' hooks can run at once.
//! An entry the hub refuses for good moves to `queue/dead/` with the reason, so it never
//! blocks the rest. Capped in entries, bytes and age (stated in `baton status`).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::write::Write;

pub const MAX_ENTRIES: usize = 10_000;
pub const MAX_BYTES: u64 = 64 * 1024 * 1024;
pub const MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// A queued write.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub rpc: String,
    pub project: String,
    pub request_id: String,
    /// When the write was made (µs since the epoch, this machine's clock).
    pub written_at_us: i64,
    /// The encoded request.
    pub body: String,
    /// Why it is in the dead-letter list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Entry {
    pub fn new(write: &Write, written_at_us: i64) -> Self {
        Self {
            rpc: write.rpc().to_owned(),
            project: write.project().to_owned(),
            request_id: write.request_id().to_owned(),
            written_at_us,
            body: base64::engine::general_purpose::STANDARD.encode(write.encode()),
            error: None,
        }
    }

    pub fn write(&self) -> anyhow::Result<Write> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.body)
            .context("queue entry body is not base64")?;
        Write::decode(&self.rpc, &bytes)
    }
}

pub struct Queue {
    dir: PathBuf,
}

/// Held while the queue is read or changed.
pub struct Locked<'a> {
    queue: &'a Queue,
    _lock: File,
}

impl Queue {
    pub fn new(data_dir: &Path) -> Self {
        Self { dir: data_dir.join("queue") }
    }

    fn pending_dir(&self) -> PathBuf {
        self.dir.join("pending")
    }

    fn dead_dir(&self) -> PathBuf {
        self.dir.join("dead")
    }

    /// Takes the lock, waiting at most `wait` (hooks) or as long as it takes (None).
    pub fn lock(&self, wait: Option<Duration>) -> anyhow::Result<Option<Locked<'_>>> {
        crate::fsperm::create_private_dir(&self.pending_dir())?;
        crate::fsperm::create_private_dir(&self.dead_dir())?;
        let file = File::options().create(true).truncate(false).write(true).open(self.dir.join("lock"))?;
        match wait {
            None => {
                file.lock()?;
            }
            Some(wait) => {
                let deadline = std::time::Instant::now() + wait;
                loop {
                    match file.try_lock() {
                        Ok(()) => break,
                        Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
                        Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
                    }
                }
            }
        }
        Ok(Some(Locked { queue: self, _lock: file }))
    }

    /// Counts without locking (for status lines).
    pub fn counts(&self) -> (usize, usize) {
        let count = |d: PathBuf| {
            fs::read_dir(d).map(|r| r.flatten().filter(|e| is_entry(&e.path())).count()).unwrap_or(0)
        };
        (count(self.pending_dir()), count(self.dead_dir()))
    }
}

fn is_entry(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

fn read_dir_sorted(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> =
        fs::read_dir(dir)?.flatten().map(|e| e.path()).filter(|p| is_entry(p)).collect();
    paths.sort();
    Ok(paths)
}

impl Locked<'_> {
    /// Pending entries, oldest first.
    pub fn pending(&self) -> anyhow::Result<Vec<(PathBuf, Entry)>> {
        self.entries(&self.queue.pending_dir())
    }

    pub fn dead(&self) -> anyhow::Result<Vec<(PathBuf, Entry)>> {
        self.entries(&self.queue.dead_dir())
    }

    fn entries(&self, dir: &Path) -> anyhow::Result<Vec<(PathBuf, Entry)>> {
        let mut out = Vec::new();
        for path in read_dir_sorted(dir)? {
            match fs::read(&path)
                .map_err(anyhow::Error::from)
                .and_then(|b| Ok(serde_json::from_slice::<Entry>(&b)?))
            {
                Ok(entry) => out.push((path, entry)),
                Err(e) => {
                    // A damaged file must not block the queue: keep it aside.
                    let _ = fs::rename(&path, path.with_extension("damaged"));
                    eprintln!("baton: set aside a damaged queue file {}: {e}", path.display());
                }
            }
        }
        Ok(out)
    }

    /// Adds an entry at the end. Refuses (and records in the dead letters) when the queue
    /// is over a cap, so the cap never drops older promised writes silently.
    /// Adds an entry; returns its file. `durable`: synced to disk before returning (a write
    /// that is being sent right now is journaled without: it only has to outlive this
    /// process, and is synced if it stays queued).
    pub fn push(&self, entry: &Entry, durable: bool) -> anyhow::Result<PathBuf> {
        let pending = read_dir_sorted(&self.queue.pending_dir())?;
        let bytes: u64 = pending.iter().filter_map(|p| fs::metadata(p).ok()).map(|m| m.len()).sum();
        let name = format!("{:020}-{}.json", entry.written_at_us.max(0), uuid::Uuid::now_v7());
        let json = serde_json::to_vec(entry)?;
        if pending.len() >= MAX_ENTRIES || bytes + json.len() as u64 > MAX_BYTES {
            let mut dead = entry.clone();
            dead.error = Some(format!(
                "queue full ({} entries, {} bytes; caps {MAX_ENTRIES} entries, {MAX_BYTES} bytes): run `baton sync` when the hub is back",
                pending.len(),
                bytes
            ));
            write_atomic(&self.queue.dead_dir().join(&name), &serde_json::to_vec(&dead)?)?;
            anyhow::bail!("the offline queue is full; this write was put in the dead-letter list");
        }
        let path = self.queue.pending_dir().join(name);
        if durable {
            write_atomic(&path, &json)?;
        } else {
            let tmp = path.with_extension("tmp");
            crate::fsperm::write_private(&tmp, &json)?;
            fs::rename(&tmp, &path)?;
        }
        Ok(path)
    }

    /// Removes an entry; one already gone is fine (the process that journaled it and a
    /// flusher may both have delivered it: the hub deduplicates by request id).
    pub fn remove(&self, path: &Path) -> anyhow::Result<()> {
        match fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", path.display()))
            }
            _ => Ok(()),
        }
    }

    /// Moves an entry to the dead-letter list with the reason.
    pub fn bury(&self, path: &Path, entry: &Entry, reason: String) -> anyhow::Result<()> {
        let mut dead = entry.clone();
        dead.error = Some(reason);
        let name = path.file_name().context("entry without a name")?;
        write_atomic(&self.queue.dead_dir().join(name), &serde_json::to_vec(&dead)?)?;
        self.remove(path)
    }

    /// Empties the dead-letter list (after the user has read it).
    pub fn clear_dead(&self) -> anyhow::Result<usize> {
        let dead = read_dir_sorted(&self.queue.dead_dir())?;
        for p in &dead {
            fs::remove_file(p)?;
        }
        Ok(dead.len())
    }
}

/// Write-then-rename, so a crash never leaves half an entry.
/// Syncs a journaled entry that stays queued (gone already is fine: a flusher sent it).
pub fn sync(path: &Path) -> anyhow::Result<()> {
    match File::open(path) {
        Ok(f) => Ok(f.sync_all()?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    crate::fsperm::write_private_synced(&tmp, bytes)?;
    fs::rename(&tmp, path)?;
    Ok(())
}
