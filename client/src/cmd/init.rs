//! `baton init <agent>`: install (or remove) Baton's hooks in the agent's settings.

use std::path::Path;

use crate::hook::Agent;
use crate::install::{self, Scope};
use crate::project;

pub fn run(dir: &Path, agent: Agent, scope: Scope, uninstall: bool, json: bool) -> anyhow::Result<()> {
    let root = project::identify(dir).root;
    let file = install::settings_file(agent, scope, &root)?;
    let exe = std::env::current_exe()?;
    let exe = exe.to_string_lossy();
    let change = install::install(agent, &file, &exe, uninstall)?;
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
