//! Local state of the agent sessions this machine's hooks have seen: which Baton session
//! an agent conversation maps to, what its hooks recorded (its journal), its counters.
//!
//! Conversations with calls no checkpoint holds are marked by a file beside their record,
//! so a SessionStart finds them without reading every record. This device serves
//! hook-bench's "SessionStart, 4 at once" row (docs/performance.md).

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[expect(clippy::struct_excessive_bools, reason = "independent facts of one record, kept as JSON")]
pub struct AgentSession {
    pub baton_session_id: String,
    pub project: String,
    pub tool_count: u64,
    /// tool_count at the last automatic checkpoint.
    pub checkpointed_at: u64,
    /// The head checkpoint this machine last wrote (parent of the next one).
    #[serde(default)]
    pub last_checkpoint_id: String,
    #[serde(default)]
    pub ended: bool,
    #[serde(default)]
    pub transcript_path: String,
    #[serde(default)]
    pub cwd: String,
    /// The project root found for `cwd` (so later hooks need not ask git again).
    #[serde(default)]
    pub root: String,
    /// When a hook of it last sent a heartbeat (µs since the epoch).
    #[serde(default)]
    pub last_beat_us: i64,
    /// What the conversation did, from the hook payloads (kept until no hook has touched it
    /// for `EXPIRY`).
    #[serde(default)]
    pub journal: crate::local::journal::Journal,
    /// A successor `baton resume` made for this conversation: the conversation's first hook
    /// records on it which conversation carries it (so a later resume elsewhere can offer
    /// the agent's own resume command).
    #[serde(default)]
    pub adopt: bool,
    /// For the successor a `baton resume` made here: the session it resumed, and the
    /// agent's command that continues the conversation (empty when it is not here).
    #[serde(default)]
    pub resumed_from: String,
    #[serde(default)]
    pub resume_argv: Vec<String>,
    /// When this machine last wrote a checkpoint of it (µs since the epoch; 0 = never).
    #[serde(default)]
    pub last_checkpoint_us: i64,
    /// The processes above the hook that started it, nearest first: the agent's among them
    /// (`baton mcp`, started by the same agent process, finds its conversation by them).
    #[serde(default)]
    pub agent_pids: Vec<u32>,
    /// A summary of its end was started (at most one per session end).
    #[serde(default)]
    pub summarized_end: bool,
    /// The reservations its session held at the last renewal (ids): the next renewal names
    /// those it lost.
    #[serde(default)]
    pub reserved_ids: Vec<String>,
    /// Text for the model that waits for the next hook able to deliver it (a warning
    /// Gemini's BeforeTool cannot give, a lost reservation Codex's PostToolUse cannot tell).
    #[serde(default)]
    pub pending_notice: String,
    /// The project reserves what an agent starts on (its setting, as the last renewal
    /// read it), and the task keys reserved so for this conversation.
    #[serde(default)]
    pub auto_reserve: bool,
    #[serde(default)]
    pub auto_tasks: Vec<String>,
    /// HEAD as its hooks last saw it, HEAD's branch then, and when HEAD was last seen to
    /// move (µs): a move since is commits to link (`hook::commits`).
    #[serde(default)]
    pub head_seen: String,
    #[serde(default)]
    pub head_branch: String,
    #[serde(default)]
    pub head_seen_us: i64,
    /// HEAD as a pre-tool hook found it when it had moved since `head_seen`: the person
    /// committed between the agent's calls.
    #[serde(default)]
    pub pre_head: String,
    /// When its hooks last looked at HEAD and found it moved, or started it (µs): with its
    /// heartbeats and checkpoints, whether it is live beside another conversation.
    #[serde(default)]
    pub hook_us: i64,
}

/// How long a conversation's record is kept after its last hook.
pub const EXPIRY: std::time::Duration = std::time::Duration::from_hours(720);

pub struct Store {
    dir: PathBuf,
}

/// A file name safe for any agent's session id.
fn file_name(agent: &str, agent_session_id: &str) -> String {
    let safe: String = agent_session_id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .take(100)
        .collect();
    format!("{agent}-{safe}.json")
}

impl Store {
    pub fn new(data_dir: &Path) -> Self {
        Self { dir: data_dir.join("sessions") }
    }

    fn path(&self, agent: &str, agent_session_id: &str) -> PathBuf {
        self.dir.join(file_name(agent, agent_session_id))
    }

    pub fn get(&self, agent: &str, agent_session_id: &str) -> Option<AgentSession> {
        let bytes = fs::read(self.path(agent, agent_session_id)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// The records of `agent`'s conversations (any agent's with `None`), most recently
    /// written first, at most `limit`, with the agent's name and the file name's id part.
    /// Records of pending resumes and successors are not conversations and are skipped.
    pub fn recent(&self, agent: Option<&str>, limit: usize) -> Vec<(String, String, AgentSession)> {
        let Ok(entries) = fs::read_dir(&self.dir) else { return Vec::new() };
        let mut files: Vec<(std::time::SystemTime, String)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let stem = name.strip_suffix(".json")?;
                if stem.contains("pending_") || stem.contains("successor_") {
                    return None;
                }
                if let Some(agent) = agent
                    && !stem.starts_with(&format!("{agent}-"))
                {
                    return None;
                }
                Some((e.metadata().ok()?.modified().ok()?, name))
            })
            .collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.0));
        files
            .into_iter()
            .filter_map(|(_, name)| {
                let (agent, key) = name.strip_suffix(".json")?.split_once('-')?;
                let record = serde_json::from_slice(&fs::read(self.dir.join(&name)).ok()?).ok()?;
                Some((agent.to_owned(), key.to_owned(), record))
            })
            .take(limit)
            .collect()
    }

    /// Removes and returns an entry (e.g. a resume waiting for the next new conversation).
    pub fn take(&self, agent: &str, key: &str) -> Option<AgentSession> {
        let path = self.path(agent, key);
        let found = self.get(agent, key);
        // Taken for good: a pending resume a power cut brought back would be applied to
        // another new conversation.
        if fs::remove_file(&path).is_ok() {
            let _ = crate::fsperm::sync_dir(&self.dir);
        }
        let _ = fs::remove_file(path.with_extension("lock"));
        found
    }

    /// Marks a conversation as having tool calls no checkpoint holds yet (or not). A marker
    /// file beside its record, so finding them reads no records: a SessionStart looks for
    /// them (`unsaved`) without parsing every record (the module's header).
    pub fn mark_unsaved(&self, agent: &str, agent_session_id: &str, unsaved: bool) {
        let marker = self.path(agent, agent_session_id).with_extension("unsaved");
        // Written (and its folder synced) only when it changes: most calls find it as wanted.
        if unsaved == marker.exists() {
            return;
        }
        if unsaved {
            let _ = crate::fsperm::write_atomic(&marker, b"", None);
        } else if fs::remove_file(marker).is_ok() {
            let _ = crate::fsperm::sync_dir(&self.dir);
        }
    }

    /// The conversations of `agent` marked unsaved, with their records, keyed by the file
    /// name's id part.
    pub fn unsaved(&self, agent: &str) -> Vec<(String, AgentSession)> {
        let prefix = format!("{agent}-");
        let Ok(entries) = fs::read_dir(&self.dir) else { return Vec::new() };
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let key = name.strip_prefix(&prefix)?.strip_suffix(".unsaved")?.to_owned();
                let record =
                    serde_json::from_slice(&fs::read(self.dir.join(format!("{prefix}{key}.json"))).ok()?)
                        .ok()?;
                Some((key, record))
            })
            .collect()
    }

    /// Forgets conversations no hook has touched for `max_age` (their files, locks and
    /// markers): the journal of a conversation is of use while it may go on, not forever.
    /// Looks at most once a day.
    pub fn sweep(&self, max_age: std::time::Duration) -> usize {
        let stamp = self.dir.join(".swept");
        let day = std::time::Duration::from_hours(24);
        if fs::metadata(&stamp)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < day))
        {
            return 0;
        }
        let _ = crate::fsperm::create_private_dir(&self.dir)
            .and_then(|()| crate::fsperm::write_private(&stamp, b""));
        let Ok(entries) = fs::read_dir(&self.dir) else { return 0 };
        let mut removed = 0;
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > max_age));
            if old && fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    /// Read-modify-write under a lock (hooks of one session can overlap).
    pub fn update<T>(
        &self,
        agent: &str,
        agent_session_id: &str,
        f: impl FnOnce(&mut AgentSession) -> T,
    ) -> anyhow::Result<T> {
        crate::fsperm::create_private_dir(&self.dir)?;
        let path = self.path(agent, agent_session_id);
        let lock =
            File::options().create(true).truncate(false).write(true).open(path.with_extension("lock"))?;
        lock.lock()?;
        let before = fs::read(&path).ok();
        let mut state: AgentSession =
            before.as_deref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or_default();
        let out = f(&mut state);
        let after = serde_json::to_vec(&state)?;
        // Most hooks' updates change nothing (a notice already given, HEAD where it was): no
        // write. A new record's name is synced (the conversation's session must be known
        // after a power cut); a changed one is replaced whole, and a cut may bring back the
        // one before (its counts and last checkpoint, which the next hooks carry on from).
        match before {
            Some(b) if b == after => {}
            Some(_) => crate::fsperm::replace_whole(&path, &after, None)?,
            None => crate::fsperm::write_atomic(&path, &after, None)?,
        }
        Ok(out)
    }
}
