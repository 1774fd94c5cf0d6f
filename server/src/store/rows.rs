//! Row types shared by both backends (sqlx derives `FromRow` generically) and their
//! conversion to API messages.

use std::collections::HashMap;

use baton_proto::v1::{Actor, Checkpoint, Conflict, Event, MemoryEntry, Session};
use prost::Message;

use crate::core::checkpoint::{self, Header, Stored};
use crate::core::lww::RecordVersion;
use crate::error::{Error, Result};
use crate::store::model;

// The column lists of the rows below, written once for both backends' statements (and
// `store::brief`'s), in the order the structs declare them.

/// A session's columns (`SessionRow`).
macro_rules! session_columns {
    () => {
        "id, project, agent, agent_session_id, host, user_name, cwd, branch, goal, status, lease_ttl_ms, \
         last_seen_us, head_checkpoint_id, git_base, git_head, summary, tool_count, resumed_from, resumed_by, \
         metadata, created_us, updated_us, revision, written_us, author, head_revision, head_written_us, head_author, \
         thread_key, thread_ns, start_revision"
    };
}
pub(crate) use session_columns;

/// A checkpoint's columns but its payload (`CheckpointRow`, whose payload is then empty).
macro_rules! checkpoint_light_columns {
    () => {
        "id, session_id, project, parent_id, kind, reason, state, payload_content_type, compression, size_bytes, \
         digest, created_us, revision, author, blobs, state_digest, ordered_key, metadata, run_id"
    };
}
pub(crate) use checkpoint_light_columns;

/// A checkpoint's columns (`CheckpointRow`).
macro_rules! checkpoint_columns {
    () => {
        concat!($crate::store::rows::checkpoint_light_columns!(), ", payload")
    };
}
pub(crate) use checkpoint_columns;

/// A memory entry with its record's revision (`MemoryRow`), from `memory m`.
macro_rules! entry_columns {
    () => {
        "SELECT m.id, m.project, m.category, m.branch, m.key, m.record, m.content, m.rationale, m.author, \
         m.revision, m.seq, m.created_us, m.evicted, r.revision AS record_revision FROM memory m \
         LEFT JOIN records r ON r.project = m.project AND r.record = m.record"
    };
}
pub(crate) use entry_columns;

pub use crate::core::time::{ts, us};

pub fn encode_actor(actor: &Actor) -> Vec<u8> {
    actor.encode_to_vec()
}

/// Actors are written by us; an undecodable one is shown as unknown rather than failing
/// the whole read.
pub fn decode_actor(bytes: &[u8]) -> Actor {
    Actor::decode(bytes).unwrap_or_default()
}

pub fn decode_event(bytes: &[u8]) -> Result<Event> {
    let plain = crate::core::packed::unpack(bytes, crate::core::packed::MAX_RECORD_BYTES)
        .map_err(|e| Error::internal(format!("stored event does not unpack: {e}")))?;
    Event::decode(plain.as_ref()).map_err(|e| Error::internal(format!("stored event does not decode: {e}")))
}

pub fn decode_conflict(bytes: &[u8]) -> Result<Conflict> {
    Conflict::decode(bytes).map_err(|e| Error::internal(format!("stored conflict does not decode: {e}")))
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SessionRow {
    pub id: String,
    pub project: String,
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
    pub revision: i64,
    pub written_us: i64,
    pub author: Vec<u8>,
    pub head_revision: i64,
    pub head_written_us: i64,
    pub head_author: Vec<u8>,
    /// An orchestrator's thread and checkpoint namespace (`service::thread`); `None` for
    /// other sessions.
    pub thread_key: Option<String>,
    pub thread_ns: Option<String>,
    /// The revision that started the session.
    pub start_revision: i64,
}

impl SessionRow {
    pub fn status(&self) -> baton_proto::v1::SessionStatus {
        baton_proto::v1::SessionStatus::try_from(self.status).unwrap_or_default()
    }

    pub fn to_proto(&self) -> Session {
        let metadata: HashMap<String, String> = serde_json::from_str(&self.metadata).unwrap_or_default();
        Session {
            id: self.id.clone(),
            project: self.project.clone(),
            agent: self.agent,
            agent_session_id: self.agent_session_id.clone(),
            host: self.host.clone(),
            user: self.user_name.clone(),
            cwd: self.cwd.clone(),
            branch: self.branch.clone(),
            goal: self.goal.clone(),
            status: self.status,
            lease_ttl_ms: self.lease_ttl_ms,
            last_seen_at: Some(ts(self.last_seen_us)),
            head_checkpoint_id: self.head_checkpoint_id.clone().unwrap_or_default(),
            git_base: self.git_base.clone(),
            git_head: self.git_head.clone(),
            summary: self.summary.clone(),
            tool_count: self.tool_count,
            resumed_from: self.resumed_from.clone().unwrap_or_default(),
            resumed_by: self.resumed_by.clone().unwrap_or_default(),
            created_at: Some(ts(self.created_us)),
            updated_at: Some(ts(self.updated_us)),
            revision: self.revision,
            head_revision: self.head_revision,
            metadata,
            author: Some(decode_actor(&self.author)),
            thread: self.thread_key.clone().unwrap_or_default(),
            thread_namespace: self.thread_ns.clone().unwrap_or_default(),
            start_revision: self.start_revision,
        }
    }
}

/// A row of `checkpoints`, its fields in the table's column order: on Postgres it is the
/// table's row type too, which the write function inserts as it is (`postgres/apply.rs`).
#[derive(Debug, Clone, sqlx::FromRow, sqlx::Type)]
#[sqlx(type_name = "checkpoints")]
pub struct CheckpointRow {
    pub id: String,
    pub session_id: String,
    pub project: String,
    pub parent_id: Option<String>,
    pub kind: i32,
    pub reason: String,
    pub state: Vec<u8>,
    /// Empty when read without it (lists and the brief never read payloads).
    #[sqlx(default)]
    pub payload: Vec<u8>,
    pub payload_content_type: String,
    pub compression: String,
    pub size_bytes: i64,
    pub digest: String,
    pub created_us: i64,
    pub revision: i64,
    pub author: Vec<u8>,
    pub blobs: Vec<u8>,
    /// Set for every row once the server has started (`jobs::backfill`).
    pub state_digest: Option<String>,
    /// A thread's checkpoint (`service::thread`): the orchestrator's key for it, its
    /// metadata document (a canonical JSON object) and that document's "run_id".
    pub ordered_key: Option<String>,
    pub metadata: Option<String>,
    pub run_id: Option<String>,
}

impl CheckpointRow {
    /// Metadata only (no state, no payload).
    pub fn to_meta(&self) -> Checkpoint {
        Checkpoint {
            id: self.id.clone(),
            session_id: self.session_id.clone(),
            project: self.project.clone(),
            parent_id: self.parent_id.clone().unwrap_or_default(),
            kind: self.kind,
            reason: self.reason.clone(),
            payload_content_type: self.payload_content_type.clone(),
            size_bytes: self.size_bytes,
            digest: self.digest.clone(),
            created_at: Some(ts(self.created_us)),
            revision: self.revision,
            author: Some(decode_actor(&self.author)),
            blobs: crate::core::blobs::decode(&self.blobs).unwrap_or_default(),
            ..Default::default()
        }
    }

    pub fn header(&self) -> Header<'_> {
        Header {
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

    pub fn stored(&self) -> Stored<'_> {
        Stored {
            state: &self.state,
            payload: &self.payload,
            compression: &self.compression,
            size_bytes: self.size_bytes,
        }
    }

    /// The checkpoint with its state, verified by the state digest alone (the payload is
    /// neither needed nor read); `DATA_LOSS` when it fails.
    pub fn verified_state(&self) -> Result<Checkpoint> {
        let expected = self.state_digest.as_deref().unwrap_or(checkpoint::UNVERIFIABLE);
        let state = checkpoint::decode_state(&self.header(), &self.stored(), expected)
            .map_err(|source| Error::DataLoss { id: self.id.clone(), source })?;
        Ok(Checkpoint { state: Some(state), ..self.to_meta() })
    }

    /// Verifies the full digest and returns the full checkpoint; `DATA_LOSS` when it fails.
    pub fn verified(&self, include_payload: bool) -> Result<Checkpoint> {
        let (state, payload) = checkpoint::decode(&self.header(), &self.stored(), &self.digest)
            .map_err(|source| Error::DataLoss { id: self.id.clone(), source })?;
        let mut out = self.to_meta();
        out.state = Some(state);
        if include_payload {
            out.payload = payload;
        }
        Ok(out)
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MemoryRow {
    pub id: String,
    pub project: String,
    pub category: String,
    pub branch: String,
    pub key: String,
    pub content: String,
    pub rationale: String,
    pub author: Vec<u8>,
    pub revision: i64,
    pub created_us: i64,
    pub evicted: bool,
    pub record_revision: Option<i64>,
    /// The record the entry belongs to, and its place in it (not in every read).
    #[sqlx(default)]
    pub record: String,
    #[sqlx(default)]
    pub seq: i64,
}

impl MemoryRow {
    pub fn to_entry(&self) -> model::Entry {
        model::Entry {
            id: self.id.clone(),
            category: self.category.clone(),
            branch: self.branch.clone(),
            key: self.key.clone(),
            content: self.content.clone(),
            rationale: self.rationale.clone(),
            author: decode_actor(&self.author),
            revision: self.revision,
            seq: self.seq,
            created_us: self.created_us,
            evicted: self.evicted,
            record_revision: self.record_revision.unwrap_or(self.revision),
        }
    }

    pub fn to_proto(&self) -> MemoryEntry {
        MemoryEntry {
            id: self.id.clone(),
            project: self.project.clone(),
            category: self.category.clone(),
            branch: self.branch.clone(),
            key: self.key.clone(),
            content: self.content.clone(),
            rationale: self.rationale.clone(),
            author: Some(decode_actor(&self.author)),
            revision: self.revision,
            record_revision: self.record_revision.unwrap_or(self.revision),
            created_at: Some(ts(self.created_us)),
            evicted: self.evicted,
        }
    }
}

/// One row of a record's state: its version (on every row, NULL when the record was never
/// written) and one live entry (NULL when it has none).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RecordStateRow {
    pub record_revision: Option<i64>,
    pub record_written_us: Option<i64>,
    pub record_author: Option<Vec<u8>>,
    pub m_id: Option<String>,
    pub m_category: Option<String>,
    pub m_branch: Option<String>,
    pub m_key: Option<String>,
    pub m_content: Option<String>,
    pub m_rationale: Option<String>,
    pub m_author: Option<Vec<u8>>,
    pub m_revision: Option<i64>,
    pub m_seq: Option<i64>,
    pub m_created_us: Option<i64>,
}

impl RecordStateRow {
    pub fn version(&self) -> Option<(RecordVersion, Actor)> {
        match (self.record_revision, self.record_written_us, &self.record_author) {
            (Some(revision), Some(written_us), Some(author)) => {
                Some((RecordVersion { revision, written_us }, decode_actor(author)))
            }
            _ => None,
        }
    }

    pub fn entry(self) -> Option<model::Entry> {
        let revision = self.m_revision?;
        Some(model::Entry {
            id: self.m_id?,
            category: self.m_category?,
            branch: self.m_branch?,
            key: self.m_key?,
            content: self.m_content?,
            rationale: self.m_rationale?,
            author: decode_actor(&self.m_author?),
            revision,
            seq: self.m_seq?,
            created_us: self.m_created_us?,
            evicted: false,
            record_revision: self.record_revision.unwrap_or(revision),
        })
    }
}

/// A record's state from its rows (`RecordStateRow`).
pub fn record_state(rows: Vec<RecordStateRow>) -> model::RecordState {
    let version = rows.first().and_then(RecordStateRow::version);
    model::RecordState { version, entries: rows.into_iter().filter_map(RecordStateRow::entry).collect() }
}
