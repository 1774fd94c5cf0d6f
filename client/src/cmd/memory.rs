//! `baton memory add|list|rm`: project memory in the server's categories.

use std::path::Path;

use baton_proto::v1::{
    ConflictPolicy, DeleteMemoryRequest, ListMemoryRequest, MemoryItem, MemoryOp, PutMemoryRequest,
    RecordRef, delete_memory_request,
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

pub async fn add(ctx: &Ctx, dir: &Path, a: Add, json: bool) -> anyhow::Result<()> {
    if a.category == "note" && a.key.as_deref().is_none_or(|k| k.trim().is_empty()) {
        anyhow::bail!("notes need a key: --key NAME (a note is replaced by the next one under its key)");
    }
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await.ok();
    let author = (baton_proto::v1::AgentKind::Custom as i32, "");
    let (put, redacted) = put(ctx, hub.as_mut(), &project.key, &a, author).await?;
    match put {
        Put::AlreadyHeld => {
            println!("{} already holds that item: nothing to add", a.category);
            return Ok(());
        }
        Put::Sent(sent) => {
            let r = &sent.result;
            if json {
                let evicted: Vec<_> = sent.evicted.iter().map(view::entry_json).collect();
                println!(
                    "{}",
                    serde_json::json!({"revision": r.revision, "outcome": view::outcome(r.outcome), "redacted": redacted,
                        "conflict": r.conflict.as_ref().map(view::conflict_json), "evicted": evicted})
                );
            } else {
                println!("added to {} at revision {}", a.category, r.revision);
                for e in &sent.evicted {
                    println!(
                        "{} is at its cap: evicted the oldest, {}; `baton memory list {} --all` shows it",
                        a.category,
                        view::entry_line(e),
                        a.category
                    );
                }
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
        println!("redacted {}", crate::count(redacted, "secret", "secrets"));
    }
    Ok(())
}

/// `baton memory set`: replaces a current-state set with these items in one write (queued
/// when the hub is down).
pub async fn set(
    ctx: &Ctx,
    dir: &Path,
    category: String,
    items: Vec<String>,
    branch: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    if !CURRENT.contains(&category.as_str()) {
        anyhow::bail!(
            "set replaces {}; for {category} use `baton memory add {category} TEXT`",
            CURRENT.join(", ")
        );
    }
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await.ok();
    let mut redacted = 0;
    let items = items
        .iter()
        .map(|text| {
            let (content, n) = baton_proto::redact::redact(text);
            redacted += n;
            MemoryItem { content: content.into_owned(), rationale: String::new() }
        })
        .collect();
    let request = PutMemoryRequest {
        project: project.key.clone(),
        category: category.clone(),
        branch: branch.unwrap_or_default(),
        key: String::new(),
        op: MemoryOp::ReplaceSet as i32,
        items,
        write: write::options(baton_proto::v1::AgentKind::Custom as i32, ""),
    };
    match write::submit(&ctx.queue, hub.as_mut(), Write::PutMemory(request), None).await? {
        Delivered::Sent(r) if json => {
            println!(
                "{}",
                serde_json::json!({"revision": r.result.revision, "queued": false, "redacted": redacted})
            );
        }
        Delivered::Sent(r) => println!("{category} replaced at revision {}", r.result.revision),
        Delivered::Queued if json => {
            println!("{}", serde_json::json!({"revision": null, "queued": true, "redacted": redacted}));
        }
        Delivered::Queued => {
            println!("the hub is unreachable: queued (sent by the next call or `baton sync`)");
        }
    }
    if redacted > 0 && !json {
        println!("redacted {}", crate::count(redacted, "secret", "secrets"));
    }
    Ok(())
}

/// `baton memory caps CATEGORY N`: how many items a category keeps (its oldest go to
/// history past it).
pub async fn caps(ctx: &Ctx, dir: &Path, category: String, cap: i32, json: bool) -> anyhow::Result<()> {
    if !categories().any(|c| c == category) {
        anyhow::bail!(
            "no memory category {category:?}: one of {}",
            categories().collect::<Vec<_>>().join(", ")
        );
    }
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let request = baton_proto::v1::SetMemoryCapsRequest {
        project: project.key.clone(),
        caps: std::iter::once((category.clone(), cap)).collect(),
        write: write::options(baton_proto::v1::AgentKind::Custom as i32, ""),
    };
    let reply = hub.memory.set_memory_caps(request).await.map_err(remote::fail)?.into_inner();
    let now = reply.caps.get(&category).copied().unwrap_or(cap);
    if json {
        println!("{}", serde_json::json!({"caps": reply.caps, "revision": reply.result.map(|r| r.revision)}));
    } else {
        println!("{category} now keeps {}", crate::count(now, "item", "items"));
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
        Delivered::Sent(sent) if json => {
            let r = &sent.result;
            println!(
                "{}",
                serde_json::json!({"revision": r.revision, "outcome": view::outcome(r.outcome), "conflict": r.conflict.as_ref().map(view::conflict_json)})
            );
        }
        Delivered::Sent(sent) => println!("removed from {category} at revision {}", sent.result.revision),
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
    (all, wide): (bool, bool),
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
            if wide { content } else { crate::clip(&content, 70) },
            by,
            e.record_revision.to_string(),
        ]);
    }
    let table = view::rows_or(&t, "no memory entries");
    println!(
        "{}",
        crate::safe::text(&format!("{}  (revision {})\n{table}", project.key, reply.as_of_revision))
    );
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
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await;
    let target = match (id, category) {
        (Some(id), _) => delete_memory_request::Target::EntryId(match hub.as_mut() {
            Ok(h) => entry_id(h, &project.key, &id).await?,
            Err(down) => uuid::Uuid::parse_str(&id).map(|u| u.hyphenated().to_string()).map_err(|_| {
                anyhow::anyhow!(
                    "{down}; with the hub down, give the entry's full id (a part needs the hub to find it)"
                )
            })?,
        }),
        (None, Some(category)) => delete_memory_request::Target::Record(RecordRef {
            category,
            key: key.unwrap_or_default(),
            branch: String::new(),
        }),
        (None, None) => anyhow::bail!("give an entry id, or --category (and --key for a note)"),
    };
    let request = DeleteMemoryRequest {
        project: project.key.clone(),
        target: Some(target),
        write: write::options(baton_proto::v1::AgentKind::Custom as i32, ""),
    };
    match write::submit(&ctx.queue, hub.as_mut().ok(), Write::DeleteMemory(request), None).await? {
        Delivered::Sent(r) if json => {
            println!(
                "{}",
                serde_json::json!({"deleted": r.deleted, "revision": r.result.revision, "queued": false})
            );
        }
        Delivered::Sent(r) => println!(
            "deleted {} at revision {}",
            crate::count(r.deleted.len(), "entry", "entries"),
            r.result.revision
        ),
        Delivered::Queued if json => {
            println!("{}", serde_json::json!({"deleted": [], "revision": null, "queued": true}));
        }
        Delivered::Queued => {
            println!(
                "the hub is unreachable: the deletion is queued (sent by the next call or `baton sync`)"
            );
        }
    }
    Ok(())
}
