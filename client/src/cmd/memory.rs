//! `baton memory add|list|rm`: project memory in the server's categories.

use std::path::Path;
use std::time::Duration;

use baton_proto::v1::{
    ConflictPolicy, DeleteMemoryRequest, ListMemoryRequest, MemoryItem, MemoryOp, PutMemoryRequest,
    RecordRef, delete_memory_request,
};
use tonic::Code;

use crate::remote::{self, Timeouts};
use crate::write::{self, Delivered, Write};
use crate::{Ctx, project, view};

pub const CURRENT: &[&str] = &["goal", "constraint", "open_loop", "recent_change"];
pub const HISTORY: &[&str] = &["decision", "session_summary"];

pub struct Add {
    pub category: String,
    pub text: String,
    pub rationale: Option<String>,
    pub key: Option<String>,
    pub branch: Option<String>,
    pub if_revision: Option<i64>,
}

fn record_key(category: &str, branch: &str, key: &str) -> String {
    let base = if category == "note" { format!("note/{key}") } else { format!("memory/{category}") };
    if branch.is_empty() { base } else { format!("{base}@{branch}") }
}

pub async fn add(ctx: &Ctx, dir: &Path, a: Add, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let branch = a.branch.clone().unwrap_or_default();
    let (text, n1) = baton_proto::redact::redact(&a.text);
    let (rationale, n2) = baton_proto::redact::redact(a.rationale.as_deref().unwrap_or_default());
    let item = MemoryItem { content: text.into_owned(), rationale: rationale.into_owned() };
    let agent = baton_proto::v1::AgentKind::Custom as i32;
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await.ok();
    let request = |op: MemoryOp, items: Vec<MemoryItem>, base: Option<i64>, policy: ConflictPolicy| {
        let mut write = write::options(agent, "");
        if let Some(w) = write.as_mut() {
            w.base_revision = base;
            w.policy = policy as i32;
        }
        PutMemoryRequest {
            project: project.key.clone(),
            category: a.category.clone(),
            branch: branch.clone(),
            key: a.key.clone().unwrap_or_default(),
            op: op as i32,
            items,
            write,
        }
    };
    let delivered = if CURRENT.contains(&a.category.as_str()) {
        // Read the set, write set + item based on what was read: a concurrent add makes
        // the write fail (REJECT), and it is re-read and retried, so nothing is lost.
        let hub = hub.as_mut().ok_or_else(|| {
            anyhow::anyhow!("adding to {} needs the hub (it reads the current set first)", a.category)
        })?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let list = crate::pages::memory(
                hub,
                ListMemoryRequest {
                    project: project.key.clone(),
                    category: a.category.clone(),
                    branch: Some(branch.clone()),
                    ..Default::default()
                },
            )
            .await?;
            let read = list.record_revisions.get(&record_key(&a.category, &branch, "")).copied().unwrap_or(0);
            if let Some(expected) = a.if_revision
                && expected != read
            {
                anyhow::bail!(
                    "{} is at revision {read}, not {expected}: re-read it with `baton memory list` and retry",
                    a.category
                );
            }
            let mut items: Vec<MemoryItem> = list
                .entries
                .iter()
                .map(|e| MemoryItem { content: e.content.clone(), rationale: e.rationale.clone() })
                .collect();
            items.push(item.clone());
            let cap = list.caps.get(&a.category).copied().unwrap_or(0) as usize;
            if items.len() > cap {
                anyhow::bail!(
                    "{} holds at most {cap} item(s) and has {}: remove one first (`baton memory rm ID`)",
                    a.category,
                    items.len() - 1
                );
            }
            match hub
                .memory
                .put_memory(request(MemoryOp::ReplaceSet, items, Some(read), ConflictPolicy::Reject))
                .await
            {
                Ok(r) => break Delivered::Sent(Box::new(r.into_inner().result.unwrap_or_default())),
                Err(s) if s.code() == Code::Aborted && a.if_revision.is_none() && attempt < 5 => {
                    tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
                }
                Err(s) => anyhow::bail!(remote::explain(&s)),
            }
        }
    } else {
        let op = if HISTORY.contains(&a.category.as_str()) { MemoryOp::Append } else { MemoryOp::Upsert };
        let policy = if a.if_revision.is_some() { ConflictPolicy::Reject } else { ConflictPolicy::Overwrite };
        write::submit(
            &ctx.queue,
            hub.as_mut(),
            Write::PutMemory(request(op, vec![item], a.if_revision, policy)),
            None,
        )
        .await?
    };
    let redacted = n1 + n2;
    match delivered {
        Delivered::Sent(r) => {
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
        Delivered::Queued => {
            println!("the hub is unreachable: queued (sent by the next call or `baton sync`)")
        }
    }
    if redacted > 0 && !json {
        println!("redacted {redacted} secret(s)");
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
        (Some(id), _) => {
            // Accept the short ids shown by `baton memory list`.
            let full = if uuid::Uuid::parse_str(&id).is_ok() {
                id
            } else {
                let list = crate::pages::memory(
                    &mut hub,
                    ListMemoryRequest {
                        project: project.key.clone(),
                        include_evicted: true,
                        ..Default::default()
                    },
                )
                .await?;
                let found: Vec<_> = list.entries.iter().filter(|e| e.id.ends_with(&id)).collect();
                match found.as_slice() {
                    [one] => one.id.clone(),
                    [] => anyhow::bail!("no memory entry matching {id:?}"),
                    _ => anyhow::bail!("{id:?} matches several entries; give more of the id"),
                }
            };
            delete_memory_request::Target::EntryId(full)
        }
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
