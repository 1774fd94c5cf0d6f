//! The model served as a FUSE mount (`fuser`, without libfuse: as root it mounts with
//! mount(2)). Every operation goes to the model under one lock; the kernel is told to cache
//! nothing it could serve after a power cut (entries and attributes live 0 s, no page cache
//! kept across opens, no writeback cache: each `write(2)` reaches the model before it
//! returns). `fsync` and `fsyncdir` are answered, never ENOSYS (the kernel would stop asking).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, SessionACL, TimeOrNow, WriteFlags,
};

use super::model::{Fault, Ino, Inode, Model, Node};

/// Nothing cached by the kernel outlives an operation.
const TTL: Duration = Duration::ZERO;

/// The file system: the model, shared with whoever cuts the power.
#[derive(Clone, Default)]
pub struct LazyFs {
    model: Arc<Mutex<Model>>,
}

fn errno(f: Fault) -> Errno {
    Errno::from_i32(f.errno())
}

fn attr(ino: Ino, inode: &Inode, links: u32) -> FileAttr {
    let (kind, size) = match &inode.node {
        Node::File(data) => (FileType::RegularFile, data.len() as u64),
        Node::Dir(entries) => (FileType::Directory, entries.len() as u64),
        Node::Symlink(target) => (FileType::Symlink, target.len() as u64),
    };
    let now = SystemTime::now();
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm: u16::try_from(inode.mode & 0o7777).unwrap_or(0o644),
        nlink: links.max(1),
        uid: inode.uid,
        gid: inode.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl LazyFs {
    /// A file system whose file syncs also keep every earlier name change (`Model::journaled`).
    pub fn journaled() -> Self {
        Self { model: Arc::new(Mutex::new(Model::journaled())) }
    }

    /// The model (a test cuts the power with `crash`).
    pub fn model(&self) -> MutexGuard<'_, Model> {
        // A panic under the lock is a test's failure already; the model stays usable.
        self.model.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn entry(&self, ino: Ino, reply: ReplyEntry) {
        let m = self.model();
        match m.get(ino) {
            Some(inode) => reply.entry(&TTL, &attr(ino, inode, m.links(ino)), Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn make(&self, req: &Request, parent: INodeNo, name: &OsStr, node: Node, mode: u32, reply: ReplyEntry) {
        let made = self.model().create(parent.0, name, node, mode, (req.uid(), req.gid()));
        match made {
            Ok(ino) => self.entry(ino, reply),
            Err(f) => reply.error(errno(f)),
        }
    }
}

fn done(result: Result<(), Fault>, reply: ReplyEmpty) {
    match result {
        Ok(()) => reply.ok(),
        Err(f) => reply.error(errno(f)),
    }
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self.model().lookup(parent.0, name);
        match found {
            Ok(ino) => self.entry(ino, reply),
            Err(f) => reply.error(errno(f)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let m = self.model();
        match m.get(ino.0) {
            Some(inode) => reply.attr(&TTL, &attr(ino.0, inode, m.links(ino.0))),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut m = self.model();
        let changed = m.set_meta(ino.0, mode, uid, gid).and_then(|()| match size {
            Some(size) => m.truncate(ino.0, size),
            None => Ok(()),
        });
        match changed.map(|()| m.get(ino.0).map(|i| attr(ino.0, i, m.links(ino.0)))) {
            Ok(Some(a)) => reply.attr(&TTL, &a),
            Ok(None) => reply.error(Errno::ENOENT),
            Err(f) => reply.error(errno(f)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.model().get(ino.0).map(|i| &i.node) {
            Some(Node::Symlink(target)) => reply.data(target.as_encoded_bytes()),
            Some(_) => reply.error(Errno::EINVAL),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        self.make(req, parent, name, Node::Dir(std::collections::BTreeMap::default()), mode & !umask, reply);
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        self.make(req, parent, link_name, Node::Symlink(target.as_os_str().to_owned()), 0o777, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        done(self.model().remove(parent.0, name, false), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        done(self.model().remove(parent.0, name, true), reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !flags.is_empty() {
            // RENAME_NOREPLACE and RENAME_EXCHANGE: callers fall back without them.
            reply.error(Errno::EINVAL);
            return;
        }
        done(self.model().rename(parent.0, name, newparent.0, newname), reply);
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let linked = self.model().link(ino.0, newparent.0, newname);
        match linked {
            Ok(()) => self.entry(ino.0, reply),
            Err(f) => reply.error(errno(f)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut m = self.model();
        if m.get(ino.0).is_none() {
            reply.error(Errno::ENOENT);
            return;
        }
        if flags.0 & libc::O_TRUNC != 0
            && let Err(f) = m.truncate(ino.0, 0)
        {
            reply.error(errno(f));
            return;
        }
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.model().read(ino.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(f) => reply.error(errno(f)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut m = self.model();
        // O_SYNC and O_DSYNC writes are durable when they return.
        let synced = flags.0 & (libc::O_SYNC | libc::O_DSYNC) != 0;
        match m.write(ino.0, offset, data).and_then(|()| if synced { m.sync(ino.0) } else { Ok(()) }) {
            Ok(()) => reply.written(u32::try_from(data.len()).unwrap_or(u32::MAX)),
            Err(f) => reply.error(errno(f)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // A close is not a sync.
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        done(self.model().sync(ino.0), reply);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.model().get(ino.0).map(|i| matches!(i.node, Node::Dir(_))) {
            Some(true) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Some(false) => reply.error(Errno::ENOTDIR),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let m = self.model();
        let listed = match m.list(ino.0) {
            Ok(listed) => listed,
            Err(f) => return reply.error(errno(f)),
        };
        let kind = |i: Ino| match m.get(i).map(|i| &i.node) {
            Some(Node::Dir(_)) => FileType::Directory,
            Some(Node::Symlink(_)) => FileType::Symlink,
            _ => FileType::RegularFile,
        };
        let dots = [(".".into(), ino.0), ("..".into(), ino.0)];
        for (at, (name, child)) in
            dots.into_iter().chain(listed).enumerate().skip(usize::try_from(offset).unwrap_or(usize::MAX))
        {
            if reply.add(INodeNo(child), at as u64 + 1, kind(child), &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        done(self.model().sync(ino.0), reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(1 << 24, 1 << 23, 1 << 23, 1 << 20, 1 << 19, 4096, 255, 4096);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut m = self.model();
        // Two processes may create the same file at once (a lock file): without O_EXCL the
        // second opens the first's.
        if flags & libc::O_EXCL == 0
            && let Ok(ino) = m.lookup(parent.0, name)
        {
            let truncated = if flags & libc::O_TRUNC != 0 { m.truncate(ino, 0) } else { Ok(()) };
            let a = truncated.map(|()| m.get(ino).map(|i| attr(ino, i, m.links(ino))));
            match a {
                Ok(Some(a)) => reply.created(&TTL, &a, Generation(0), FileHandle(0), FopenFlags::empty()),
                Ok(None) => reply.error(Errno::EIO),
                Err(f) => reply.error(errno(f)),
            }
            return;
        }
        let made = m.create(
            parent.0,
            name,
            Node::File(super::data::Data::default()),
            mode & !umask,
            (req.uid(), req.gid()),
        );
        match made {
            Ok(ino) => {
                let a = m.get(ino).map(|i| attr(ino, i, 1));
                match a {
                    Some(a) => reply.created(&TTL, &a, Generation(0), FileHandle(0), FopenFlags::empty()),
                    None => reply.error(Errno::EIO),
                }
            }
            Err(f) => reply.error(errno(f)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 {
            reply.error(Errno::EOPNOTSUPP);
            return;
        }
        let mut m = self.model();
        let size = match m.get(ino.0).map(|i| &i.node) {
            Some(Node::File(data)) => data.len() as u64,
            Some(_) => return reply.error(Errno::EINVAL),
            None => return reply.error(Errno::ENOENT),
        };
        let end = offset.saturating_add(length);
        done(if end > size { m.truncate(ino.0, end) } else { Ok(()) }, reply);
    }
}

/// A mounted file system.
pub struct Mounted {
    pub fs: LazyFs,
    session: fuser::BackgroundSession,
    dir: PathBuf,
}

impl Mounted {
    /// Mounts an empty file system at `dir` (an existing, empty directory), readable and
    /// writable by every user (a test's Postgres runs as its own user).
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        Self::with(dir, LazyFs::default())
    }

    /// Mounts `fs` (a model kept from an earlier mount: after a crash) at `dir`.
    pub fn with(dir: &Path, fs: LazyFs) -> std::io::Result<Self> {
        let mut config = Config::default();
        config.mount_options = vec![MountOption::FSName("lazyfs".into()), MountOption::DefaultPermissions];
        config.acl = SessionACL::All;
        let session = fuser::spawn_mount(fs.clone(), dir, &config)?;
        Ok(Self { fs, session, dir: dir.to_owned() })
    }

    /// A power cut: every process using the mount is killed at once, the mount goes, all that
    /// was not synced is dropped, and the file system is mounted again with what is left.
    pub fn cut_power(self) -> std::io::Result<Self> {
        let dir = self.dir.clone();
        let fs = self.unmount()?;
        fs.model().crash();
        Self::with(&dir, fs)
    }

    /// Unmounts (every process still using it killed first) and gives the model back.
    pub fn unmount(self) -> std::io::Result<LazyFs> {
        super::users::kill_all(&self.dir)?;
        self.session.umount_and_join()?;
        Ok(self.fs)
    }
}

#[cfg(test)]
mod tests {
    use std::fs::{File, OpenOptions};
    use std::io::Write as _;

    use super::*;

    /// A mount, or (outside CI, without FUSE) the reason there is none.
    pub(super) fn mount_for(dir: &Path) -> Option<Mounted> {
        match Mounted::new(dir) {
            Ok(m) => Some(m),
            Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
                eprintln!("lazyfs: skipped: cannot mount FUSE here ({e}); CI=true requires it");
                None
            }
            Err(e) => panic!("cannot mount FUSE: {e} (needs /dev/fuse and root, or fusermount3)"),
        }
    }

    #[test]
    fn through_the_mount_it_forgets_what_was_not_synced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let Some(mounted) = mount_for(p) else { return };
        {
            let mut f = File::create(p.join("kept")).unwrap();
            f.write_all(b"kept").unwrap();
            f.sync_all().unwrap();
        }
        File::open(p).unwrap().sync_all().unwrap();
        std::fs::create_dir(p.join("sub")).unwrap();
        {
            let mut f = OpenOptions::new().append(true).open(p.join("kept")).unwrap();
            f.write_all(b" and more").unwrap();
        }
        std::fs::write(p.join("new"), b"lost").unwrap();
        std::fs::rename(p.join("kept"), p.join("moved")).unwrap();
        assert_eq!(std::fs::read(p.join("moved")).unwrap(), b"kept and more");
        assert!(mounted.fs.model().pending());

        let fs = mounted.unmount().unwrap();
        fs.model().crash();
        let mounted = Mounted::with(p, fs).unwrap();
        assert_eq!(std::fs::read(p.join("kept")).unwrap(), b"kept", "the synced data under its synced name");
        assert!(!p.join("new").exists(), "an unsynced new file");
        assert!(!p.join("moved").exists(), "an unsynced rename");
        assert!(!p.join("sub").exists(), "an unsynced mkdir");
        // What is synced now stays.
        std::fs::rename(p.join("kept"), p.join("moved")).unwrap();
        File::open(p).unwrap().sync_all().unwrap();
        let fs = mounted.unmount().unwrap();
        fs.model().crash();
        let mounted = Mounted::with(p, fs).unwrap();
        assert_eq!(std::fs::read(p.join("moved")).unwrap(), b"kept");
        mounted.unmount().unwrap();
    }
}

#[cfg(test)]
mod sqlite {
    use std::process::Command;

    use super::*;

    /// SQLite in WAL mode (its `-shm` file mapped shared) with `synchronous=FULL`, as the
    /// server runs it: every committed row survives the power cut; the database opens.
    #[test]
    fn committed_rows_survive_a_power_cut() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let Some(mounted) = super::tests::mount_for(p) else { return };
        let db = p.join("t.db");
        let python = |code: &str| {
            let out = Command::new("python3").arg("-c").arg(code).arg(&db).output().expect("python3");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        python(
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             c.execute('pragma journal_mode=wal'); c.execute('pragma synchronous=full')\n\
             c.execute('create table t (n integer)')\n\
             for i in range(50): c.execute('insert into t values (?)', (i,))\n",
        );
        let fs = mounted.unmount().unwrap();
        fs.model().crash();
        let mounted = Mounted::with(p, fs).unwrap();
        let count = python(
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1])\n\
             print(c.execute('select count(*) from t').fetchone()[0])\n",
        );
        assert_eq!(count, "50");
        mounted.unmount().unwrap();
    }
}
