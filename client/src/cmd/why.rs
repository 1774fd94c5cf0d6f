//! `baton why FILE[:LINE[-LINE]]` (which session wrote these lines, and why) and `baton log`
//! (a session's commits, or the project's).

use std::path::Path;

use baton_proto::v1::{CommitMadeBy, ListCommitsRequest};

use crate::hub::remote::{self, Timeouts};
use crate::usecase::sessions::resolve;
use crate::usecase::why;
use crate::{ctx::Ctx, project, view};

pub async fn why(ctx: &Ctx, dir: &Path, spec: &str, json: bool) -> anyhow::Result<()> {
    let (file, range) = why::parse_spec(spec)?;
    let project = project::identify(dir);
    if crate::project::git::toplevel(dir).is_none() {
        anyhow::bail!("{} is not in a git repository: baton why explains lines git knows", dir.display());
    }
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let answer =
        why::why(&mut hub, &ctx.settings.server, &project.key, &project.root, dir, &file, range).await?;
    if json {
        view::print(&format!("{}\n", why::json(&answer)));
    } else {
        view::print(&why::text(&answer));
    }
    Ok(())
}

/// What `baton log` lists.
pub struct LogAsk {
    pub session: Option<String>,
    pub all: bool,
    pub limit: u32,
}

pub async fn log(ctx: &Ctx, dir: &Path, ask: LogAsk, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let session = match (&ask.session, ask.all) {
        (_, true) => String::new(),
        (Some(s), false) => resolve(&mut hub, &project.key, s).await?,
        (None, false) => super::checkpoints::current_session(&mut hub, &project.key, false).await?,
    };
    let mut links = Vec::new();
    let mut page_token = String::new();
    let want = usize::try_from(ask.limit).unwrap_or(usize::MAX);
    while links.len() < want {
        let request = ListCommitsRequest {
            project: project.key.clone(),
            session_id: session.clone(),
            limit: i32::try_from(want - links.len()).unwrap_or(1000).min(1000),
            page_token: page_token.clone(),
        };
        let page = hub.commits.list_commits(request).await.map_err(remote::fail)?.into_inner();
        links.extend(page.links);
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    if json {
        let rows: Vec<_> = links
            .iter()
            .map(|l| {
                serde_json::json!({
                    "commit": l.commit_id,
                    "session_id": l.session_id,
                    "subject": l.subject,
                    "committed_at": view::time(l.committed_at.as_ref()),
                    "made_by": made_by(l.made_by, l.ambiguous),
                    "branch": l.branch,
                    "files": l.files,
                    "patch_id": l.patch_id,
                    "lines": l.lines,
                })
            })
            .collect();
        view::print(&format!("{}\n", serde_json::Value::Array(rows)));
        return Ok(());
    }
    if links.is_empty() {
        let whose = if session.is_empty() { "this project".to_owned() } else { format!("session {session}") };
        println!(
            "no commits recorded for {whose}: the hooks record commits made while a session runs (`baton init`), and \
             `baton init AGENT --post-commit` records every commit made here"
        );
        return Ok(());
    }
    let mut t = view::table(&["commit", "when", "by", "session", "files", "subject"]);
    for l in &links {
        t.add_row(vec![
            crate::safe::line(crate::project::git::short(&l.commit_id)).into_owned(),
            view::age(l.committed_at.as_ref()),
            made_by(l.made_by, l.ambiguous).to_owned(),
            crate::safe::line(view::short(&l.session_id)).into_owned(),
            l.files.len().to_string(),
            crate::safe::line(&crate::text::clip(&l.subject, 60)).into_owned(),
        ]);
    }
    view::print(&format!("{t}\n"));
    Ok(())
}

fn made_by(m: i32, ambiguous: bool) -> &'static str {
    match (CommitMadeBy::try_from(m).unwrap_or_default(), ambiguous) {
        (CommitMadeBy::Agent, _) => "agent",
        (CommitMadeBy::Person, true) => "person (ambiguous)",
        (CommitMadeBy::Person, false) => "person",
        (CommitMadeBy::Unspecified, _) => "",
    }
}
