//! Every archive line checked as the RPC that writes such a record checks its request:
//! an archive (often from someone else's laptop) is trusted no more than a client. The
//! rules are the API's own functions; what only an archive carries (stored bytes, digests,
//! authors) is checked here so that it reads back as the server would have written it.

use baton_proto::v1::{Actor, AgentKind, CheckpointKind, CheckpointState, MemoryOp, SessionStatus};
use prost::Message;

use crate::api::{checkpoint as checkpoint_rpc, memory as memory_rpc, session as session_rpc};
use crate::core::checkpoint as cp;
use crate::core::memory;
use crate::core::validate::{self, invalid, limits};
use crate::core::{items, thread};
use crate::error::Error;
use crate::store::transfer::{
    CheckpointLine, ChunkLine, CommitLinkLine, ItemLine, ItemLogLine, Line, MemoryLine, RecordLine,
    SessionLine, WriteLine,
};

/// Checks one line after its project's `project` line; `max_checkpoint_bytes` is this
/// server's checkpoint limit.
pub fn check(line: &Line, max_checkpoint_bytes: usize) -> Result<(), Error> {
    match line {
        Line::Header { .. } | Line::Project { .. } => Ok(()),
        Line::Chunk(c) => chunk(c),
        Line::Session(s) => session(s),
        Line::Checkpoint(c) => checkpoint(c, max_checkpoint_bytes),
        Line::Memory(m) => entry(m),
        Line::Write(w) => write(w, max_checkpoint_bytes),
        Line::Record(r) => record(r),
        Line::ItemLog(l) => item_log(l),
        Line::Item(i) => item(i, max_checkpoint_bytes),
        Line::CommitLink(l) => commit_link(l),
    }
}

/// As `RecordCommits` checks a link (the API's own function), and its author.
fn commit_link(l: &CommitLinkLine) -> Result<(), Error> {
    let files: Vec<String> =
        serde_json::from_str(&l.files).map_err(|_| invalid("files", "is not a JSON array of paths"))?;
    let link = baton_proto::v1::CommitLink {
        commit_id: l.commit_id.clone(),
        session_id: l.session_id.clone(),
        checkpoint_id: l.checkpoint_id.clone(),
        patch_id: l.patch_id.clone(),
        made_by: i32::try_from(l.made_by).unwrap_or(-1),
        seen_by: i32::try_from(l.seen_by).unwrap_or(-1),
        ambiguous: l.ambiguous != 0,
        branch: l.branch.clone(),
        subject: l.subject.clone(),
        files,
        prompt: l.prompt.clone(),
        task: l.task.clone(),
        ..Default::default()
    };
    let new = baton_proto::v1::NewCommitLink {
        link: Some(link),
        line_fingerprints: l.fingerprints.clone(),
        lines_truncated: l.lines_truncated != 0,
    };
    let mut redacted = 0;
    let checked = crate::api::commit::recorded(0, new, &mut redacted)?;
    if checked.link.commit_id != l.commit_id || checked.link.session_id != l.session_id || redacted > 0 {
        return Err(
            invalid("link", "is not as the server stores one (ids lowercase, secrets redacted)").into()
        );
    }
    if ![0, 1].contains(&l.ambiguous) || ![0, 1].contains(&l.lines_truncated) {
        return Err(invalid("link", "ambiguous and lines_truncated are 0 or 1").into());
    }
    actor("author", &l.author)
}

/// As `AppendItems` checks a log's key and summary.
fn item_log(l: &ItemLogLine) -> Result<(), Error> {
    items::log_key("key", &l.key)?;
    items::summary("summary", l.summary.as_deref().unwrap_or_default())?;
    if l.summary.as_deref() == Some("") {
        return Err(invalid("summary", "is empty: a log without a summary has none (null)").into());
    }
    actor("author", &l.author)
}

/// As `AppendItems` checks an item; its seq is a place in its log (1 or more).
fn item(i: &ItemLine, max_bytes: usize) -> Result<(), Error> {
    items::log_key("log_key", &i.log_key)?;
    if i.seq < 1 {
        return Err(invalid("seq", format!("{} is not a seq: they start at 1", i.seq)).into());
    }
    let (key, content_type) =
        items::item_labels("item", i.item_key.as_deref().unwrap_or_default(), &i.content_type)?;
    if key != i.item_key || content_type != i.content_type {
        return Err(invalid(
            "item",
            "is not as the server stores one (an empty key is none; a content type is set)",
        )
        .into());
    }
    if i.value.len() > max_bytes {
        return Err(Error::ResourceExhausted(format!(
            "value: {} bytes is over this server's item limit of {max_bytes} bytes (--max-checkpoint-bytes)",
            i.value.len()
        )));
    }
    Ok(())
}

/// A project's memory caps, as `SetMemoryCaps` checks them.
pub fn caps(json: &str) -> Result<(), Error> {
    let caps: std::collections::HashMap<String, i32> = serde_json::from_str(json)
        .map_err(|_| invalid("memory_caps", "is not a JSON object of category to cap"))?;
    Ok(memory::check_caps(&caps)?)
}

/// An id as the server writes it: a uuid, in its one lower-case hyphenated spelling (so
/// that no two spellings of one id can be two rows).
fn id(field: &str, value: &str) -> Result<(), Error> {
    let parsed = validate::uuid(field, value)?;
    if parsed.to_string() != value {
        return Err(
            invalid(field, format!("{value:?} is not a uuid in its lower-case hyphenated form")).into()
        );
    }
    Ok(())
}

/// An author as the server records it: an `Actor` whose labels the write options' rules allow.
fn actor(field: &str, bytes: &[u8]) -> Result<(), Error> {
    let a = Actor::decode(bytes).map_err(|_| invalid(field, "is not an encoded Actor"))?;
    validate::single_line(&format!("{field}.token"), &a.token, limits::SHORT)?;
    validate::enum_value::<AgentKind>(&format!("{field}.agent"), a.agent, true)?;
    validate::single_line(&format!("{field}.host"), &a.host, limits::SHORT)?;
    validate::single_line(&format!("{field}.user"), &a.user, limits::SHORT)?;
    if !a.session_id.is_empty() {
        id(&format!("{field}.session_id"), &a.session_id)?;
    }
    Ok(())
}

/// At most what zstd writes for this many bytes, and a frame header: a stored form may not
/// carry more (skippable frames decompress to nothing and would be stored and read as is).
fn compressed_at_most(size: usize) -> usize {
    zstd::zstd_safe::compress_bound(size) + 128
}

fn chunk(c: &ChunkLine) -> Result<(), Error> {
    let size = usize::try_from(c.size_bytes).unwrap_or(0);
    if c.data.len() > compressed_at_most(size) {
        return Err(invalid(
            format!("chunk {}", c.digest),
            format!("holds {} stored bytes for {size} bytes of content", c.data.len()),
        )
        .into());
    }
    crate::core::chunk::unpack(&c.digest, &c.data, c.size_bytes)
        .map(|_| ())
        .map_err(|e| invalid(format!("chunk {}", c.digest), e.to_string()).into())
}

/// As `StartSession`, `UpdateSession` and `EndSession` check what they set.
fn session(s: &SessionLine) -> Result<(), Error> {
    id("id", &s.id)?;
    validate::enum_value::<AgentKind>("agent", s.agent, true)?;
    validate::enum_value::<SessionStatus>("status", s.status, false)?;
    session_rpc::check_labels(&s.host, &s.user_name, &s.cwd, &s.branch, &s.agent_session_id)?;
    validate::optional("goal", &s.goal, limits::TEXT)?;
    validate::optional("summary", &s.summary, limits::TEXT)?;
    validate::single_line("git_base", &s.git_base, limits::SHORT)?;
    validate::single_line("git_head", &s.git_head, limits::SHORT)?;
    session_rpc::check_lease(s.lease_ttl_ms)?;
    let metadata: std::collections::HashMap<String, String> = serde_json::from_str(&s.metadata)
        .map_err(|_| invalid("metadata", "is not a JSON object of strings"))?;
    session_rpc::check_metadata(&metadata)?;
    if s.tool_count < 0 {
        return Err(invalid("tool_count", "must not be negative").into());
    }
    for (field, value) in [
        ("head_checkpoint_id", &s.head_checkpoint_id),
        ("resumed_from", &s.resumed_from),
        ("resumed_by", &s.resumed_by),
    ] {
        if let Some(value) = value {
            id(field, value)?;
        }
    }
    match (&s.thread_key, &s.thread_ns) {
        (None, None) => {}
        (Some(key), Some(ns)) => {
            thread::thread("thread_key", key)?;
            thread::namespace("thread_ns", ns)?;
        }
        _ => return Err(invalid("thread_key", "a thread's session has both its key and namespace").into()),
    }
    actor("author", &s.author)?;
    actor("head_author", &s.head_author)
}

/// As `PutThreadWrites` checks a write.
fn write(w: &WriteLine, max_bytes: usize) -> Result<(), Error> {
    id("checkpoint_id", &w.checkpoint_id)?;
    validate::required("task_id", &w.task_id, thread::MAX_TASK)?;
    validate::optional("task_path", &w.task_path, thread::MAX_TASK)?;
    validate::required("channel", &w.channel, thread::MAX_CHANNEL)?;
    validate::single_line("value_type", &w.value_type, thread::MAX_CHANNEL)?;
    if w.value.len() > max_bytes {
        return Err(Error::ResourceExhausted(format!(
            "value: {} bytes is over this server's checkpoint limit of {max_bytes} bytes (--max-checkpoint-bytes)",
            w.value.len()
        )));
    }
    Ok(())
}

/// A thread's checkpoint as `PutThreadCheckpoint` stores it: its key, its metadata in
/// canonical form, and that metadata's run id.
fn thread_part(c: &CheckpointLine) -> Result<(), Error> {
    let Some(key) = &c.ordered_key else {
        if c.metadata.is_some() || c.run_id.is_some() {
            return Err(invalid("metadata", "only a thread's checkpoint (with a key) has metadata").into());
        }
        return Ok(());
    };
    thread::key("ordered_key", key)?;
    let text = c.metadata.as_deref().unwrap_or_default();
    let parsed = thread::metadata("metadata", text, |_| {})?;
    if parsed.json != text || parsed.run_id != c.run_id {
        return Err(
            invalid("metadata", "is not in the canonical form the server stores, with its run_id").into()
        );
    }
    Ok(())
}

/// As `CreateCheckpoint` checks its request, and the stored bytes as it would have stored
/// them: at most this server's checkpoint size, decompressing to exactly the recorded
/// size, matching the digest.
fn checkpoint(c: &CheckpointLine, max_bytes: usize) -> Result<(), Error> {
    id("id", &c.id)?;
    id("session_id", &c.session_id)?;
    if let Some(parent) = &c.parent_id {
        id("parent_id", parent)?;
    }
    validate::enum_value::<CheckpointKind>("kind", c.kind, false)?;
    validate::optional("reason", &c.reason, limits::TEXT)?;
    validate::single_line("payload_content_type", &c.payload_content_type, 256)?;
    thread_part(c)?;
    let size = usize::try_from(c.size_bytes).ok().filter(|s| *s <= max_bytes).ok_or_else(|| {
        Error::ResourceExhausted(format!(
            "size_bytes: {} is outside 0..={max_bytes}, this server's checkpoint limit (--max-checkpoint-bytes)",
            c.size_bytes
        ))
    })?;
    let stored = c.state.len() + c.payload.len();
    if stored > compressed_at_most(size) {
        return Err(
            invalid("state", format!("holds {stored} stored bytes for {size} bytes of content")).into()
        );
    }
    let (state, payload) = cp::verified_bytes(&c.header(), &c.stored(), &c.digest)
        .map_err(|e| invalid("state", e.to_string()))?;
    if state.len() + payload.len() != size {
        return Err(invalid(
            "size_bytes",
            format!("is {size}, but the state and payload are {} bytes", state.len() + payload.len()),
        )
        .into());
    }
    let state = CheckpointState::decode(state.as_slice())
        .map_err(|_| invalid("state", "does not decode as a CheckpointState"))?;
    checkpoint_rpc::check_state(&state)?;
    if !c.blobs.is_empty() {
        let refs = crate::core::blobs::decode(&c.blobs).map_err(|_| invalid("blobs", "do not decode"))?;
        let most = if c.ordered_key.is_some() {
            checkpoint_rpc::MAX_THREAD_BLOBS
        } else {
            checkpoint_rpc::MAX_BLOBS
        };
        checkpoint_rpc::check_blobs(&refs, most)?;
    }
    actor("author", &c.author)
}

/// The chunk digests a checkpoint's transcripts need (its blobs are checked by `check`).
pub fn chunks_of(c: &CheckpointLine) -> Vec<String> {
    crate::core::blobs::decode(&c.blobs)
        .map(|r| r.into_iter().flat_map(|b| b.chunks).collect())
        .unwrap_or_default()
}

/// As `PutMemory` checks one item, and the record it belongs to named as the server names it.
fn entry(m: &MemoryLine) -> Result<(), Error> {
    id("id", &m.id)?;
    memory::check_put(&m.category, MemoryOp::Unspecified, &m.key, 1, memory::MAX_CAP)?;
    memory_rpc::check_scope(&m.branch, &m.key)?;
    validate::required("content", &m.content, limits::TEXT)?;
    validate::optional("rationale", &m.rationale, limits::TEXT)?;
    let record = memory::record_name(&m.category, &m.branch, &m.key);
    if m.record != record {
        return Err(invalid(
            "record",
            format!("{:?} is not the record of its category, branch and key ({record:?})", m.record),
        )
        .into());
    }
    if m.seq < 0 {
        return Err(invalid("seq", "must not be negative").into());
    }
    actor("author", &m.author)
}

fn record(r: &RecordLine) -> Result<(), Error> {
    validate::required("record", &r.record, limits::PATH)?;
    validate::single_line("record", &r.record, limits::PATH)?;
    actor("author", &r.author)
}
