//! The offline queue: writes made while the hub is unreachable, sent later in order.
//!
//! One file per entry under `queue/pending/`, named so that names sort in write order; the
//! queue is locked (`queue/lock`) while flushed, because two agents' hooks can run at once.
//! An entry the hub refuses for good moves to `queue/dead/` with the reason, so it never
//! blocks the rest. Capped in entries, bytes and age (stated in `baton status`).
//!
//! A write being sent right now is journaled too (so a kill mid-send loses nothing), and
//! its process holds a lock on the entry's file until it knows the outcome. Others leave a
//! held entry alone: it is not queued but in flight, and hooks running at once must not
//! flush each other's writes (hook-bench's "SessionStart, 4 at once" row spent its p99
//! waiting for the queue lock behind a neighbour's send). The OS drops the lock when the
//! process ends, however it ends, and the entry is then an ordinary queued one.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::outbox::write::Write;

pub const MAX_ENTRIES: usize = 10_000;
pub const MAX_BYTES: u64 = 64 * 1024 * 1024;
pub const MAX_AGE: Duration = Duration::from_hours(720);

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

/// A write being sent by this process: its journal entry, locked until dropped.
pub struct InFlight {
    pub path: PathBuf,
    _claim: File,
}

/// An entry its process leaves unsent (a hook out of time, a failed send) stays queued for
/// the next flush: it is synced then, bytes and name, so a power cut cannot leave its name
/// without its bytes. Sent, it is gone already and this costs one failed open.
impl Drop for InFlight {
    fn drop(&mut self) {
        let _ = sync(&self.path);
    }
}

/// The entry at `path`, claimed for sending by this process; `None` when another process
/// holds it (in flight there) or it is gone (delivered).
pub fn claim(path: &Path) -> anyhow::Result<Option<File>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    match file.try_lock() {
        // Its owner removes it before letting go: still there means still to send.
        Ok(()) if path.exists() => Ok(Some(file)),
        Ok(()) | Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Waits until no process holds the entry at `path` (its sender got an answer, gave up or
/// ended), at most until `deadline`. True when it is released or gone.
pub fn wait_released(path: &Path, deadline: std::time::Instant) -> anyhow::Result<bool> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e.into()),
    };
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(true),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
    }
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

    /// Queued entries no process is sending right now (what a new write must not overtake).
    pub fn waiting(&self) -> usize {
        let Ok(paths) = read_dir_sorted(&self.pending_dir()) else { return 0 };
        paths.iter().filter(|p| matches!(claim(p), Ok(Some(_)))).count()
    }

    /// Counts without locking (for status lines); in-flight writes included.
    pub fn counts(&self) -> (usize, usize) {
        let count =
            |d: PathBuf| fs::read_dir(d).map_or(0, |r| r.flatten().filter(|e| is_entry(&e.path())).count());
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
        Self::entries(&self.queue.pending_dir())
    }

    pub fn dead(&self) -> anyhow::Result<Vec<(PathBuf, Entry)>> {
        Self::entries(&self.queue.dead_dir())
    }

    fn entries(dir: &Path) -> anyhow::Result<Vec<(PathBuf, Entry)>> {
        let mut out = Vec::new();
        for path in read_dir_sorted(dir)? {
            match fs::read(&path)
                .map_err(anyhow::Error::from)
                .and_then(|b| Ok(serde_json::from_slice::<Entry>(&b)?))
            {
                Ok(entry) => out.push((path, entry)),
                // Delivered by the process that was sending it, since the listing.
                Err(e)
                    if e.downcast_ref::<std::io::Error>()
                        .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound) => {}
                Err(e) => {
                    // A damaged file must not block the queue: keep it aside.
                    let _ = fs::rename(&path, path.with_extension("damaged"));
                    eprintln!("baton: set aside a damaged queue file {}: {e}", path.display());
                }
            }
        }
        Ok(out)
    }

    /// Adds an entry at the end, synced to disk; returns its file. Refuses (and records in
    /// the dead letters) when the queue is over a cap, so the cap never drops older promised
    /// writes silently.
    pub fn push(&self, entry: &Entry) -> anyhow::Result<PathBuf> {
        let (path, json) = self.place(entry)?;
        write_atomic(&path, &json)?;
        Ok(path)
    }

    /// Journals a write this process is sending now, claimed (see the module's header). Not
    /// synced: it only has to outlive this process, and is synced if it stays queued.
    pub fn push_in_flight(&self, entry: &Entry) -> anyhow::Result<InFlight> {
        let (path, json) = self.place(entry)?;
        let tmp = crate::fsperm::temp_beside(&path);
        let mut file = crate::fsperm::open_private(&tmp, false)?;
        file.lock()?;
        std::io::Write::write_all(&mut file, &json)?;
        fs::rename(&tmp, &path)?;
        Ok(InFlight { path, _claim: file })
    }

    /// The new entry's file and bytes, within the caps.
    fn place(&self, entry: &Entry) -> anyhow::Result<(PathBuf, Vec<u8>)> {
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
        Ok((self.queue.pending_dir().join(name), json))
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
        // Cleared for good: the user read them, a power cut must not bring them back.
        if !dead.is_empty() {
            crate::fsperm::sync_dir(&self.queue.dead_dir())?;
        }
        Ok(dead.len())
    }
}

/// Syncs a journaled entry that stays queued, its bytes and its name (gone already is fine:
/// a flusher sent it).
pub fn sync(path: &Path) -> anyhow::Result<()> {
    match File::open(path) {
        Ok(f) => f.sync_all()?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    if let Some(dir) = path.parent() {
        crate::fsperm::sync_dir(dir)?;
    }
    Ok(())
}

/// Write-then-rename, synced: a crash or a power cut never leaves half an entry or loses a
/// queued one.
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    Ok(crate::fsperm::write_atomic(path, bytes, None)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: i64) -> Entry {
        Entry {
            rpc: "PutMemory".into(),
            project: "p".into(),
            request_id: format!("r{n}"),
            written_at_us: n,
            body: String::new(),
            error: None,
        }
    }

    #[test]
    fn a_claimed_entry_is_in_flight_until_its_claim_ends() {
        let dir = tempfile::tempdir().unwrap();
        let queue = Queue::new(dir.path());
        let queued = queue.lock(None).unwrap().unwrap().push(&entry(1)).unwrap();
        let sending = queue.lock(None).unwrap().unwrap().push_in_flight(&entry(2)).unwrap();
        assert_eq!(queue.counts().0, 2, "status counts both");
        assert_eq!(queue.waiting(), 1, "only the queued one waits");
        assert!(claim(&sending.path).unwrap().is_none(), "held by its sender");
        assert!(claim(&queued).unwrap().is_some());
        let path = sending.path.clone();
        drop(sending);
        assert_eq!(queue.waiting(), 2, "left behind unsent: queued like any other");
        fs::remove_file(&path).unwrap();
        assert!(claim(&path).unwrap().is_none(), "delivered: nothing to claim");
    }
}
