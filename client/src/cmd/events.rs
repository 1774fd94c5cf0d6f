//! `baton events`, `baton watch` (live) and `baton conflicts`.

use std::path::Path;

use baton_proto::v1::{ListEventsRequest, WatchCursor, WatchRequest};
use futures::StreamExt;

use crate::hub::remote::{self, Timeouts};
use crate::{ctx::Ctx, project, view};

pub async fn list(ctx: &Ctx, dir: &Path, after: i64, limit: i32, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let (events, _) =
        crate::hub::pages::events(&mut hub, &project.key, after, usize::try_from(limit).unwrap_or(0)).await?;
    for e in &events {
        if json {
            println!("{}", view::event_json(e));
        } else {
            println!("{}", crate::safe::line(&view::event_line(e)));
        }
    }
    Ok(())
}

pub async fn watch(ctx: &Ctx, dir: &Path, after: Option<i64>, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::STREAM).await?;
    // Default: from now on.
    let after = match after {
        Some(a) => a,
        None => {
            hub.events
                .list_events(ListEventsRequest {
                    project: project.key.clone(),
                    after_revision: i64::MAX - 1,
                    limit: 1,
                    kinds: vec![],
                    ..Default::default()
                })
                .await
                .map_err(remote::fail)?
                .into_inner()
                .as_of_revision
        }
    };
    if !json {
        eprintln!("watching {} after revision {after} (Ctrl-C to stop)", project.key);
    }
    let mut stream = hub
        .events
        .watch(WatchRequest {
            cursors: vec![WatchCursor { project: project.key.clone(), after_revision: after }],
            kinds: vec![],
        })
        .await
        .map_err(remote::fail)?
        .into_inner();
    while let Some(event) = stream.next().await {
        let event = event.map_err(remote::fail)?;
        if json {
            println!("{}", view::event_json(&event));
        } else {
            println!("{}", crate::safe::line(&view::event_line(&event)));
        }
    }
    Ok(())
}

pub async fn conflicts(ctx: &Ctx, dir: &Path, after: i64, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let conflicts = crate::hub::pages::conflicts(&mut hub, &project.key, after).await?;
    if json {
        let list: Vec<_> = conflicts.iter().map(view::conflict_json).collect();
        println!("{}", serde_json::json!({"project": project.key, "conflicts": list}));
        return Ok(());
    }
    let mut t = view::table(&["rev", "record", "outcome", "base → current", "writer", "overwrote"]);
    for c in &conflicts {
        let writer =
            c.writer.as_ref().map(|a| format!("{}@{}", view::agent(a.agent), a.host)).unwrap_or_default();
        let by = c
            .current_author
            .as_ref()
            .map(|a| format!("{}@{}", view::agent(a.agent), a.host))
            .unwrap_or_default();
        t.add_row(vec![
            c.revision.to_string(),
            c.record.clone(),
            view::outcome(c.outcome),
            format!("{} → {}", c.base_revision.map_or("-".into(), |b| b.to_string()), c.current_revision),
            writer,
            by,
        ]);
    }
    println!("{}", crate::safe::text(&format!("{}\n{}", project.key, view::rows_or(&t, "no conflicts"))));
    Ok(())
}
