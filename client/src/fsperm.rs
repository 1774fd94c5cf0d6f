//! Files the client writes (queue, dead letters, cached briefs, agent state, remembered
//! remotes, config, restored transcripts) hold project text and sometimes a token: they
//! are created 0600, in folders created 0700 (on Unix; elsewhere the platform's defaults).

use std::io::Write as _;
use std::path::Path;

/// Creates `dir` and any missing parents with mode 0700 (folders that exist are left as
/// they are).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Writes `bytes` to `path` (created or truncated) with mode 0600.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    open_private(path, false)?.write_all(bytes)
}

/// `write_private`, on disk when it returns (the offline queue's entries).
pub fn write_private_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = open_private(path, false)?;
    file.write_all(bytes)?;
    file.sync_all()
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
}
