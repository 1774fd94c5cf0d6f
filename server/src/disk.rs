//! Names the server puts on disk outlive a power cut: a file's bytes are kept once it is
//! synced, but its name (a new file, a rename, a new folder) only once the folder holding
//! it is synced too. SQLite syncs its own files; these are for the folders and files the
//! server makes around it (the data directory, an export).

use std::path::Path;

/// Syncs a folder: the names created, renamed or removed in it are on disk.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// The folder holding `path` (`.` for a bare name).
pub fn parent_of(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Creates `dir` and its missing parents with `mode`, each new folder's name synced in its
/// parent.
pub fn create_dir_all(dir: &Path, mode: u32) -> std::io::Result<()> {
    let missing: Vec<&Path> =
        dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), mode).create(dir)?;
    for made in missing.iter().rev() {
        sync_dir(parent_of(made))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn makes_every_missing_folder_with_its_mode() -> std::io::Result<()> {
        let root = tempfile::tempdir()?;
        let dir = root.path().join("a/b/c");
        create_dir_all(&dir, 0o700)?;
        assert_eq!(std::fs::metadata(root.path().join("a"))?.permissions().mode() & 0o777, 0o700);
        assert!(dir.is_dir());
        create_dir_all(&dir, 0o700)?;
        assert_eq!(parent_of(Path::new("x")), Path::new("."));
        Ok(())
    }
}
