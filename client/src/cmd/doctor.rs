//! `baton doctor`: is everything in place for hooks to work?

use std::path::Path;

use serde_json::Value;

use crate::hook::Agent;
use crate::install::{self, Scope};
use crate::remote::{self, Timeouts};
use crate::{Ctx, codex_trust, project};

struct Check {
    ok: bool,
    what: String,
}

fn gemini_enabled(file: &Path) -> Option<bool> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(file).ok()?).ok()?;
    let on = |a: &str, b: &str| doc.get(a).and_then(|v| v.get(b)).and_then(Value::as_bool) == Some(true);
    Some(on("hooksConfig", "enabled") || on("tools", "enableHooks"))
}

pub async fn run(ctx: &Ctx, dir: &Path, json: bool) -> anyhow::Result<()> {
    let mut checks = Vec::new();
    match remote::connect(&ctx.settings, Timeouts::PROBE).await {
        Ok(hub) => {
            // Connecting is not answering: ask the health service.
            let answer = tonic_health::pb::health_client::HealthClient::new(hub.channel.clone())
                .check(tonic_health::pb::HealthCheckRequest { service: "baton.v1.SessionService".into() })
                .await;
            checks.push(match answer {
                Ok(_) => Check { ok: true, what: format!("hub serving at {}", ctx.settings.server) },
                Err(s) => Check {
                    ok: false,
                    what: format!("hub at {} does not answer: {}", ctx.settings.server, remote::explain(&s)),
                },
            });
        }
        Err(e) => checks.push(Check { ok: false, what: e.to_string() }),
    }
    let project = project::identify(dir);
    checks.push(Check { ok: true, what: format!("project {} (from {:?})", project.key, project.source) });
    let exe = std::env::current_exe().map(|e| e.display().to_string()).unwrap_or_default();
    let mut any = false;
    let mut claude_installed = false;
    let mut cursor_installed = false;
    for agent in [Agent::Claude, Agent::Codex, Agent::Gemini, Agent::Cursor] {
        for scope in [Scope::User, Scope::Project] {
            let Ok(file) = install::settings_file(agent, scope, &project.root) else { continue };
            let events = install::installed(agent, &file);
            if events.is_empty() {
                continue;
            }
            any = true;
            claude_installed |= agent == Agent::Claude;
            cursor_installed |= agent == Agent::Cursor;
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let stale = !text.contains(&exe);
            let mut what = format!("{} hooks in {} ({})", agent.name(), file.display(), events.join(", "));
            let mut ok = true;
            if stale {
                what.push_str(&format!("; they call another baton binary than {exe}: run `baton init {}` again if that one is gone", agent.name()));
            }
            if agent == Agent::Codex {
                // Codex skips a hook it has not trusted, without a word.
                let home =
                    directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()).unwrap_or_default();
                let trust =
                    codex_trust::trust(&codex_trust::config_file(&home), &codex_trust::baton_handlers(&file));
                let skipped: Vec<&str> = trust
                    .iter()
                    .filter(|(_, t)| *t != codex_trust::Trust::Trusted)
                    .map(|(h, _)| h.event.as_str())
                    .collect();
                if skipped.is_empty() {
                    what.push_str("; trusted in Codex");
                } else {
                    ok = false;
                    what.push_str(&format!(
                        "; Codex skips {} of them ({}): never trusted, or changed since: open /hooks in Codex and trust the Baton entries, or run `baton init codex --trust`",
                        skipped.len(),
                        skipped.join(", ")
                    ));
                }
            }
            for (event, matcher) in install::never_matching(agent, &file) {
                ok = false;
                what.push_str(&format!(
                    "; its {event} matcher {matcher:?} never matches (Gemini compares it with the trigger as one exact string): run `baton init gemini` again"
                ));
            }
            let user_gemini = install::settings_file(Agent::Gemini, Scope::User, &project.root)?;
            if agent == Agent::Gemini
                && gemini_enabled(&file) != Some(true)
                && gemini_enabled(&user_gemini) != Some(true)
            {
                ok = false;
                what.push_str(
                    "; the Gemini hooks system is not enabled (hooksConfig.enabled or tools.enableHooks)",
                );
            }
            checks.push(Check { ok, what });
        }
    }
    if !any {
        checks.push(Check {
            ok: false,
            what: "no agent hooks installed: run `baton init claude` (or codex, gemini, cursor)".into(),
        });
    }
    if claude_installed && cursor_installed {
        checks.push(Check {
            ok: true,
            what: "Cursor also loads Claude Code's hooks: inside Cursor, Baton's Claude hooks stand down"
                .into(),
        });
    }
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
