//! `baton memory add|list|rm`: project memory in the server's categories.

use std::path::Path;

use baton_proto::v1::{
    DeleteMemoryRequest, ListMemoryRequest, MemoryItem, MemoryOp, PutMemoryRequest, RecordRef,
    delete_memory_request,
};

use crate::hub::remote::{self, Timeouts};
use crate::outbox::write::{self, Delivered, Write};
use crate::usecase::memory::{Add, CURRENT, Put, categories, entry_id, holds, put};
use crate::{ctx::Ctx, project, view};

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
        println!("redacted {}", crate::text::count(redacted, "secret", "secrets"));
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
        println!("redacted {}", crate::text::count(redacted, "secret", "secrets"));
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
        println!("{category} now keeps {}", crate::text::count(now, "item", "items"));
    }
    Ok(())
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
    let reply = crate::hub::pages::memory(
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
            if wide { content } else { crate::text::clip(&content, 70) },
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
            crate::text::count(r.deleted.len(), "entry", "entries"),
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
