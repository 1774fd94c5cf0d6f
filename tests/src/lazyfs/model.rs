//! A file system as a power cut sees it: what was written (the volatile state, what every
//! read returns) and what was synced (the durable state, what is left after the cut).
//!
//! Writes, truncations, new names, renames and removals change the volatile state only.
//! `fsync` of a file makes its data and size durable (`fdatasync` alike: the model keeps no
//! times); `fsync` of a directory makes its entries durable, as POSIX requires: a new file's
//! name, a rename's new and old name, a removal. An inode synced before any of its names is
//! durable but unreachable, as on a real disk, until a directory sync names it. `crash`
//! drops everything volatile: what is left is the durable state, without the inodes no
//! durable name reaches.
//!
//! That is POSIX, and the model's default. `Model::journaled` is the rule ext4's and XFS's
//! journals follow, which Postgres relies on (it syncs a new relation file, never the folder
//! naming it): a file's sync also makes every name change made before it durable.
//!
//! Pure: the FUSE layer serves from it, and its rules are tested here without a mount.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};

use super::data::Data;

/// An inode number; the root directory is `ROOT`.
pub type Ino = u64;
pub const ROOT: Ino = 1;

/// What an inode is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File(Data),
    Dir(BTreeMap<OsString, Ino>),
    Symlink(OsString),
}

/// An inode: what it is, its permission bits and its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    pub node: Node,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Why an operation cannot be done, as the errno the kernel gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    NotFound,
    Exists,
    NotDir,
    IsDir,
    NotEmpty,
    Invalid,
}

impl Fault {
    pub fn errno(self) -> i32 {
        match self {
            Self::NotFound => libc::ENOENT,
            Self::Exists => libc::EEXIST,
            Self::NotDir => libc::ENOTDIR,
            Self::IsDir => libc::EISDIR,
            Self::NotEmpty => libc::ENOTEMPTY,
            Self::Invalid => libc::EINVAL,
        }
    }
}

type Result<T> = std::result::Result<T, Fault>;

/// The two states and the next inode number.
#[derive(Debug, Clone)]
pub struct Model {
    volatile: HashMap<Ino, Inode>,
    durable: HashMap<Ino, Inode>,
    next: Ino,
    journaled: bool,
}

impl Default for Model {
    fn default() -> Self {
        let root = Inode { node: Node::Dir(BTreeMap::new()), mode: 0o777, uid: 0, gid: 0 };
        Self {
            volatile: HashMap::from([(ROOT, root.clone())]),
            durable: HashMap::from([(ROOT, root)]),
            next: ROOT + 1,
            journaled: false,
        }
    }
}

impl Model {
    /// A model whose file syncs also make every earlier name change durable (see above).
    pub fn journaled() -> Self {
        Self { journaled: true, ..Self::default() }
    }

    /// An inode as every read sees it.
    pub fn get(&self, ino: Ino) -> Option<&Inode> {
        self.volatile.get(&ino)
    }

    /// How many names an inode has now.
    pub fn links(&self, ino: Ino) -> u32 {
        let named = self.volatile.values().filter_map(|i| match &i.node {
            Node::Dir(entries) => Some(entries.values().filter(|e| **e == ino).count()),
            _ => None,
        });
        u32::try_from(named.sum::<usize>()).unwrap_or(u32::MAX).max(u32::from(ino == ROOT))
    }

    fn entries(&self, dir: Ino) -> Result<&BTreeMap<OsString, Ino>> {
        match &self.volatile.get(&dir).ok_or(Fault::NotFound)?.node {
            Node::Dir(entries) => Ok(entries),
            _ => Err(Fault::NotDir),
        }
    }

    fn entries_mut(&mut self, dir: Ino) -> Result<&mut BTreeMap<OsString, Ino>> {
        match &mut self.volatile.get_mut(&dir).ok_or(Fault::NotFound)?.node {
            Node::Dir(entries) => Ok(entries),
            _ => Err(Fault::NotDir),
        }
    }

    pub fn lookup(&self, dir: Ino, name: &OsStr) -> Result<Ino> {
        self.entries(dir)?.get(name).copied().ok_or(Fault::NotFound)
    }

    /// A directory's entries, by name.
    pub fn list(&self, dir: Ino) -> Result<Vec<(OsString, Ino)>> {
        Ok(self.entries(dir)?.iter().map(|(n, i)| (n.clone(), *i)).collect())
    }

    /// A new inode named `name` in `dir`, of `owner` (uid, gid).
    pub fn create(
        &mut self,
        dir: Ino,
        name: &OsStr,
        node: Node,
        mode: u32,
        owner: (u32, u32),
    ) -> Result<Ino> {
        if self.entries(dir)?.contains_key(name) {
            return Err(Fault::Exists);
        }
        let ino = self.next;
        self.next += 1;
        self.volatile.insert(ino, Inode { node, mode, uid: owner.0, gid: owner.1 });
        self.entries_mut(dir)?.insert(name.to_owned(), ino);
        Ok(ino)
    }

    /// Another name for a file.
    pub fn link(&mut self, ino: Ino, dir: Ino, name: &OsStr) -> Result<()> {
        if matches!(self.volatile.get(&ino).ok_or(Fault::NotFound)?.node, Node::Dir(_)) {
            return Err(Fault::IsDir);
        }
        if self.entries(dir)?.contains_key(name) {
            return Err(Fault::Exists);
        }
        self.entries_mut(dir)?.insert(name.to_owned(), ino);
        Ok(())
    }

    /// Removes a name (a directory's only when it is empty, with `dir_only`).
    pub fn remove(&mut self, dir: Ino, name: &OsStr, dir_only: bool) -> Result<()> {
        let ino = self.lookup(dir, name)?;
        match (&self.volatile.get(&ino).ok_or(Fault::NotFound)?.node, dir_only) {
            (Node::Dir(entries), true) if !entries.is_empty() => return Err(Fault::NotEmpty),
            (Node::Dir(_), true) => {}
            (Node::Dir(_), false) => return Err(Fault::IsDir),
            (_, true) => return Err(Fault::NotDir),
            (_, false) => {}
        }
        self.entries_mut(dir)?.remove(name);
        Ok(())
    }

    /// Moves a name, replacing what the new name held (a file by a file, an empty
    /// directory by a directory).
    pub fn rename(&mut self, from: Ino, name: &OsStr, to: Ino, new_name: &OsStr) -> Result<()> {
        let ino = self.lookup(from, name)?;
        self.entries(to)?;
        if let Ok(old) = self.lookup(to, new_name) {
            if old == ino {
                return Ok(());
            }
            let moving_dir = matches!(self.volatile[&ino].node, Node::Dir(_));
            match &self.volatile.get(&old).ok_or(Fault::NotFound)?.node {
                Node::Dir(entries) if !entries.is_empty() => return Err(Fault::NotEmpty),
                Node::Dir(_) if !moving_dir => return Err(Fault::IsDir),
                Node::Dir(_) => {}
                _ if moving_dir => return Err(Fault::NotDir),
                _ => {}
            }
        }
        if matches!(self.volatile[&ino].node, Node::Dir(_)) && self.holds(ino, to) {
            return Err(Fault::Invalid);
        }
        self.entries_mut(from)?.remove(name);
        self.entries_mut(to)?.insert(new_name.to_owned(), ino);
        Ok(())
    }

    /// Whether directory `dir` is `inner` or holds it, at any depth.
    fn holds(&self, dir: Ino, inner: Ino) -> bool {
        let mut stack = vec![dir];
        let mut seen = HashSet::new();
        while let Some(at) = stack.pop() {
            if at == inner {
                return true;
            }
            if seen.insert(at)
                && let Some(Inode { node: Node::Dir(entries), .. }) = self.volatile.get(&at)
            {
                stack.extend(entries.values());
            }
        }
        false
    }

    fn data_mut(&mut self, ino: Ino) -> Result<&mut Data> {
        match &mut self.volatile.get_mut(&ino).ok_or(Fault::NotFound)?.node {
            Node::File(data) => Ok(data),
            Node::Dir(_) => Err(Fault::IsDir),
            Node::Symlink(_) => Err(Fault::Invalid),
        }
    }

    pub fn read(&self, ino: Ino, offset: u64, size: u32) -> Result<Vec<u8>> {
        match &self.volatile.get(&ino).ok_or(Fault::NotFound)?.node {
            Node::File(data) => Ok(data.read(usize::try_from(offset).unwrap_or(usize::MAX), size as usize)),
            Node::Dir(_) => Err(Fault::IsDir),
            Node::Symlink(_) => Err(Fault::Invalid),
        }
    }

    pub fn write(&mut self, ino: Ino, offset: u64, bytes: &[u8]) -> Result<()> {
        let data = self.data_mut(ino)?;
        let start = usize::try_from(offset).map_err(|_| Fault::Invalid)?;
        start.checked_add(bytes.len()).ok_or(Fault::Invalid)?;
        data.write(start, bytes);
        Ok(())
    }

    pub fn truncate(&mut self, ino: Ino, size: u64) -> Result<()> {
        let size = usize::try_from(size).map_err(|_| Fault::Invalid)?;
        self.data_mut(ino)?.resize(size);
        Ok(())
    }

    /// Changes what is given of the permission bits and the owner (made durable with the
    /// inode's next sync, as its data is).
    pub fn set_meta(
        &mut self,
        ino: Ino,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> Result<()> {
        let inode = self.volatile.get_mut(&ino).ok_or(Fault::NotFound)?;
        inode.mode = mode.unwrap_or(inode.mode);
        inode.uid = uid.unwrap_or(inode.uid);
        inode.gid = gid.unwrap_or(inode.gid);
        Ok(())
    }

    /// `fsync`/`fdatasync` of a file: its data and size are durable. Of a directory: its
    /// entries are (its children's own data and entries are not), as `fsyncdir`.
    pub fn sync(&mut self, ino: Ino) -> Result<()> {
        let now = self.volatile.get(&ino).ok_or(Fault::NotFound)?.clone();
        let Node::Dir(entries) = &now.node else {
            self.durable.insert(ino, now);
            if self.journaled {
                let dirs: Vec<Ino> = self
                    .volatile
                    .iter()
                    .filter(|(_, i)| matches!(i.node, Node::Dir(_)))
                    .map(|(d, _)| *d)
                    .collect();
                for dir in dirs {
                    self.sync(dir)?;
                }
            }
            return Ok(());
        };
        // A child the directory now names but the disk never had is there, as it was
        // synced (empty when it never was; a directory without its own entries).
        for child in entries.values() {
            if !self.durable.contains_key(child) {
                let kind = match &self.volatile[child].node {
                    Node::File(_) => Node::File(Data::default()),
                    Node::Dir(_) => Node::Dir(BTreeMap::new()),
                    Node::Symlink(target) => Node::Symlink(target.clone()),
                };
                let v = &self.volatile[child];
                self.durable.insert(*child, Inode { node: kind, mode: v.mode, uid: v.uid, gid: v.gid });
            }
        }
        let mut kept = now.clone();
        kept.node = Node::Dir(entries.clone());
        self.durable.insert(ino, kept);
        Ok(())
    }

    /// The power cut: the durable state is all there is, less what no durable name reaches.
    pub fn crash(&mut self) {
        let mut reached = HashSet::new();
        let mut stack = vec![ROOT];
        while let Some(at) = stack.pop() {
            if reached.insert(at)
                && let Some(Inode { node: Node::Dir(entries), .. }) = self.durable.get(&at)
            {
                stack.extend(entries.values());
            }
        }
        self.durable.retain(|ino, _| reached.contains(ino));
        // A name whose inode the disk never had (synced by a directory before it existed
        // there: not possible through `sync`, but a guard) is dropped.
        let known: HashSet<Ino> = self.durable.keys().copied().collect();
        for inode in self.durable.values_mut() {
            if let Node::Dir(entries) = &mut inode.node {
                entries.retain(|_, ino| known.contains(ino));
            }
        }
        self.volatile = self.durable.clone();
    }

    /// Whether anything written is not durable yet.
    pub fn pending(&self) -> bool {
        self.volatile != self.durable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journaled_a_files_sync_keeps_the_names_made_before_it() {
        for journaled in [false, true] {
            let mut m = if journaled { Model::journaled() } else { Model::default() };
            let d = m.create(ROOT, OsStr::new("base"), Node::Dir(BTreeMap::new()), 0o755, (0, 0)).unwrap();
            let f = file(&mut m, d, "PG_VERSION", "15");
            let other = file(&mut m, ROOT, "other", "unsynced");
            m.sync(f).unwrap();
            m.crash();
            let base = m.lookup(ROOT, OsStr::new("base"));
            assert_eq!(base.is_ok(), journaled, "journaled: {journaled}");
            if journaled {
                assert_eq!(text(&m, base.unwrap(), "PG_VERSION").as_deref(), Some("15"));
                // The other file's name is kept, its unsynced data is not.
                assert_eq!(text(&m, ROOT, "other").as_deref(), Some(""));
            }
            let _ = other;
        }
    }

    fn file(m: &mut Model, dir: Ino, name: &str, text: &str) -> Ino {
        let ino = m.create(dir, OsStr::new(name), Node::File(Data::default()), 0o644, (0, 0)).unwrap();
        m.write(ino, 0, text.as_bytes()).unwrap();
        ino
    }

    fn text(m: &Model, dir: Ino, name: &str) -> Option<String> {
        let ino = m.lookup(dir, OsStr::new(name)).ok()?;
        Some(String::from_utf8(m.read(ino, 0, u32::MAX).ok()?).unwrap())
    }

    #[test]
    fn an_unsynced_new_file_is_lost() {
        let mut m = Model::default();
        file(&mut m, ROOT, "a", "data");
        assert_eq!(text(&m, ROOT, "a").as_deref(), Some("data"));
        m.crash();
        assert_eq!(text(&m, ROOT, "a"), None);
    }

    #[test]
    fn a_synced_file_without_a_synced_name_is_lost() {
        let mut m = Model::default();
        let a = file(&mut m, ROOT, "a", "data");
        m.sync(a).unwrap();
        m.crash();
        assert_eq!(text(&m, ROOT, "a"), None, "its name was never made durable");
    }

    #[test]
    fn a_synced_name_without_synced_data_is_empty() {
        let mut m = Model::default();
        file(&mut m, ROOT, "a", "data");
        m.sync(ROOT).unwrap();
        m.crash();
        assert_eq!(text(&m, ROOT, "a").as_deref(), Some(""));
    }

    #[test]
    fn synced_data_and_name_are_kept_and_a_later_write_is_lost() {
        let mut m = Model::default();
        let a = file(&mut m, ROOT, "a", "first");
        m.sync(a).unwrap();
        m.sync(ROOT).unwrap();
        m.write(a, 0, b"SECOND").unwrap();
        m.truncate(a, 3).unwrap();
        assert_eq!(text(&m, ROOT, "a").as_deref(), Some("SEC"));
        assert!(m.pending());
        m.crash();
        assert_eq!(text(&m, ROOT, "a").as_deref(), Some("first"));
        assert!(!m.pending());
    }

    #[test]
    fn an_unsynced_rename_is_undone() {
        let mut m = Model::default();
        let tmp = file(&mut m, ROOT, "config.tmp", "new");
        let old = file(&mut m, ROOT, "config", "old");
        m.sync(tmp).unwrap();
        m.sync(old).unwrap();
        m.sync(ROOT).unwrap();
        m.rename(ROOT, OsStr::new("config.tmp"), ROOT, OsStr::new("config")).unwrap();
        assert_eq!(text(&m, ROOT, "config").as_deref(), Some("new"));
        m.crash();
        assert_eq!(text(&m, ROOT, "config").as_deref(), Some("old"), "the rename was not synced");
        assert_eq!(text(&m, ROOT, "config.tmp").as_deref(), Some("new"));
        // Synced, the rename stays.
        m.rename(ROOT, OsStr::new("config.tmp"), ROOT, OsStr::new("config")).unwrap();
        m.sync(ROOT).unwrap();
        m.crash();
        assert_eq!(text(&m, ROOT, "config").as_deref(), Some("new"));
        assert_eq!(text(&m, ROOT, "config.tmp"), None);
    }

    #[test]
    fn an_unsynced_removal_is_undone_and_a_subdirectory_needs_its_own_sync() {
        let mut m = Model::default();
        let a = file(&mut m, ROOT, "a", "kept");
        m.sync(a).unwrap();
        let d = m.create(ROOT, OsStr::new("d"), Node::Dir(BTreeMap::new()), 0o755, (0, 0)).unwrap();
        let inner = file(&mut m, d, "inner", "x");
        m.sync(inner).unwrap();
        m.sync(ROOT).unwrap();
        m.remove(ROOT, OsStr::new("a"), false).unwrap();
        m.crash();
        assert_eq!(text(&m, ROOT, "a").as_deref(), Some("kept"), "the removal was not synced");
        assert_eq!(text(&m, d, "inner"), None, "d's own entries were never synced");
        assert!(m.list(d).unwrap().is_empty());
    }

    #[test]
    fn errors_are_the_kernels() {
        let mut m = Model::default();
        let d = m.create(ROOT, OsStr::new("d"), Node::Dir(BTreeMap::new()), 0o755, (0, 0)).unwrap();
        file(&mut m, d, "f", "x");
        assert_eq!(m.remove(ROOT, OsStr::new("d"), true), Err(Fault::NotEmpty));
        assert_eq!(m.remove(ROOT, OsStr::new("d"), false), Err(Fault::IsDir));
        assert_eq!(
            m.create(ROOT, OsStr::new("d"), Node::File(Data::default()), 0o644, (0, 0)),
            Err(Fault::Exists)
        );
        assert_eq!(m.lookup(ROOT, OsStr::new("none")), Err(Fault::NotFound));
        assert_eq!(m.rename(ROOT, OsStr::new("d"), d, OsStr::new("inside")), Err(Fault::Invalid));
        let f = m.lookup(d, OsStr::new("f")).unwrap();
        m.link(f, ROOT, OsStr::new("g")).unwrap();
        assert_eq!(m.links(f), 2);
    }
}
