//! `baton warmup`: the brief for the current project.

use std::path::Path;

use crate::hub::remote::{self, Timeouts};
use crate::{ctx::Ctx, local::cache, project};

pub async fn run(ctx: &Ctx, dir: &Path, budget: Option<u32>, json: bool) -> anyhow::Result<()> {
    let info = crate::project::git::info(dir);
    let project = project::identify_in(dir, info.toplevel.clone());
    let budget = budget.unwrap_or(ctx.settings.brief_budget) as usize;
    let text = match remote::connect(&ctx.settings, Timeouts::CLI).await {
        Ok(mut hub) => {
            let text = crate::usecase::brief::brief_text(&mut hub, &project, None, dir, &info, budget)
                .await
                .map_err(remote::fail)?;
            let _ = cache::store(&ctx.settings.data_dir, &project.key, &text);
            text
        }
        Err(e) => {
            eprintln!("baton: {e}");
            crate::usecase::brief::offline_brief(ctx, &project, budget)
        }
    };
    if json {
        println!("{}", serde_json::json!({ "project": project.key, "brief": text }));
    } else {
        print!("{}", crate::safe::text(&text));
    }
    Ok(())
}
