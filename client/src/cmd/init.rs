//! `baton init <agent>`: install (or remove) Baton's hooks in the agent's settings, register
//! its MCP server, and for Codex record the hooks' trust.

use std::path::Path;

use crate::agents::Agent;
use crate::agents::{Scope, install};
use crate::{config, ctx::Ctx, project};

/// What `baton init` was asked besides the agent and scope: its flags, one field each.
#[derive(Clone, Copy)]
#[expect(clippy::struct_excessive_bools, reason = "command-line flags")]
pub struct Options {
    pub uninstall: bool,
    /// Register `baton mcp` too (else remove a registration `init` made).
    pub mcp: bool,
    pub sync_transcripts: bool,
    pub trust: bool,
    /// Install the git pre-commit hook that checks reservations (`precommit`).
    pub pre_commit: bool,
    /// Install the git post-commit hook that links commits to sessions (`postcommit`).
    pub post_commit: bool,
}

pub fn run(
    ctx: &Ctx,
    dir: &Path,
    agent: Agent,
    scope: Scope,
    options: Options,
    json: bool,
) -> anyhow::Result<()> {
    let Options { uninstall, mcp, sync_transcripts, trust, pre_commit, post_commit } = options;
    if sync_transcripts && !agent.carries_transcripts() {
        anyhow::bail!(
            "--sync-transcripts is available for {} ({}'s conversations are not carried between machines)",
            crate::text::series(&Agent::names(|a| a.carries_transcripts()), "and"),
            agent.title()
        );
    }
    if trust && (!agent.records_trust() || uninstall) {
        anyhow::bail!(
            "--trust records an agent's trust in Baton's hooks: use it with `baton init {}` (without --uninstall)",
            crate::text::series(&Agent::names(|a| a.records_trust()), "or")
        );
    }
    let root = project::identify(dir).root;
    let file = agent.settings_file(scope, &root)?;
    let exe = std::env::current_exe()?;
    let exe = exe.to_string_lossy();
    let mut change = install::install(agent, &file, &exe, uninstall)?;
    let registered = !uninstall && mcp;
    let tools = crate::agents::mcp::register(agent, scope, &root, &exe, !registered)?;
    // The brief's tools line: while the server is registered for this agent in any scope.
    crate::agents::mcp::mark(&ctx.settings.data_dir, agent, crate::agents::mcp::registered(agent, &root))?;
    change.notes.extend(tools.notes);
    if trust {
        let recorded = agent.record_trust(&file)?;
        // The install's note asks for that trust: it is given.
        change.notes.retain(|n| Some(n.as_str()) != agent.install_note());
        change.notes.push(recorded);
    }
    for (wanted, hook) in [(pre_commit, super::precommit::HOOK), (post_commit, super::postcommit::HOOK)] {
        if wanted || uninstall {
            change.notes.extend(hook.install(&root, &exe, uninstall)?);
        }
    }
    // Transcript sync is one setting for every agent: it goes off with the last hooks.
    let last_removed = uninstall && ctx.settings.sync_transcripts && !any_hooks_installed(&root);
    if sync_transcripts || last_removed {
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
            serde_json::json!({"agent": agent.name(), "file": change.file, "added": change.added, "removed": change.removed, "mcp": {"registered": registered, "files": tools.files}, "notes": change.notes})
        );
        return Ok(());
    }
    if uninstall {
        println!(
            "removed {} for {} from {}",
            crate::text::count(change.removed, "Baton hook", "Baton hooks"),
            agent.name(),
            change.file.display()
        );
    } else {
        let verb = if change.removed > 0 { "updated" } else { "installed" };
        println!(
            "{verb} {} for {} in {}",
            crate::text::count(change.added, "Baton hook", "Baton hooks"),
            agent.name(),
            change.file.display()
        );
    }
    let files: Vec<String> = tools.files.iter().map(|f| f.display().to_string()).collect();
    if registered && files.is_empty() {
        println!("Baton's MCP tools (mcp {}) were registered already", agent.name());
    } else if registered {
        println!("registered Baton's MCP tools (mcp {}) in {}", agent.name(), files.join(" and "));
    } else if !files.is_empty() {
        println!("removed Baton's MCP server from {}", files.join(" and "));
    }
    for note in &change.notes {
        println!("note: {note}");
    }
    Ok(())
}

/// Whether Baton's hooks are installed for any agent, in either scope.
fn any_hooks_installed(root: &Path) -> bool {
    Agent::ALL.iter().any(|&agent| {
        [Scope::User, Scope::Project].into_iter().any(|scope| {
            agent.settings_file(scope, root).is_ok_and(|f| !install::installed(agent, &f).is_empty())
        })
    })
}
