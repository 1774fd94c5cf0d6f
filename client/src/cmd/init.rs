//! `baton init <agent>`: install (or remove) Baton's hooks in the agent's settings.

use std::path::Path;

use crate::hook::Agent;
use crate::install::{self, Scope};
use crate::{Ctx, config, project};

pub fn run(
    ctx: &Ctx,
    dir: &Path,
    agent: Agent,
    scope: Scope,
    uninstall: bool,
    sync_transcripts: bool,
    json: bool,
) -> anyhow::Result<()> {
    if sync_transcripts && agent != Agent::Claude {
        anyhow::bail!("--sync-transcripts is available for claude only (for now)");
    }
    let root = project::identify(dir).root;
    let file = install::settings_file(agent, scope, &root)?;
    let exe = std::env::current_exe()?;
    let exe = exe.to_string_lossy();
    let mut change = install::install(agent, &file, &exe, uninstall)?;
    if sync_transcripts || (uninstall && agent == Agent::Claude && ctx.settings.sync_transcripts) {
        config::set_key(&ctx.settings.config_file, "sync_transcripts", toml::Value::Boolean(!uninstall))?;
        change.notes.push(if uninstall {
            format!("transcript sync turned off in {}", ctx.settings.config_file.display())
        } else {
            format!(
                "transcripts are uploaded (secrets redacted) with checkpoints by a detached process; set in {}",
                ctx.settings.config_file.display()
            )
        });
    }
    if json {
        println!(
            "{}",
            serde_json::json!({"agent": agent.name(), "file": change.file, "added": change.added, "removed": change.removed, "notes": change.notes})
        );
        return Ok(());
    }
    if uninstall {
        println!(
            "removed {} Baton hook(s) for {} from {}",
            change.removed,
            agent.name(),
            change.file.display()
        );
    } else {
        let verb = if change.removed > 0 { "updated" } else { "installed" };
        println!("{verb} {} Baton hooks for {} in {}", change.added, agent.name(), change.file.display());
    }
    for note in &change.notes {
        println!("note: {note}");
    }
    Ok(())
}
