//! `baton search QUERY`: the project's memory, checkpoints and sessions, by full text.

use std::io::IsTerminal as _;
use std::path::Path;

use crate::remote::{self, Timeouts};
use crate::search::{self, Options};
use crate::{Ctx, project, view};

/// The command's flags, as given.
pub struct Flags {
    pub query: Vec<String>,
    pub kinds: Vec<String>,
    pub session: Option<String>,
    pub branch: Option<String>,
    pub author: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub limit: usize,
}

pub async fn run(ctx: &Ctx, dir: &Path, f: Flags, json: bool) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut options = Options {
        query: f.query.join(" "),
        kinds: f.kinds.iter().map(|k| search::parse_kind(k)).collect::<anyhow::Result<_>>()?,
        branch: f.branch.unwrap_or_default(),
        author: f.author.unwrap_or_default(),
        after: f.since.as_deref().map(search::parse_time).transpose()?,
        before: f.until.as_deref().map(search::parse_time).transpose()?,
        limit: f.limit,
        ..Options::default()
    };
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    if let Some(s) = f.session {
        options.session_id = crate::cmd::sessions::resolve(&mut hub, &project.key, &s).await?;
    }
    let (hits, partial) = search::run(&mut hub, &project.key, &options).await.map_err(remote::fail)?;
    if json {
        let hits: Vec<_> = hits.iter().map(search::hit_json).collect();
        println!("{}", serde_json::json!({"project": project.key, "partial": partial, "hits": hits}));
        return Ok(());
    }
    if hits.is_empty() {
        println!("no hits for {} in {}", crate::safe::line(&options.query), crate::safe::line(&project.key));
    } else {
        // Highlights in bold on a terminal; plain text elsewhere (scripts read --json).
        let (open, close) = if std::io::stdout().is_terminal() { ("\x1b[1m", "\x1b[0m") } else { ("", "") };
        println!("{}  ({} hits)", crate::safe::line(&project.key), hits.len());
        for h in &hits {
            let mut kind = search::kind_name(h.kind).to_owned();
            if h.matched_checkpoints > 1 {
                kind = format!("{kind} (newest of {} in its session)", h.matched_checkpoints);
            }
            let mut about =
                vec![kind, view::short(&h.record_id).to_owned(), view::age(h.created_at.as_ref())];
            about.extend([&h.author, &h.branch].into_iter().filter(|s| !s.is_empty()).cloned());
            println!("\n{}", crate::safe::line(&about.join("  ")));
            println!("    {}", search::marked(h, open, close));
        }
    }
    if partial {
        println!("note: this project's older records are still being indexed; some may be missing");
    }
    Ok(())
}
