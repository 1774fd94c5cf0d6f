//! Files the client writes (queue, dead letters, cached briefs, agent state, remembered
//! remotes, config, restored transcripts) hold project text and sometimes a token: they
//! are created 0600, in folders created 0700 (on Unix; elsewhere the platform's defaults).
//!
//! And they outlive a power cut as whole files: a file's bytes are on disk once it is
//! synced, but its name (a new file, a rename, a new folder) only once the folder holding
//! it is synced too. `write_atomic` and `create_private_dir` do both; `sync_dir` is for a
//! caller that renames or removes by hand.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Creates `dir` and any missing parents with mode 0700 (folders that exist are left as
/// they are), each new folder's name synced in its parent.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    create_dir(dir, 0o700)
}

/// Creates `dir` and any missing parents with `mode` (less the umask), each new folder's
/// name synced in its parent (an agent's folders, which are not Baton's to make private).
pub fn create_dir(dir: &Path, mode: u32) -> std::io::Result<()> {
    let missing: Vec<&Path> =
        dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, mode);
    #[cfg(not(unix))]
    let _ = mode;
    builder.create(dir)?;
    for made in missing.iter().rev() {
        if let Some(parent) = made.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

/// Syncs a folder: the names created, renamed or removed in it are on disk.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::fs::File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Replaces `path` with `bytes` (mode 0600, or `mode` on Unix) so that a crash or a power
/// cut leaves the old contents or the new, never neither, an empty file or a part: a file
/// beside it, synced, renamed over it, the folder synced.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    let replaced = replace(path, bytes, mode)?;
    sync_dir(replaced.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")))
}

/// `write_atomic` without the folder's sync, for a file rewritten on every hook (a
/// conversation's record): a power cut leaves the old contents or the new, each whole, but
/// may take the new; a caller that needs the new one kept, or writes a new name, uses
/// `write_atomic`.
pub fn replace_whole(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    replace(path, bytes, mode).map(drop)
}

/// `replace_whole`; returns the file it replaced (`path`, or where the link `path` points).
fn replace(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<PathBuf> {
    // A file that is a link (settings kept in a dotfiles repository) is replaced where the
    // link points, and stays a link.
    let path = if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::canonicalize(path)?
    } else {
        path.to_owned()
    };
    let tmp = temp_beside(&path);
    let written = (|| {
        let mut file = open_private(&tmp, false)?;
        file.write_all(bytes)?;
        #[cfg(unix)]
        if let Some(mode) = mode {
            use std::os::unix::fs::PermissionsExt as _;
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        #[cfg(not(unix))]
        let _ = mode;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    match written {
        Ok(()) => Ok(path),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            // Which file: the caller's error says what it was saving, not where.
            Err(std::io::Error::new(e.kind(), format!("writing {}: {e}", path.display())))
        }
    }
}

/// Replaces a cache file (a brief, a view of the reservations, remembered remotes) through
/// a file of its own beside it, unsynced: hooks write them on every start, and a sync costs
/// more than the cache saves. A power cut may leave one empty, gone or old; its reader takes
/// anything it cannot parse as no cache, and the hub has the truth.
pub fn write_cache(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_beside(path);
    let written = write_private(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A name beside `path` no other writer uses (`NAME.PID-RANDOM.baton-tmp`), which the
/// readers of Baton's folders skip and `sweep_stale_temps` removes.
pub fn temp_beside(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let unique = uuid::Uuid::new_v4().simple().to_string();
    path.with_file_name(format!("{name}.{}-{}{TEMP_SUFFIX}", std::process::id(), &unique[..8]))
}

const TEMP_SUFFIX: &str = ".baton-tmp";

/// A temporary file's writer renames it within moments; one this old was left by a writer
/// that died between writing and renaming (killed, or the power cut).
const STALE_TEMP: std::time::Duration = std::time::Duration::from_hours(1);

/// Removes the temporary files (`*.baton-tmp`) dead writers left in `dir` and in the folders
/// `depth` levels under it; returns how many. Links are neither followed nor removed, and
/// what cannot be read or removed stays (a later sweep tries again).
pub fn sweep_stale_temps(dir: &Path, depth: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if depth > 0 {
                removed += sweep_stale_temps(&entry.path(), depth - 1);
            }
            continue;
        }
        let stale = kind.is_file()
            && entry.file_name().to_string_lossy().ends_with(TEMP_SUFFIX)
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|at| at.elapsed().is_ok_and(|age| age > STALE_TEMP));
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Writes `bytes` to `path` (created or truncated) with mode 0600.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    open_private(path, false)?.write_all(bytes)
}

/// Opens `path` for writing with mode 0600 (appending, or truncating), fixing the mode of
/// a file that already existed with a wider one.
pub fn open_private(path: &Path, append: bool) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true);
    if append {
        options.append(true);
    } else {
        options.write(true).truncate(true);
    }
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if file.metadata()?.permissions().mode() & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
    }
    Ok(file)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn files_0600_in_folders_0700() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let dir = root.path().join("a/b");
        create_private_dir(&dir)?;
        let file = dir.join("f");
        std::fs::write(&file, "wide")?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))?;
        write_private(&file, b"x")?;
        assert_eq!(std::fs::metadata(&file)?.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&dir)?.permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(root.path().join("a"))?.permissions().mode() & 0o777, 0o700);
        Ok(())
    }

    #[test]
    fn atomic_writes_replace_whole_files_with_their_mode_and_leave_nothing_beside() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let file = root.path().join("settings.json");
        write_atomic(&file, b"{}", None)?;
        write_atomic(&file, b"{\"a\":1}", None)?;
        assert_eq!(std::fs::read(&file)?, b"{\"a\":1}");
        assert_eq!(std::fs::metadata(&file)?.permissions().mode() & 0o777, 0o600);
        let hook = root.path().join("post-commit");
        write_atomic(&hook, b"#!/bin/sh\n", Some(0o755))?;
        assert_eq!(std::fs::metadata(&hook)?.permissions().mode() & 0o777, 0o755);
        let names: Vec<_> = std::fs::read_dir(root.path())?.flatten().map(|e| e.file_name()).collect();
        assert_eq!(names.len(), 2, "temporary files left: {names:?}");
        assert_eq!(std::fs::metadata(&file)?.permissions().mode() & 0o777, 0o600);
        // A folder that is missing fails the write and leaves nothing.
        assert!(write_atomic(&root.path().join("no/such"), b"x", None).is_err());
        // Through a link: the file it points to changes, the link stays.
        let real = root.path().join("dotfiles-settings.json");
        std::fs::write(&real, "{}")?;
        let link = root.path().join("linked.json");
        std::os::unix::fs::symlink(&real, &link)?;
        write_atomic(&link, b"{\"b\":2}", None)?;
        assert!(std::fs::symlink_metadata(&link)?.file_type().is_symlink());
        assert_eq!(std::fs::read(&real)?, b"{\"b\":2}");
        Ok(())
    }

    #[test]
    fn sweeps_remove_only_stale_temporary_files() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let nested = root.path().join("queue/pending");
        create_private_dir(&nested)?;
        let old = std::time::SystemTime::now() - STALE_TEMP * 2;
        let aged = |path: &Path| -> std::io::Result<()> {
            std::fs::write(path, "x")?;
            std::fs::File::options().write(true).open(path)?.set_modified(old)
        };
        aged(&root.path().join("a.json.1-ab.baton-tmp"))?;
        aged(&nested.join("e.json.2-cd.baton-tmp"))?;
        // Kept: an entry however old, a temporary file being written, one too deep, a link.
        aged(&nested.join("e.json"))?;
        std::fs::write(root.path().join("b.json.3-ef.baton-tmp"), "x")?;
        let deep = nested.join("deeper");
        create_private_dir(&deep)?;
        aged(&deep.join("f.json.4-01.baton-tmp"))?;
        std::os::unix::fs::symlink("/etc/hostname", root.path().join("l.baton-tmp"))?;

        assert_eq!(sweep_stale_temps(root.path(), 2), 2);
        let left = |dir: &Path| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .map(|r| r.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            names.sort();
            names
        };
        assert_eq!(left(root.path()), ["b.json.3-ef.baton-tmp", "l.baton-tmp", "queue"]);
        assert_eq!(left(&nested), ["deeper", "e.json"]);
        assert_eq!(left(&deep), ["f.json.4-01.baton-tmp"]);
        assert_eq!(sweep_stale_temps(&root.path().join("no/such"), 2), 0);
        Ok(())
    }
}
