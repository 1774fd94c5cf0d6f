//! `baton doctor`: is everything in place for hooks to work?

use std::fmt::Write as _;
use std::path::Path;

use crate::agents::Agent;
use crate::agents::{Scope, install};
use crate::hub::remote::{self, Timeouts};
use crate::{ctx::Ctx, project};

struct Check {
    ok: bool,
    what: String,
}

/// The version an agent CLI on this PATH reports (`<command> --version`), if it runs.
fn installed_version(command: &str) -> Option<String> {
    let out = std::process::Command::new(command)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "2.1.197 (Claude Code)", "codex-cli 0.169.0", "0.61.0".
    text.split_whitespace()
        .find(|w| w.split('.').count() == 3 && w.split('.').all(|p| p.parse::<u32>().is_ok()))
        .map(str::to_owned)
}

/// Why an agent with Baton's hooks cannot run them here: its CLI is not on PATH (Cursor's
/// editor has none to look for).
fn not_installed(agent: Agent) -> Option<String> {
    let command = baton_proto::agent::COVERED.iter().find(|c| c.agent == agent.name())?.command;
    (!crate::host::on_path(command)).then(|| {
        format!(
            "{} is not installed here (no `{command}` on PATH): its Baton hooks never run (`baton init {} --uninstall` removes them)",
            agent.name(),
            agent.name()
        )
    })
}

/// A note when the installed agent is not the version the agent suite proved.
fn version_note(agent: Agent) -> Option<String> {
    let covered = baton_proto::agent::COVERED.iter().find(|c| c.agent == agent.name())?;
    let installed = installed_version(covered.command)?;
    (installed != covered.version).then(|| {
        format!(
            "{} {installed} is installed; Baton's agent suite last proved {} {}: hook payloads change between versions, so check `baton doctor --try {}`",
            covered.command,
            covered.command,
            covered.version,
            agent.name()
        )
    })
}

/// Whether the agent can call Baton's MCP tools: registered, approved, allowed. Not
/// registered is a failure only when `baton init` registered it (the mark) and it is gone.
fn mcp_check(ctx: &Ctx, agent: Agent, root: &Path) -> Check {
    let marked = crate::agents::mcp::marker(&ctx.settings.data_dir, agent).exists();
    match crate::agents::mcp::health(agent, root) {
        // A project's file names `baton` by command (it is shared): it must be on PATH.
        Ok(at) if project_file(agent, root, &at) && !crate::host::on_path(crate::agents::mcp::COMMAND) => {
            Check {
                ok: false,
                what: format!(
                    "{at} names `baton` by command, and no `baton` is on PATH here: `cargo install --locked --path client`"
                ),
            }
        }
        Ok(at) => {
            Check { ok: true, what: format!("{} can call Baton's MCP tools (server in {at})", agent.name()) }
        }
        Err(why) if !marked && why.starts_with("not registered") => Check {
            ok: true,
            what: format!(
                "{}: Baton's MCP tools are not registered (`baton init {}` adds them)",
                agent.name(),
                agent.name()
            ),
        },
        Err(why) => Check { ok: false, what: format!("{}: Baton's MCP tools: {why}", agent.name()) },
    }
}

/// Whether `at` is the project's own MCP file of `agent` (not the user's).
fn project_file(agent: Agent, root: &Path, at: &str) -> bool {
    agent.mcp_files(Scope::Project, root).is_ok_and(|f| f.server == Path::new(at))
}

/// `baton doctor --try <agent>`: the brief this agent's SessionStart hook would give, in the
/// agent's own output format, and how the agent hands it to its model. Starts no session.
pub async fn try_agent(ctx: &Ctx, dir: &Path, agent: Agent, json: bool) -> anyhow::Result<()> {
    let info = crate::project::git::info(dir);
    let project = project::identify_in(dir, info.toplevel.clone());
    let budget = crate::usecase::brief::brief_budget(ctx, agent);
    let brief = match remote::connect(&ctx.settings, Timeouts::HOOK).await {
        Ok(mut hub) => crate::usecase::brief::brief_text(&mut hub, &project, None, dir, &info, budget)
            .await
            .map_err(remote::fail)?,
        Err(e) => {
            eprintln!("baton: {e}: the hook would give the cached brief");
            crate::usecase::brief::offline_brief(ctx, &project, budget)
        }
    };
    let output = crate::usecase::brief::deliver(ctx, agent, &brief);
    let how = agent.brief_delivery();
    let chars = brief.chars().count();
    if json {
        println!(
            "{}",
            serde_json::json!({"agent": agent.name(), "hook_output": output, "brief": brief, "characters": chars, "budget": budget, "delivery": how})
        );
        return Ok(());
    }
    println!("{}", crate::safe::text(&brief));
    println!("---");
    println!("{chars} of {budget} characters (the budget for {}); {how}.", agent.name());
    println!("The hook prints: {}", crate::safe::line(&crate::text::clip(&output, 200)));
    Ok(())
}

pub async fn run(ctx: &Ctx, dir: &Path, json: bool) -> anyhow::Result<()> {
    let mut checks = vec![hub_check(ctx).await];
    let project = project::identify(dir);
    checks.push(Check {
        ok: true,
        what: format!("project {} (from {})", project.key, crate::safe::line(&project.source.to_string())),
    });
    let hooked = hook_checks(&project.root, &mut checks);
    for agent in &hooked {
        checks.push(mcp_check(ctx, *agent, &project.root));
    }
    if hooked.is_empty() {
        checks.push(Check {
            ok: false,
            what: format!(
                "no agent hooks installed: run `baton init <agent>` ({})",
                crate::text::series(&Agent::names(|_| true), "or")
            ),
        });
    }
    for note in hooked.iter().filter_map(|agent| agent.alongside(&hooked)) {
        checks.push(Check { ok: true, what: note.into() });
    }
    checks.push(summary_check(ctx));
    let (pending, dead) = ctx.queue.counts();
    checks.push(Check {
        ok: dead == 0,
        what: format!("offline queue: {pending} pending, {dead} refused (see `baton status`)"),
    });
    if json {
        let list: Vec<_> = checks.iter().map(|c| serde_json::json!({"ok": c.ok, "check": c.what})).collect();
        println!("{}", serde_json::json!({"checks": list}));
    } else {
        for c in &checks {
            println!("{} {}", if c.ok { "ok  " } else { "FAIL" }, c.what);
        }
    }
    if checks.iter().any(|c| !c.ok) {
        anyhow::bail!("some checks failed");
    }
    Ok(())
}

/// Whether the hub answers: connecting is not answering, so its health service is asked.
async fn hub_check(ctx: &Ctx) -> Check {
    let hub = match remote::connect(&ctx.settings, Timeouts::PROBE).await {
        Ok(hub) => hub,
        Err(e) => return Check { ok: false, what: e.to_string() },
    };
    let answer = tonic_health::pb::health_client::HealthClient::new(hub.channel.clone())
        .check(tonic_health::pb::HealthCheckRequest { service: "baton.v1.SessionService".into() })
        .await;
    match answer {
        Ok(_) => Check { ok: true, what: format!("hub serving at {}", ctx.settings.server) },
        Err(s) => Check {
            ok: false,
            what: format!("hub at {} does not answer: {}", ctx.settings.server, remote::explain(&s)),
        },
    }
}

/// One check per settings file holding Baton's hooks; returns the agents hooked.
fn hook_checks(root: &Path, checks: &mut Vec<Check>) -> Vec<Agent> {
    let exe = std::env::current_exe().map(|e| e.display().to_string()).unwrap_or_default();
    let mut hooked: Vec<Agent> = Vec::new();
    for &agent in Agent::ALL {
        for scope in [Scope::User, Scope::Project] {
            let Ok(file) = agent.settings_file(scope, root) else { continue };
            let events = install::installed(agent, &file);
            if events.is_empty() {
                continue;
            }
            if !hooked.contains(&agent) {
                hooked.push(agent);
                if let Some(missing) = not_installed(agent) {
                    checks.push(Check { ok: false, what: missing });
                }
            }
            if scope == Scope::User
                && let Some(note) = version_note(agent)
            {
                checks.push(Check { ok: true, what: format!("note: {note}") });
            }
            checks.push(hook_check(agent, &file, &events, &exe, root));
        }
    }
    hooked
}

/// One settings file's hooks: the binary they call, Codex's trust, matchers that never
/// match, Gemini's hooks switch.
fn hook_check(agent: Agent, file: &Path, events: &[String], exe: &str, root: &Path) -> Check {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut what = format!("{} hooks in {} ({})", agent.name(), file.display(), events.join(", "));
    let mut ok = true;
    if !text.contains(exe) {
        let _ = write!(
            what,
            "; they call another baton binary than {exe}: run `baton init {}` again if that one is gone",
            agent.name()
        );
    }
    for (fine, finding) in agent.hook_findings(file, root) {
        ok &= fine;
        let _ = write!(what, "; {finding}");
    }
    Check { ok, what }
}

/// Whether session summaries are on, and can run.
fn summary_check(ctx: &Ctx) -> Check {
    let Some(by) = ctx.settings.summarize else {
        return Check {
            ok: true,
            what: format!(
                "session summaries: off (summarize = {} in the config turns them on)",
                crate::agents::summary::offered()
            ),
        };
    };
    if let Some(why) = crate::agents::summary::not_offered(by) {
        return Check {
            ok: false,
            what: format!("session summaries by {}: none are written ({why})", by.name()),
        };
    }
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|dir| dir.join(by.name()).is_file());
    Check {
        ok: found,
        what: if found {
            format!(
                "session summaries by {} (headless, at most {} s each)",
                by.name(),
                ctx.settings.summarize_seconds
            )
        } else {
            format!("session summaries by {}: `{}` is not on PATH, so none are written", by.name(), by.name())
        },
    }
}
