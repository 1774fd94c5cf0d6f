//! The agents' own files as Baton changes them: read (a missing or empty file is an empty
//! object), replaced whole with the user's original kept once beside it, and removed again
//! when Baton made them; transcripts written where an agent looks for them.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use baton_proto::v1::BlobRef;
use serde_json::{Value, json};

/// The user's home directory.
pub fn home() -> anyhow::Result<PathBuf> {
    Ok(directories::BaseDirs::new().context("no home directory")?.home_dir().to_path_buf())
}

/// Reads an agent's JSON settings file: `(its text, the document)`; a missing or empty
/// file is an empty object.
pub fn read_json(file: &Path) -> anyhow::Result<(String, Value)> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    if text.trim().is_empty() {
        return Ok((text, json!({})));
    }
    let doc: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON; fix it or move it away first", file.display()))?;
    if !doc.is_object() {
        anyhow::bail!("{} does not hold a JSON object", file.display());
    }
    Ok((text, doc))
}

/// Writes `new` over an agent's file that held `old`, when they differ: the user's
/// original is kept once beside it (`.baton-backup`, empty when there was no file) before
/// Baton first changes it, and the file is replaced whole (write, then rename). Temporary
/// files dead writers left beside it are removed.
pub fn save(file: &Path, old: &str, new: &str) -> anyhow::Result<()> {
    if new == old {
        return Ok(());
    }
    if let Some(dir) = file.parent() {
        crate::fsperm::create_dir(dir, 0o777)?;
        crate::fsperm::sweep_stale_temps(dir, 0);
    }
    // The file as it was before Baton first changed it; empty when Baton made it.
    // Both private: the agents' files can hold secrets (an MCP server's environment).
    // The backup is on disk before the file changes: a power cut in between must not
    // leave a changed file whose backup says Baton made it (`--uninstall` would delete it).
    let backup = backup_of(file);
    if !backup.exists() {
        crate::fsperm::write_atomic(&backup, old.as_bytes(), None)?;
    }
    crate::fsperm::write_atomic(file, new.as_bytes(), None)?;
    Ok(())
}

/// Whether Baton made `file`: its backup is empty (there was no file), or there is none.
pub fn baton_made(file: &Path) -> anyhow::Result<bool> {
    let backup = backup_of(file);
    match std::fs::metadata(&backup) {
        Ok(m) => Ok(m.len() == 0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(e).with_context(|| format!("reading {}", backup.display())),
    }
}

/// Removes `file` (emptied of Baton's entries) and its backup when Baton made it. Returns
/// whether it did.
pub fn remove_if_baton_made(file: &Path) -> anyhow::Result<bool> {
    let made = baton_made(file)?;
    if made {
        let backup = backup_of(file);
        std::fs::remove_file(file).with_context(|| format!("removing {}", file.display()))?;
        let _ = std::fs::remove_file(&backup);
        if let Some(dir) = file.parent() {
            crate::fsperm::sync_dir(dir)?;
        }
    }
    Ok(made)
}

pub fn backup_of(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".baton-backup");
    PathBuf::from(name)
}

/// The transcript text with the project path it was written at replaced by this one.
pub fn rehomed(data: &[u8], blob: &BlobRef, cwd: &Path) -> String {
    let text = String::from_utf8_lossy(data);
    let new_cwd = cwd.display().to_string();
    if blob.cwd.is_empty() || blob.cwd == new_cwd {
        text.into_owned()
    } else {
        text.replace(&blob.cwd, &new_cwd)
    }
}

/// Writes `text` to `file` through a temporary file beside it (never half a file).
pub fn write_whole(file: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = file.parent() {
        crate::fsperm::create_private_dir(dir)?;
    }
    crate::fsperm::write_atomic(file, text.as_bytes(), None)?;
    Ok(())
}

/// A file under `dir` (at most `depth` folders down) whose name satisfies `matches`.
pub fn find_under(dir: &Path, matches: &dyn Fn(&str) -> bool, depth: u32) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if depth > 0
                && let Some(found) = find_under(&path, matches, depth - 1)
            {
                return Some(found);
            }
        } else if kind.is_file() && path.file_name().and_then(|n| n.to_str()).is_some_and(matches) {
            return Some(path);
        }
    }
    None
}
