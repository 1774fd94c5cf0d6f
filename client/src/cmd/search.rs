//! `baton search QUERY`: the project's memory, checkpoints and sessions, by full text.

use std::path::Path;

use crate::hub::remote::{self, Timeouts};
use crate::hub::search::{self, Options};
use crate::{ctx::Ctx, project, view};

/// How much of a hit's snippet a row shows (`--json` has all of it).
const SNIPPET_CHARS: usize = 120;

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
        options.session_id = crate::usecase::sessions::resolve(&mut hub, &project.key, &s).await?;
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
        let mut t = view::table(&["kind", "id", "when", "by", "branch", "text (matches in «»)"]);
        for h in &hits {
            let mut kind = search::kind_name(h.kind).to_owned();
            if h.matched_checkpoints > 1 {
                // The newest of the session's checkpoints that match.
                kind = format!("{kind} (of {})", h.matched_checkpoints);
            }
            t.add_row(vec![
                kind,
                view::short(&h.record_id).to_owned(),
                view::age(h.created_at.as_ref()),
                h.author.clone(),
                h.branch.clone(),
                crate::text::clip(&search::marked(h, "«", "»"), SNIPPET_CHARS),
            ]);
        }
        println!(
            "{}",
            crate::safe::text(&format!(
                "{}  ({}, best first)\n{t}",
                project.key,
                crate::text::count(hits.len(), "hit", "hits")
            ))
        );
    }
    if partial {
        println!("note: this project's older records are still being indexed; some may be missing");
    }
    Ok(())
}
