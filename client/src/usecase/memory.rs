//! Project memory writes by their category's rule, and finding an entry by a short id.

use baton_proto::v1::{ConflictPolicy, ListMemoryRequest, MemoryItem, MemoryOp, PutMemoryRequest};

use crate::ctx::Ctx;
use crate::hub::remote;
use crate::outbox::write::{self, Delivered, Write};

pub const CURRENT: &[&str] = &["goal", "constraint", "open_loop", "recent_change"];

pub const HISTORY: &[&str] = &["decision", "session_summary", "extracted_decision"];

pub struct Add {
    pub category: String,
    pub text: String,
    pub rationale: Option<String>,
    pub key: Option<String>,
    pub branch: Option<String>,
    pub if_revision: Option<i64>,
}

/// What became of a memory write.
pub enum Put {
    /// A current-state set already held that item: nothing was sent.
    AlreadyHeld,
    Sent(Box<write::Sent>),
    Queued,
}

/// Writes `a` by its category's rule: an item added to a current-state set as the set is
/// when the write arrives (two concurrent adds both land, and it works offline: queued, and
/// over the cap refused on arrival into the queue's dead letters); decision and
/// session_summary appended; a note upserted. Secrets are redacted first; returns how many.
/// `author`: the agent kind and session the write is recorded as made by.
pub async fn put(
    ctx: &Ctx,
    mut hub: Option<&mut remote::Hub>,
    project: &str,
    a: &Add,
    author: (i32, &str),
) -> anyhow::Result<(Put, u32)> {
    let branch = a.branch.clone().unwrap_or_default();
    let (text, n1) = baton_proto::redact::redact(&a.text);
    let (rationale, n2) = baton_proto::redact::redact(a.rationale.as_deref().unwrap_or_default());
    let item = MemoryItem { content: text.into_owned(), rationale: rationale.into_owned() };
    let current = CURRENT.contains(&a.category.as_str());
    if current
        && a.if_revision.is_none()
        && let Some(h) = hub.as_deref_mut()
        && holds(h, project, &a.category, &branch, &item.content).await?
    {
        return Ok((Put::AlreadyHeld, n1 + n2));
    }
    let op = if current {
        MemoryOp::AddItem
    } else if HISTORY.contains(&a.category.as_str()) {
        MemoryOp::Append
    } else {
        MemoryOp::Upsert
    };
    let policy = if a.if_revision.is_some() { ConflictPolicy::Reject } else { ConflictPolicy::Overwrite };
    let mut write = write::options(author.0, author.1);
    if let Some(w) = write.as_mut() {
        w.base_revision = a.if_revision;
        w.policy = policy as i32;
    }
    let request = PutMemoryRequest {
        project: project.to_owned(),
        category: a.category.clone(),
        branch,
        key: a.key.clone().unwrap_or_default(),
        op: op as i32,
        items: vec![item],
        write,
    };
    let put = match write::submit(&ctx.queue, hub, Write::PutMemory(request), None).await? {
        Delivered::Sent(r) => Put::Sent(r),
        Delivered::Queued => Put::Queued,
    };
    Ok((put, n1 + n2))
}

/// Every memory category, as the hub names them.
pub fn categories() -> impl Iterator<Item = &'static str> {
    CURRENT.iter().chain(HISTORY).copied().chain(["note"])
}

/// The full id of a memory entry given as `baton memory list` shows it (the full id, or
/// its first or last characters).
pub async fn entry_id(hub: &mut remote::Hub, project: &str, id: &str) -> anyhow::Result<String> {
    if uuid::Uuid::parse_str(id).is_ok() {
        return Ok(id.to_owned());
    }
    let list = crate::hub::pages::memory(
        hub,
        ListMemoryRequest { project: project.to_owned(), include_evicted: true, ..Default::default() },
    )
    .await?;
    let found: Vec<_> = list.entries.iter().filter(|e| e.id.ends_with(id) || e.id.starts_with(id)).collect();
    match found.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => anyhow::bail!(
            "no memory entry {id} in project {project}; `baton memory list` (or recall) shows them"
        ),
        _ => anyhow::bail!("{id} matches {} entries; give more of the id", found.len()),
    }
}

/// Whether a current-state set holds an item with this content (read live).
pub async fn holds(
    hub: &mut remote::Hub,
    project: &str,
    category: &str,
    branch: &str,
    content: &str,
) -> anyhow::Result<bool> {
    let list = crate::hub::pages::memory(
        hub,
        ListMemoryRequest {
            project: project.to_owned(),
            category: category.to_owned(),
            branch: Some(branch.to_owned()),
            ..Default::default()
        },
    )
    .await?;
    Ok(list.entries.iter().any(|e| e.content.trim() == content.trim()))
}
