//! The database's files are private to the user the server runs as: memory, checkpoints and
//! token hashes must not be readable by other users of a shared machine. A missing data
//! directory is made 0700 and a missing database file 0600 before SQLite opens it (SQLite
//! gives its `-wal` and `-shm` files the database file's mode); an existing database's
//! files that others may read are tightened to 0600 on start, and the log says so.

use std::fs::{OpenOptions, Permissions};
use std::io::ErrorKind;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// The mode of the data directory Baton makes.
const DIR_MODE: u32 = 0o700;
/// The mode of the database and its companion files.
const FILE_MODE: u32 = 0o600;

/// Makes the database's directory and file private before SQLite opens `path`, and
/// tightens the files of an existing one.
pub fn make_private(path: &Path) -> std::io::Result<()> {
    // Made with their names on disk: a power cut after the first acknowledged write must
    // not take the new folder, or the new file, away with it.
    crate::disk::create_dir_all(crate::disk::parent_of(path), DIR_MODE)?;
    match OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).open(path) {
        Ok(_) => crate::disk::sync_dir(crate::disk::parent_of(path))?,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    for file in companions(path) {
        tighten(&file)?;
    }
    Ok(())
}

/// The database file and the ones SQLite keeps beside it.
fn companions(path: &Path) -> [PathBuf; 4] {
    let with = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    [path.to_path_buf(), with("-wal"), with("-shm"), with("-journal")]
}

/// Takes away what the group and others may do with `file`, if it exists.
fn tighten(file: &Path) -> std::io::Result<()> {
    let mode = match std::fs::metadata(file) {
        Ok(m) => m.permissions().mode(),
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    // Group and others' bits (the low six) all clear: private already.
    if mode.trailing_zeros() >= 6 {
        return Ok(());
    }
    if let Err(e) = std::fs::set_permissions(file, Permissions::from_mode(mode & 0o700)) {
        // Not ours to change (another owner, a read-only mount): said, and started anyway.
        tracing::warn!(file = %file.display(), error = %e, "the database file is readable by other users and cannot be tightened");
        return Ok(());
    }
    tracing::warn!(
        file = %file.display(),
        was = format!("{:o}", mode & 0o777),
        now = format!("{:o}", mode & 0o700),
        "the database file was readable by other users: tightened to the owner only"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_database_is_private_and_an_old_one_tightened() {
        let root = tempfile::tempdir().unwrap();
        let db = root.path().join("data/baton/baton.db");
        make_private(&db).unwrap();
        assert_eq!((mode(db.parent().unwrap()), mode(&db)), (0o700, 0o600));
        let wal = root.path().join("data/baton/baton.db-wal");
        std::fs::write(&wal, b"").unwrap();
        std::fs::set_permissions(&wal, Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&db, Permissions::from_mode(0o664)).unwrap();
        make_private(&db).unwrap();
        assert_eq!((mode(&db), mode(&wal)), (0o600, 0o600));
    }
}
