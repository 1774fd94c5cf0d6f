//! The export file's lines (`baton-server export` / `import`): JSON, one per line, in a
//! zstd stream. Rows as stored, bytes in base64; revisions are not carried, since import
//! renumbers everything into the target project's log. Ids are kept.

use serde::{Deserialize, Serialize};

/// The first line of every export.
pub const FORMAT: &str = "baton-export";
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Header {
        format: String,
        version: u32,
        exported_at_us: i64,
    },
    /// Starts a project's lines; the rest until the next `project` line belong to it.
    Project {
        key: String,
        memory_caps: String,
    },
    Chunk(ChunkLine),
    Session(Box<SessionLine>),
    Checkpoint(Box<CheckpointLine>),
    Memory(MemoryLine),
    Record(RecordLine),
    /// A thread's pending write (`ThreadService`), after its checkpoint.
    Write(WriteLine),
    /// An item log (`ItemLogService`): its key, times, author and summary.
    ItemLog(ItemLogLine),
    /// An item of a log, after its log's line, in seq order.
    Item(ItemLine),
    /// A commit's link to a session (`CommitService`), with its lines' fingerprints, after
    /// the sessions.
    CommitLink(Box<CommitLinkLine>),
}

mod b64 {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text.as_bytes()).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct ChunkLine {
    pub digest: String,
    #[serde(with = "b64")]
    pub data: Vec<u8>,
    pub size_bytes: i64,
    pub created_us: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct SessionLine {
    pub id: String,
    pub agent: i32,
    pub agent_session_id: String,
    pub host: String,
    pub user_name: String,
    pub cwd: String,
    pub branch: String,
    pub goal: String,
    pub status: i32,
    pub lease_ttl_ms: i64,
    pub last_seen_us: i64,
    pub head_checkpoint_id: Option<String>,
    pub git_base: String,
    pub git_head: String,
    pub summary: String,
    pub tool_count: i64,
    pub resumed_from: Option<String>,
    pub resumed_by: Option<String>,
    pub metadata: String,
    pub created_us: i64,
    pub updated_us: i64,
    pub written_us: i64,
    #[serde(with = "b64")]
    pub author: Vec<u8>,
    pub head_written_us: i64,
    #[serde(with = "b64")]
    pub head_author: Vec<u8>,
    /// An orchestrator's thread (absent in archives from before threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_ns: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct CheckpointLine {
    pub id: String,
    pub session_id: String,
    pub parent_id: Option<String>,
    pub kind: i32,
    pub reason: String,
    #[serde(with = "b64")]
    pub state: Vec<u8>,
    #[serde(with = "b64")]
    pub payload: Vec<u8>,
    pub payload_content_type: String,
    pub compression: String,
    pub size_bytes: i64,
    pub digest: String,
    pub created_us: i64,
    #[serde(with = "b64")]
    pub author: Vec<u8>,
    #[serde(with = "b64")]
    pub blobs: Vec<u8>,
    /// A thread's checkpoint's key, metadata and run id (absent in archives from before
    /// threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordered_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

impl CheckpointLine {
    /// What the digest covers besides state and payload.
    pub fn header(&self) -> crate::core::checkpoint::Header<'_> {
        crate::core::checkpoint::Header {
            session_id: &self.session_id,
            kind: self.kind,
            reason: &self.reason,
            payload_content_type: &self.payload_content_type,
            blobs: crate::core::blobs::for_digest(&self.blobs),
            thread: crate::core::checkpoint::ThreadPart::of(
                self.ordered_key.as_deref(),
                self.metadata.as_deref(),
            ),
        }
    }

    /// The content as stored.
    pub fn stored(&self) -> crate::core::checkpoint::Stored<'_> {
        crate::core::checkpoint::Stored {
            state: &self.state,
            payload: &self.payload,
            compression: &self.compression,
            size_bytes: self.size_bytes,
        }
    }
}

/// A pending write on a thread's checkpoint (its revision is renumbered on import).
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct WriteLine {
    pub checkpoint_id: String,
    pub task_id: String,
    pub idx: i32,
    pub channel: String,
    pub task_path: String,
    pub value_type: String,
    #[serde(with = "b64")]
    pub value: Vec<u8>,
}

/// An item log without its items (counts are remade from the items imported).
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct ItemLogLine {
    pub key: String,
    pub created_us: i64,
    pub updated_us: i64,
    #[serde(with = "b64")]
    pub author: Vec<u8>,
    pub summary: Option<String>,
    pub summary_us: i64,
}

/// An item, under its seq in its log (its revision is renumbered on import).
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct ItemLine {
    pub log_key: String,
    pub seq: i64,
    pub item_key: Option<String>,
    pub content_type: String,
    #[serde(with = "b64")]
    pub value: Vec<u8>,
    pub created_us: i64,
}

/// A commit link as stored (its revision is renumbered on import), with the fingerprints of
/// the lines its commit added.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct CommitLinkLine {
    pub commit_id: String,
    pub session_id: String,
    pub checkpoint_id: String,
    pub patch_id: String,
    pub made_by: i64,
    pub seen_by: i64,
    pub ambiguous: i64,
    pub branch: String,
    pub subject: String,
    pub committed_us: i64,
    pub files: String,
    pub prompt: String,
    pub task: String,
    pub lines_truncated: i64,
    pub created_us: i64,
    #[serde(with = "b64")]
    pub author: Vec<u8>,
    #[sqlx(skip)]
    #[serde(default)]
    pub fingerprints: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct MemoryLine {
    pub id: String,
    pub category: String,
    pub branch: String,
    pub key: String,
    pub record: String,
    pub content: String,
    pub rationale: String,
    #[serde(with = "b64")]
    pub author: Vec<u8>,
    pub seq: i64,
    pub created_us: i64,
    pub evicted: bool,
}

/// A memory record's last-write-wins metadata (its revision is renumbered on import).
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct RecordLine {
    pub record: String,
    pub written_us: i64,
    #[serde(with = "b64")]
    pub author: Vec<u8>,
}

/// What an export page reads next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Chunks,
    Sessions,
    Checkpoints,
    Memory,
    Records,
    Writes,
    ItemLogs,
    Items,
    CommitLinks,
}

impl Table {
    /// Import order: chunks before the checkpoints that use them, sessions before their
    /// checkpoints, checkpoints before their pending writes, memory before its records,
    /// item logs before their items, sessions before their commit links.
    pub const ALL: [Self; 9] = [
        Self::Chunks,
        Self::Sessions,
        Self::Checkpoints,
        Self::Writes,
        Self::Memory,
        Self::Records,
        Self::ItemLogs,
        Self::Items,
        Self::CommitLinks,
    ];
}

/// Keyset position within a table: (revision-like number, sequence, text key).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor {
    pub n: i64,
    pub m: i64,
    pub key: String,
}

/// What one import batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportCounts {
    pub imported: u64,
    /// Already present (same id) in the target: left as they are.
    pub skipped: u64,
}
