//! `baton memory add|list|rm`: project memory in the server's categories.

use std::path::Path;

use baton_proto::v1::{
    ConflictPolicy, DeleteMemoryRequest, ListMemoryRequest, MemoryItem, MemoryOp, PutMemoryRequest,
    RecordRef, WriteResult, delete_memory_request,
};

use crate::remote::{self, Timeouts};
use crate::write::{self, Delivered, Write};
use crate::{Ctx, project, view};

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
    Sent(Box<WriteResult>),
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

pub async fn add(ctx: &Ctx, dir: &Path, a: Add, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await.ok();
    let author = (baton_proto::v1::AgentKind::Custom as i32, "");
    let (put, redacted) = put(ctx, hub.as_mut(), &project.key, &a, author).await?;
    match put {
        Put::AlreadyHeld => {
            println!("{} already holds that item: nothing to add", a.category);
            return Ok(());
        }
        Put::Sent(r) => {
            if json {
                println!(
                    "{}",
                    serde_json::json!({"revision": r.revision, "outcome": view::outcome(r.outcome), "redacted": redacted, "conflict": r.conflict.as_ref().map(view::conflict_json)})
                );
            } else {
                println!("added to {} at revision {}", a.category, r.revision);
                if let Some(c) = &r.conflict {
                    println!(
                        "conflict: {} was changed since revision {:?} (now {}); your write {}",
                        c.record,
                        c.base_revision,
                        c.current_revision,
                        view::outcome(c.outcome)
                    );
                }
            }
        }
        Put::Queued => {
            println!("the hub is unreachable: queued (sent by the next call or `baton sync`)");
        }
    }
    if redacted > 0 && !json {
        println!("redacted {redacted} secret(s)");
    }
    Ok(())
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
    let list = crate::pages::memory(
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
async fn holds(
    hub: &mut remote::Hub,
    project: &str,
    category: &str,
    branch: &str,
    content: &str,
) -> anyhow::Result<bool> {
    let list = crate::pages::memory(
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

/// `baton memory remove CATEGORY TEXT`: takes an item out of a current-state set, by its
/// content, as the set is when the write arrives; queued when the hub is unreachable.
pub async fn remove(
    ctx: &Ctx,
    dir: &Path,
    category: String,
    text: String,
    branch: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    if !CURRENT.contains(&category.as_str()) {
        anyhow::bail!(
            "remove takes items out of {}; for {category} use `baton memory rm ID` (ids from `baton memory list`)",
            CURRENT.join(", ")
        );
    }
    let project = project::identify(dir);
    let branch = branch.unwrap_or_default();
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await.ok();
    if let Some(h) = hub.as_mut()
        && !holds(h, &project.key, &category, &branch, &text).await?
    {
        anyhow::bail!(
            "{category} holds no item that reads {text:?}: `baton memory list {category}` shows what it holds"
        );
    }
    let request = PutMemoryRequest {
        project: project.key.clone(),
        category: category.clone(),
        branch,
        key: String::new(),
        op: MemoryOp::RemoveItem as i32,
        items: vec![MemoryItem { content: text, rationale: String::new() }],
        write: write::options(baton_proto::v1::AgentKind::Custom as i32, ""),
    };
    match write::submit(&ctx.queue, hub.as_mut(), Write::PutMemory(request), None).await? {
        Delivered::Sent(r) if json => println!(
            "{}",
            serde_json::json!({"revision": r.revision, "outcome": view::outcome(r.outcome), "conflict": r.conflict.as_ref().map(view::conflict_json)})
        ),
        Delivered::Sent(r) => println!("removed from {category} at revision {}", r.revision),
        Delivered::Queued => {
            println!("the hub is unreachable: queued (sent by the next call or `baton sync`)");
        }
    }
    Ok(())
}

pub async fn list(
    ctx: &Ctx,
    dir: &Path,
    category: Option<String>,
    all: bool,
    json: bool,
) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let reply = crate::pages::memory(
        &mut hub,
        ListMemoryRequest {
            project: project.key.clone(),
            category: category.unwrap_or_default(),
            branch: None,
            include_evicted: all,
            ..Default::default()
        },
    )
    .await?;
    if json {
        let entries: Vec<_> = reply.entries.iter().map(view::entry_json).collect();
        println!(
            "{}",
            serde_json::json!({"project": project.key, "as_of_revision": reply.as_of_revision, "caps": reply.caps, "records": reply.record_revisions, "entries": entries})
        );
        return Ok(());
    }
    let mut t = view::table(&["id", "category", "scope", "content", "by", "rev"]);
    for e in &reply.entries {
        let scope = [e.key.as_str(), e.branch.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" @");
        let content = if e.rationale.is_empty() {
            e.content.clone()
        } else {
            format!("{} (why: {})", e.content, e.rationale)
        };
        let by = e.author.as_ref().map(|a| a.host.clone()).unwrap_or_default();
        t.add_row(vec![
            view::short(&e.id).to_owned(),
            e.category.clone() + if e.evicted { " (evicted)" } else { "" },
            scope,
            crate::clip(&content, 70),
            by,
            e.record_revision.to_string(),
        ]);
    }
    println!("{}", crate::safe::text(&format!("{}  (revision {})\n{t}", project.key, reply.as_of_revision)));
    Ok(())
}

pub async fn rm(
    ctx: &Ctx,
    dir: &Path,
    id: Option<String>,
    category: Option<String>,
    key: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let target = match (id, category) {
        (Some(id), _) => delete_memory_request::Target::EntryId(entry_id(&mut hub, &project.key, &id).await?),
        (None, Some(category)) => delete_memory_request::Target::Record(RecordRef {
            category,
            key: key.unwrap_or_default(),
            branch: String::new(),
        }),
        (None, None) => anyhow::bail!("give an entry id, or --category (and --key for a note)"),
    };
    let reply = hub
        .memory
        .delete_memory(DeleteMemoryRequest {
            project: project.key.clone(),
            target: Some(target),
            write: write::options(baton_proto::v1::AgentKind::Custom as i32, ""),
        })
        .await
        .map_err(remote::fail)?
        .into_inner();
    if json {
        println!(
            "{}",
            serde_json::json!({"deleted": reply.deleted_ids, "revision": reply.result.map(|r| r.revision)})
        );
    } else {
        println!(
            "deleted {} entr{}",
            reply.deleted_ids.len(),
            if reply.deleted_ids.len() == 1 { "y" } else { "ies" }
        );
    }
    Ok(())
}
