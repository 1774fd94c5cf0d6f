//! `baton threads`: an orchestrator's threads in a project (LangGraph's, through
//! `baton-client`'s checkpointer): their checkpoints newest first, filtered by thread,
//! namespace or metadata; and `baton threads delete`.

use std::path::Path;

use baton_proto::v1::{DeleteThreadsRequest, ListThreadCheckpointsRequest, ThreadCheckpoint};

use crate::hub::remote::{self, Timeouts};
use crate::outbox::write;
use crate::{ctx::Ctx, project, view};

/// What `baton threads` lists.
pub struct Filters {
    /// The project (default: this directory's).
    pub project: Option<String>,
    pub thread: Option<String>,
    pub namespace: Option<String>,
    /// A JSON object the metadata must match, key by key.
    pub filter: Option<String>,
    pub limit: u32,
}

fn project_key(dir: &Path, given: Option<String>) -> String {
    given.unwrap_or_else(|| project::identify(dir).key)
}

pub async fn list(ctx: &Ctx, dir: &Path, f: Filters, json: bool) -> anyhow::Result<()> {
    let project = project_key(dir, f.project);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let mut request = ListThreadCheckpointsRequest {
        project: project.clone(),
        thread: f.thread.unwrap_or_default(),
        namespace: f.namespace,
        metadata_filter_json: f.filter.unwrap_or_default(),
        metadata_only: true,
        ..Default::default()
    };
    let limit = usize::try_from(f.limit).unwrap_or(usize::MAX);
    let mut found: Vec<ThreadCheckpoint> = Vec::new();
    while found.len() < limit {
        request.page_size = i32::try_from((limit - found.len()).min(1000)).unwrap_or(1000);
        let page =
            hub.threads.list_thread_checkpoints(request.clone()).await.map_err(remote::fail)?.into_inner();
        found.extend(page.checkpoints);
        if page.next_page_token.is_empty() {
            break;
        }
        request.page_token = page.next_page_token;
    }
    if json {
        let rows: Vec<serde_json::Value> = found.iter().map(row_json).collect();
        println!("{}", serde_json::json!({"project": project, "checkpoints": rows}));
        return Ok(());
    }
    let mut t = view::table(&["thread", "namespace", "key", "parent", "created", "metadata"]);
    for c in &found {
        let created = c.checkpoint.as_ref().and_then(|c| c.created_at.as_ref());
        let corrupt = if c.checkpoint.as_ref().is_some_and(|c| c.corrupt) { " (corrupt)" } else { "" };
        t.add_row(vec![
            crate::text::clip(&c.thread, 40),
            crate::text::clip(&c.namespace, 30),
            format!("{}{corrupt}", crate::text::clip(&c.key, 40)),
            crate::text::clip(&c.parent_key, 40),
            view::age(created),
            crate::text::clip(&c.metadata_json, 80),
        ]);
    }
    let table = view::rows_or(&t, "no thread checkpoints");
    println!("{}", crate::safe::text(&format!("project {project}, newest first\n{table}")));
    Ok(())
}

fn row_json(c: &ThreadCheckpoint) -> serde_json::Value {
    let meta = c.checkpoint.as_ref();
    serde_json::json!({
        "thread": c.thread,
        "namespace": c.namespace,
        "key": c.key,
        "parent_key": c.parent_key,
        "checkpoint_id": meta.map(|m| m.id.clone()),
        "session_id": meta.map(|m| m.session_id.clone()),
        "created_at": view::time(meta.and_then(|m| m.created_at.as_ref())),
        "corrupt": meta.is_some_and(|m| m.corrupt),
        "metadata": serde_json::from_str::<serde_json::Value>(&c.metadata_json).unwrap_or(serde_json::Value::Null),
        "writes": c.writes.len(),
    })
}

/// `baton threads delete`: every namespace, checkpoint and pending write of the threads.
pub async fn delete(
    ctx: &Ctx,
    dir: &Path,
    project: Option<String>,
    threads: Vec<String>,
    json: bool,
) -> anyhow::Result<()> {
    let project = project_key(dir, project);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let request = DeleteThreadsRequest {
        project: project.clone(),
        threads,
        write: write::options(baton_proto::v1::AgentKind::Unspecified as i32, ""),
    };
    let reply = hub.threads.delete_threads(request).await.map_err(remote::fail)?.into_inner();
    if json {
        let revision = reply.result.as_ref().map(|r| r.revision);
        println!(
            "{}",
            serde_json::json!({"project": project, "removed_sessions": reply.removed_sessions,
                "removed_checkpoints": reply.removed_checkpoints, "revision": revision})
        );
    } else if reply.result.is_none() {
        println!(
            "{}",
            crate::safe::line(&format!("nothing stored under those threads in project {project}"))
        );
    } else {
        println!(
            "{}",
            crate::safe::line(&format!(
                "deleted {} namespace(s) with {} checkpoint(s) in project {project}",
                reply.removed_sessions, reply.removed_checkpoints
            ))
        );
    }
    Ok(())
}
