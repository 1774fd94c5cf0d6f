//! An import's first pass: every line of the chosen projects checked (`rules`) and every
//! reference an imported record makes resolved, before anything is written, so that a
//! refused archive writes nothing. It also counts what the import would write, which is
//! all `--dry-run` does.
//!
//! A record is imported when no row of its id exists in the database and it is the first
//! line of that id in the archive; else it is skipped (as the second pass does). What an
//! imported record points at must be in its own project, in the archive or the database:
//! a session's head checkpoint (one of its own when in the archive), resumed-from and
//! resumed-by, a checkpoint's session (listed before it) and parent, and the transcript
//! chunks it needs. Retention re-points a parent it removes, so nothing an export holds
//! points nowhere; an id that resolves nowhere could be taken later by another project.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use anyhow::{Context as _, bail};

use super::{lines, rules};
use crate::core::validate;
use crate::store::transfer::{ImportCounts, Line};
use crate::store::{Entity, Store};

/// Which lines an import reads, and this server's checkpoint size limit.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    pub only: Option<&'a str>,
    pub max_checkpoint_bytes: usize,
}

impl Options<'_> {
    pub fn takes(&self, project: &str) -> bool {
        self.only.is_none_or(|o| o == project)
    }
}

/// Where an id first appears in the archive: (project index, line).
type First = (usize, usize);

struct SessionRef {
    line: usize,
    id: String,
    head: Option<String>,
    resumed: [Option<String>; 2],
    /// A thread's session: its key and namespace.
    thread: Option<(String, String)>,
}

struct CheckpointRef {
    line: usize,
    id: String,
    session: String,
    parent: Option<String>,
    chunks: Vec<String>,
}

/// One project's lines, as ids and references.
#[derive(Default)]
struct Project {
    key: String,
    chunks: Vec<String>,
    sessions: Vec<SessionRef>,
    checkpoints: Vec<CheckpointRef>,
    /// (line, id, record)
    entries: Vec<(usize, String, String)>,
    records: Vec<String>,
    /// Pending writes: (line, checkpoint, task, index).
    writes: Vec<(usize, String, String, i32)>,
    /// Item logs: (line, key, created_us).
    item_logs: Vec<(usize, String, i64)>,
    /// Items: (line, log key, seq, item key).
    items: Vec<(usize, String, i64, Option<String>)>,
    /// Commit links: (line, commit, session).
    commit_links: Vec<(usize, String, String)>,
}

#[derive(Default)]
struct Archive {
    projects: Vec<Project>,
    sessions: HashMap<String, First>,
    /// With the checkpoint's session.
    checkpoints: HashMap<String, (First, String)>,
    entries: HashMap<String, First>,
}

/// Checks the archive; per chosen project, what an import would write (`imported`) and
/// leave as it is (`skipped`).
pub async fn plan<S: Store>(
    store: &S,
    input: impl Read,
    options: Options<'_>,
) -> anyhow::Result<Vec<(String, ImportCounts)>> {
    let archive = read(input, options)?;
    let mut lookup = Lookup { store, known: HashMap::new() };
    let mut report = Vec::new();
    for (i, project) in archive.projects.iter().enumerate() {
        let counts = resolve(&archive, i, project, &mut lookup)
            .await
            .with_context(|| format!("project {:?} of the archive", project.key))?;
        report.push((project.key.clone(), counts));
    }
    Ok(report)
}

fn read(input: impl Read, options: Options<'_>) -> anyhow::Result<Archive> {
    let mut archive = Archive::default();
    let mut in_archive: Vec<String> = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    // None before the first project line; Some(None) in a project not imported.
    let mut current: Option<Option<usize>> = None;
    for item in lines::records(input)? {
        let (n, line) = item?;
        if let Line::Project { key, memory_caps } = &line {
            validate::project("project", key).map_err(|e| anyhow::anyhow!("line {n}: {e}"))?;
            if let Some(first) = first_line.insert(key.clone(), n) {
                bail!(
                    "line {n}: project {key:?} again (first at line {first}): an archive holds each project once"
                );
            }
            in_archive.push(key.clone());
            if !options.takes(key) {
                current = Some(None);
                continue;
            }
            rules::caps(memory_caps).map_err(|e| anyhow::anyhow!("line {n}: {e}"))?;
            // Each project once (refused above when given again): a section of its own.
            current = Some(Some(archive.projects.len()));
            archive.projects.push(Project { key: key.clone(), ..Project::default() });
            continue;
        }
        let i = match current {
            None => bail!("line {n}: a record before any project line"),
            Some(None) => continue,
            Some(Some(i)) => i,
        };
        rules::check(&line, options.max_checkpoint_bytes)
            .map_err(|e| anyhow::anyhow!("line {n} of the archive ({}): {e}", what(&line)))?;
        archive.add(i, n, line);
    }
    if let Some(only) = options.only
        && !archive.projects.iter().any(|p| p.key == only)
    {
        bail!("the archive holds no project {only:?}; it holds {in_archive:?}");
    }
    Ok(archive)
}

/// A line's kind and id, for messages.
pub fn what(line: &Line) -> String {
    match line {
        Line::Header { .. } => "header".into(),
        Line::Project { key, .. } => format!("project {key:?}"),
        Line::Chunk(c) => format!("chunk {}", c.digest),
        Line::Session(s) => format!("session {}", s.id),
        Line::Checkpoint(c) => format!("checkpoint {}", c.id),
        Line::Memory(m) => format!("memory entry {}", m.id),
        Line::Record(r) => format!("memory record {:?}", r.record),
        Line::Write(w) => {
            format!("pending write ({}, {}) of checkpoint {}", w.task_id, w.idx, w.checkpoint_id)
        }
        Line::ItemLog(l) => format!("item log {:?}", l.key),
        Line::Item(i) => format!("item {} of log {:?}", i.seq, i.log_key),
        Line::CommitLink(l) => format!("link of commit {} to session {}", l.commit_id, l.session_id),
    }
}

impl Archive {
    fn add(&mut self, i: usize, n: usize, line: Line) {
        let project = &mut self.projects[i];
        match line {
            Line::Header { .. } | Line::Project { .. } => {}
            Line::Chunk(c) => project.chunks.push(c.digest),
            Line::Session(s) => {
                self.sessions.entry(s.id.clone()).or_insert((i, n));
                project.sessions.push(SessionRef {
                    line: n,
                    id: s.id,
                    head: s.head_checkpoint_id,
                    resumed: [s.resumed_from, s.resumed_by],
                    thread: s.thread_key.zip(s.thread_ns),
                });
            }
            Line::Checkpoint(c) => {
                let chunks = rules::chunks_of(&c);
                self.checkpoints.entry(c.id.clone()).or_insert(((i, n), c.session_id.clone()));
                project.checkpoints.push(CheckpointRef {
                    line: n,
                    id: c.id,
                    session: c.session_id,
                    parent: c.parent_id,
                    chunks,
                });
            }
            Line::Memory(m) => {
                self.entries.entry(m.id.clone()).or_insert((i, n));
                project.entries.push((n, m.id, m.record));
            }
            Line::Record(r) => project.records.push(r.record),
            Line::Write(w) => project.writes.push((n, w.checkpoint_id, w.task_id, w.idx)),
            Line::ItemLog(l) => project.item_logs.push((n, l.key, l.created_us)),
            Line::Item(i) => project.items.push((n, i.log_key, i.seq, i.item_key)),
            Line::CommitLink(l) => project.commit_links.push((n, l.commit_id, l.session_id)),
        }
    }

    /// The project a row of this id lives in once the import is done: the database's,
    /// else the archive's first.
    fn home(&self, kind: Entity, id: &str, in_db: Option<String>) -> Option<String> {
        in_db.or_else(|| self.first(kind, id).map(|(i, _)| self.projects[i].key.clone()))
    }

    fn first(&self, kind: Entity, id: &str) -> Option<First> {
        match kind {
            Entity::Session => self.sessions.get(id).copied(),
            Entity::Checkpoint => self.checkpoints.get(id).map(|(f, _)| *f),
            Entity::Entry => self.entries.get(id).copied(),
        }
    }
}

/// The database's project of each id asked about, asked once.
struct Lookup<'a, S> {
    store: &'a S,
    known: HashMap<(u8, String), Option<String>>,
}

impl<S: Store> Lookup<'_, S> {
    async fn project_of(&mut self, kind: Entity, id: &str) -> anyhow::Result<Option<String>> {
        let key = (kind as u8, id.to_owned());
        if let Some(known) = self.known.get(&key) {
            return Ok(known.clone());
        }
        let project = self.store.project_of(kind, id.to_owned()).await?;
        self.known.insert(key, project.clone());
        Ok(project)
    }

    /// Whether this line is the one that imports its id.
    async fn place(&mut self, archive: &Archive, kind: Entity, id: &str, at: First) -> anyhow::Result<bool> {
        let in_db = self.project_of(kind, id).await?;
        Ok(in_db.is_none() && archive.first(kind, id) == Some(at))
    }

    async fn home(&mut self, archive: &Archive, kind: Entity, id: &str) -> anyhow::Result<Option<String>> {
        let in_db = self.project_of(kind, id).await?;
        Ok(archive.home(kind, id, in_db))
    }
}

const CHUNK_PAGE: usize = 1000;

/// One project's pass: its counts so far.
struct Resolve<'a, 'l, S> {
    archive: &'a Archive,
    i: usize,
    project: &'a Project,
    lookup: &'a mut Lookup<'l, S>,
    counts: ImportCounts,
}

async fn resolve<S: Store>(
    archive: &Archive,
    i: usize,
    project: &Project,
    lookup: &mut Lookup<'_, S>,
) -> anyhow::Result<ImportCounts> {
    let mut r = Resolve { archive, i, project, lookup, counts: ImportCounts::default() };
    r.chunks().await?;
    r.sessions().await?;
    r.checkpoints().await?;
    r.writes().await?;
    r.memory().await?;
    r.item_logs().await?;
    r.commit_links().await?;
    Ok(r.counts)
}

impl<S: Store> Resolve<'_, '_, S> {
    fn count(&mut self, imported: bool) {
        if imported {
            self.counts.imported += 1;
        } else {
            self.counts.skipped += 1;
        }
    }

    fn key(&self) -> &str {
        &self.project.key
    }

    async fn chunks(&mut self) -> anyhow::Result<()> {
        let mut unique: Vec<String> = Vec::new();
        let mut listed = HashSet::new();
        for digest in &self.project.chunks {
            if listed.insert(digest.as_str()) {
                unique.push(digest.clone());
            }
        }
        let mut missing = 0;
        for page in unique.chunks(CHUNK_PAGE) {
            missing += crate::store::missing_chunks(self.lookup.store, self.key().to_owned(), page.to_vec())
                .await?
                .len();
        }
        self.counts.imported += missing as u64;
        self.counts.skipped += (self.project.chunks.len() - missing) as u64;
        Ok(())
    }

    async fn sessions(&mut self) -> anyhow::Result<()> {
        let (archive, project) = (self.archive, self.project);
        let key = project.key.as_str();
        for s in &project.sessions {
            let imported = self.lookup.place(archive, Entity::Session, &s.id, (self.i, s.line)).await?;
            self.count(imported);
            if !imported {
                continue;
            }
            if let Some(head) = &s.head {
                let home = self.lookup.home(archive, Entity::Checkpoint, head).await?;
                let from_archive = self.lookup.project_of(Entity::Checkpoint, head).await?.is_none();
                let of_session = archive.checkpoints.get(head).map(|(_, session)| session.as_str());
                if home.as_deref() != Some(key) || (from_archive && of_session != Some(s.id.as_str())) {
                    bail!(
                        "line {}: session {}'s head checkpoint {head} is {}: a session's head must be one of its own checkpoints",
                        s.line,
                        s.id,
                        elsewhere(home.as_deref())
                    );
                }
            }
            if let Some((thread, ns)) = &s.thread {
                self.thread(s.line, &s.id, thread, ns).await?;
            }
            for resumed in s.resumed.iter().flatten() {
                let home = self.lookup.home(archive, Entity::Session, resumed).await?;
                if home.as_deref() != Some(key) {
                    bail!(
                        "line {}: session {} was resumed from or by session {resumed}, which is {}",
                        s.line,
                        s.id,
                        elsewhere(home.as_deref())
                    );
                }
            }
        }
        Ok(())
    }

    async fn checkpoints(&mut self) -> anyhow::Result<()> {
        let (archive, project) = (self.archive, self.project);
        let key = project.key.as_str();
        let archived: HashSet<&str> = project.chunks.iter().map(String::as_str).collect();
        let mut needed: Vec<(usize, &str, &str)> = Vec::new();
        for c in &project.checkpoints {
            let imported = self.lookup.place(archive, Entity::Checkpoint, &c.id, (self.i, c.line)).await?;
            self.count(imported);
            if !imported {
                continue;
            }
            let home = self.lookup.home(archive, Entity::Session, &c.session).await?;
            if home.as_deref() != Some(key) {
                bail!(
                    "line {}: checkpoint {} belongs to session {}, which is {}",
                    c.line,
                    c.id,
                    c.session,
                    elsewhere(home.as_deref())
                );
            }
            // Written in the archive's order: a session the database lacks comes first.
            if self.lookup.project_of(Entity::Session, &c.session).await?.is_none()
                && let Some(&(_, at)) = archive.sessions.get(&c.session)
                && at > c.line
            {
                bail!(
                    "line {}: checkpoint {} comes before its session {} (line {at}): an archive lists a project's sessions first",
                    c.line,
                    c.id,
                    c.session
                );
            }
            if let Some(parent) = &c.parent {
                let home = self.lookup.home(archive, Entity::Checkpoint, parent).await?;
                if home.as_deref() != Some(key) {
                    bail!(
                        "line {}: checkpoint {}'s parent {parent} is {}",
                        c.line,
                        c.id,
                        elsewhere(home.as_deref())
                    );
                }
            }
            let absent = c.chunks.iter().filter(|d| !archived.contains(d.as_str()));
            needed.extend(absent.map(|d| (c.line, c.id.as_str(), d.as_str())));
        }
        for page in needed.chunks(CHUNK_PAGE) {
            let digests = page.iter().map(|(_, _, d)| (*d).to_owned()).collect();
            let missing = crate::store::missing_chunks(self.lookup.store, key.to_owned(), digests).await?;
            if let Some(gone) = missing.first()
                && let Some((line, id, _)) = page.iter().find(|(_, _, d)| d == gone)
            {
                bail!(
                    "line {line}: checkpoint {id}'s transcript needs chunk {gone}, which neither the archive nor this database has for project {key:?}"
                );
            }
        }
        Ok(())
    }

    /// A thread's namespace has one session: an imported one may not take a key another
    /// session of the project has, in the database or earlier in the archive.
    async fn thread(&mut self, line: usize, id: &str, thread: &str, ns: &str) -> anyhow::Result<()> {
        let key = self.key().to_owned();
        let taken = self.lookup.store.thread_sessions(key.clone(), thread.to_owned()).await?;
        let earlier = self.project.sessions.iter().take_while(|s| s.line < line);
        let in_archive = earlier.filter_map(|s| s.thread.as_ref().map(|t| (s.id.as_str(), t)));
        let holder = taken
            .iter()
            .filter(|s| s.thread_ns.as_deref() == Some(ns))
            .map(|s| s.id.as_str())
            .chain(in_archive.filter(|(_, (t, n))| t == thread && n == ns).map(|(i, _)| i))
            .find(|holder| *holder != id);
        if let Some(holder) = holder {
            bail!(
                "line {line}: session {id} is thread {thread:?} namespace {ns:?}, which session {holder} already is in \
                 project {key:?}; delete one of the threads (DeleteThreads) first"
            );
        }
        Ok(())
    }

    /// Pending writes: on a checkpoint of this project (listed before them, or in the
    /// database); imported unless their checkpoint has a write of that key.
    async fn writes(&mut self) -> anyhow::Result<()> {
        let (archive, project) = (self.archive, self.project);
        let key = project.key.clone();
        let mut stored: HashMap<&str, HashSet<(String, i32)>> = HashMap::new();
        for (line, checkpoint, task, idx) in &project.writes {
            let home = self.lookup.home(archive, Entity::Checkpoint, checkpoint).await?;
            if home.as_deref() != Some(key.as_str()) {
                bail!(
                    "line {line}: a pending write's checkpoint {checkpoint} is {}",
                    elsewhere(home.as_deref())
                );
            }
            if !stored.contains_key(checkpoint.as_str()) {
                let rows = self.lookup.store.pending_writes(key.clone(), vec![checkpoint.clone()]).await?;
                stored.insert(checkpoint, rows.into_iter().map(|w| (w.task_id, w.idx)).collect());
            }
            let keys = stored.entry(checkpoint).or_default();
            let imported = keys.insert((task.clone(), *idx));
            self.count(imported);
        }
        Ok(())
    }

    async fn memory(&mut self) -> anyhow::Result<()> {
        let (archive, project) = (self.archive, self.project);
        let mut fed: HashSet<&str> = HashSet::new();
        for (line, id, record) in &project.entries {
            let imported = self.lookup.place(archive, Entity::Entry, id, (self.i, *line)).await?;
            self.count(imported);
            if imported {
                fed.insert(record);
            }
        }
        let mut versioned: HashSet<&str> = HashSet::new();
        for record in &project.records {
            let imported = fed.contains(record.as_str())
                && versioned.insert(record)
                && self.lookup.store.record_revision(project.key.clone(), record.clone()).await?.is_none();
            self.count(imported);
        }
        Ok(())
    }
}

impl<S: Store> Resolve<'_, '_, S> {
    /// Item logs, then their items: a log the database has is the archive's only when it
    /// was made at the same time (an import run again), and then only its items past its
    /// newest are imported; an item comes after its log's line, in seq order, its key once.
    async fn item_logs(&mut self) -> anyhow::Result<()> {
        let key = self.key().to_owned();
        // Log key → (its line, the newest seq the database has of it).
        let mut logs: HashMap<&str, (usize, i64)> = HashMap::new();
        for (line, log, created_us) in &self.project.item_logs {
            if let Some((first, _)) = logs.get(log.as_str()) {
                bail!(
                    "line {line}: item log {log:?} again (first at line {first}): an archive holds each log once"
                );
            }
            let stored = self.lookup.store.item_log(key.clone(), log.clone()).await?;
            if let Some(s) = &stored
                && s.created_us != *created_us
            {
                bail!(
                    "line {line}: item log {log:?} exists in project {key:?} and is not the archive's (it was \
                     created at another time); delete it there (DeleteItemLogs) or import into another project"
                );
            }
            self.count(stored.is_none());
            logs.insert(log, (*line, stored.map_or(0, |s| s.last_seq)));
        }
        let mut last: HashMap<&str, i64> = HashMap::new();
        let mut keys: HashSet<(&str, &str)> = HashSet::new();
        for (line, log, seq, item_key) in &self.project.items {
            let Some(&(log_line, newest)) = logs.get(log.as_str()).filter(|(at, _)| at < line) else {
                bail!("line {line}: item {seq} of log {log:?} comes before its log's line (or has none)");
            };
            if last.insert(log, *seq).is_some_and(|before| before >= *seq) {
                bail!(
                    "line {line}: item {seq} of log {log:?} is out of order: a log's items come in seq order"
                );
            }
            if let Some(k) = item_key
                && !keys.insert((log, k))
            {
                bail!("line {line}: item key {k:?} is in log {log:?} (line {log_line}) twice");
            }
            self.count(*seq > newest);
        }
        Ok(())
    }
}

impl<S: Store> Resolve<'_, '_, S> {
    /// Commit links: each of a session of this project (the database's or the archive's),
    /// once; those the project has are skipped.
    async fn commit_links(&mut self) -> anyhow::Result<()> {
        let (archive, project) = (self.archive, self.project);
        let key = project.key.clone();
        let mut seen: HashSet<(&str, &str)> = HashSet::new();
        for (line, commit, session) in &project.commit_links {
            let home = self.lookup.home(archive, Entity::Session, session).await?;
            if home.as_deref() != Some(key.as_str()) {
                bail!(
                    "line {line}: the link of commit {commit} names session {session}, which is {}",
                    elsewhere(home.as_deref())
                );
            }
            if !seen.insert((commit, session)) {
                bail!(
                    "line {line}: the link of commit {commit} to session {session} again: an archive holds each once"
                );
            }
            let stored =
                self.lookup.store.links_of(key.clone(), vec![commit.clone()], Vec::new(), 1000).await?;
            self.count(!stored.iter().any(|l| l.session_id == *session));
        }
        Ok(())
    }
}

/// Where a referenced row is, said to an admin.
fn elsewhere(home: Option<&str>) -> String {
    match home {
        Some(project) => format!("in project {project:?}"),
        None => "in neither the archive nor this database".into(),
    }
}
