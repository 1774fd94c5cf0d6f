//! Codex runs a hook only once the user has trusted that exact hook: `/hooks` in its TUI
//! records `trusted_hash` for it in the user's `config.toml`, and a hook whose hash is not
//! recorded (new, or changed since) is skipped without a word. Baton reads that record so
//! `baton doctor` can say so, and `baton init codex --trust` writes it for Baton's own
//! hooks, as `/hooks` would.
//!
//! The record (Codex 0.169, tests/agents/FINDINGS.md): a table per handler,
//! `[hooks.state."<hooks.json path>:<snake_event>:<group>:<handler>"]` with
//! `trusted_hash = "sha256:<hex>"`, the hash over the canonical JSON (sorted keys, no spaces)
//! of `{event_name, matcher (if any), hooks: [{type, command, timeout, async, statusMessage
//! (if any)}]}`. The agent suite proves it with the real CLI: hooks trusted this way run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Codex's default hook timeout, and its cap for SessionEnd, in seconds.
const DEFAULT_TIMEOUT: u64 = 600;
const SESSION_END_CAP: u64 = 3;

/// One handler of a hooks.json, with where it is and the hash Codex trusts it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handler {
    pub event: String,
    pub command: String,
    pub key: String,
    pub hash: String,
}

/// What Codex would do with a handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    Trusted,
    /// Never trusted: skipped.
    Untrusted,
    /// Trusted once, changed since: skipped.
    Modified,
}

/// `SessionStart` → `session_start`.
fn snake(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The hash Codex records for one handler of an event's group.
pub fn hook_hash(event: &str, matcher: Option<&str>, handler: &Value) -> String {
    let mut hook: BTreeMap<&str, Value> = BTreeMap::new();
    hook.insert("type", handler.get("type").cloned().unwrap_or_else(|| Value::from("command")));
    hook.insert("command", handler.get("command").cloned().unwrap_or(Value::Null));
    let timeout = handler.get("timeout").and_then(Value::as_u64).unwrap_or(DEFAULT_TIMEOUT);
    let timeout = if event == "SessionEnd" { timeout.min(SESSION_END_CAP) } else { timeout };
    hook.insert("timeout", Value::from(timeout));
    hook.insert("async", Value::from(handler.get("async").and_then(Value::as_bool).unwrap_or(false)));
    if let Some(message) = handler.get("statusMessage").filter(|m| !m.is_null()) {
        hook.insert("statusMessage", message.clone());
    }
    let mut group: BTreeMap<&str, Value> = BTreeMap::new();
    group.insert("event_name", Value::from(snake(event)));
    if let Some(matcher) = matcher {
        group.insert("matcher", Value::from(matcher));
    }
    let hooks = serde_json::to_value(vec![hook]).unwrap_or(Value::Null);
    group.insert("hooks", hooks);
    let canonical = serde_json::to_string(&group).unwrap_or_default();
    format!("sha256:{}", hex::encode(Sha256::digest(canonical.as_bytes())))
}

/// Baton's handlers in a Codex hooks.json (the file's path as Codex names it in its keys).
pub fn baton_handlers(hooks_file: &Path) -> Vec<Handler> {
    let Ok(text) = std::fs::read_to_string(hooks_file) else { return Vec::new() };
    let Ok(doc) = serde_json::from_str::<Value>(&text) else { return Vec::new() };
    let mut out = Vec::new();
    for (event, groups) in doc.get("hooks").and_then(Value::as_object).into_iter().flatten() {
        for (g, group) in groups.as_array().into_iter().flatten().enumerate() {
            let matcher = group.get("matcher").and_then(Value::as_str);
            for (h, handler) in group.get("hooks").and_then(Value::as_array).into_iter().flatten().enumerate()
            {
                let command = handler.get("command").and_then(Value::as_str).unwrap_or_default();
                if !crate::agents::install::is_ours(command, super::AGENT) {
                    continue;
                }
                out.push(Handler {
                    event: event.clone(),
                    command: command.to_owned(),
                    key: format!("{}:{}:{g}:{h}", hooks_file.display(), snake(event)),
                    hash: hook_hash(event, matcher, handler),
                });
            }
        }
    }
    out
}

/// Codex's user config (`$CODEX_HOME/config.toml`, else `~/.codex/config.toml`).
pub fn config_file(home: &Path) -> PathBuf {
    super::codex_home(home).join("config.toml")
}

/// The trust Codex has recorded for each handler.
pub fn trust(config: &Path, handlers: &[Handler]) -> Vec<(Handler, Trust)> {
    let table: toml::Table =
        std::fs::read_to_string(config).ok().and_then(|t| t.parse().ok()).unwrap_or_default();
    let state = table.get("hooks").and_then(|h| h.get("state"));
    handlers
        .iter()
        .map(|handler| {
            let recorded = state.and_then(|s| s.get(&handler.key)).and_then(|e| e.get("trusted_hash"));
            let trust = match recorded.and_then(toml::Value::as_str) {
                Some(hash) if hash == handler.hash => Trust::Trusted,
                Some(_) => Trust::Modified,
                None => Trust::Untrusted,
            };
            (handler.clone(), trust)
        })
        .collect()
}

/// Records trust for `handlers` in Codex's config, as `/hooks` does: a table per handler
/// appended (or its hash replaced), the rest of the file as it was. The result is parsed
/// back and checked before it replaces the file.
pub fn record(config: &Path, handlers: &[Handler]) -> anyhow::Result<usize> {
    let mut text = match std::fs::read_to_string(config) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", config.display())),
    };
    let mut changed = 0;
    for (handler, trust) in trust(config, handlers) {
        if trust == Trust::Trusted {
            continue;
        }
        let key = toml::Value::String(handler.key.clone()).to_string();
        let header = format!("[hooks.state.{key}]");
        let line = format!("trusted_hash = \"{}\"", handler.hash);
        if let Some(at) = text.find(&header) {
            // The table exists with another hash: its trusted_hash line is replaced.
            let body = at + header.len();
            let end = text[body..].find("\n[").map_or(text.len(), |i| body + i + 1);
            let mut rest = String::new();
            for l in text[body..end]
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("trusted_hash"))
            {
                rest.push_str(l);
                rest.push('\n');
            }
            text.replace_range(body..end, &format!("\n{line}\n{rest}\n"));
        } else {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            let _ = write!(text, "\n{header}\n{line}\n");
        }
        changed += 1;
    }
    if changed == 0 {
        return Ok(0);
    }
    let parsed: toml::Table =
        text.parse().with_context(|| format!("{} would not stay valid TOML", config.display()))?;
    let state = parsed.get("hooks").and_then(|h| h.get("state"));
    for handler in handlers {
        let got = state
            .and_then(|s| s.get(&handler.key))
            .and_then(|e| e.get("trusted_hash"))
            .and_then(toml::Value::as_str);
        anyhow::ensure!(
            got == Some(handler.hash.as_str()),
            "recording trust in {} did not take",
            config.display()
        );
    }
    if let Some(dir) = config.parent() {
        crate::fsperm::create_private_dir(dir)?;
    }
    crate::fsperm::write_atomic(config, text.as_bytes(), None)?;
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Hashes Codex 0.169.0 itself recorded for handlers trusted in its `/hooks`
    /// (the agent lab's config.toml, tests/agents/FINDINGS.md).
    #[test]
    fn hashes_match_what_codex_records() {
        let handler = |event: &str| json!({"type": "command", "command": format!("/work/agent-lab/bin/hook.py {event} /work/agent-lab/runs/x2/hooks.jsonl"), "timeout": 10});
        assert_eq!(
            hook_hash("SessionStart", None, &handler("SessionStart")),
            "sha256:c916f7fe9b92b4652178fc1ae89e864d3a7f1e314ab78e3048d75bd0b34f3030"
        );
        // SessionEnd's timeout counts as Codex clamps it (3 s).
        assert_eq!(
            hook_hash("SessionEnd", None, &handler("SessionEnd")),
            "sha256:70bb89c3ab4e4da8c01ae116a4575eb705256f049094f18ec20b85602cbb6200"
        );
        assert_eq!(
            hook_hash("PostToolUse", None, &handler("PostToolUse")),
            "sha256:0f8ef8205d6c79b3dc20f2771bc103191980b48fe8ceb3a118195542c207f201"
        );
    }

    #[test]
    fn record_appends_and_replaces_keeping_the_rest() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let config = dir.path().join("config.toml");
        std::fs::write(&config, "# mine\nmodel = \"gpt-5.5\"\n\n[features]\nx = true\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let handler = |hash: &str| Handler {
            event: "Stop".into(),
            command: "baton hook codex Stop".into(),
            key: "/h/.codex/hooks.json:stop:0:0".into(),
            hash: hash.into(),
        };
        assert_eq!(trust(&config, &[handler("sha256:a")])[0].1, Trust::Untrusted);
        assert_eq!(record(&config, &[handler("sha256:a")]).unwrap_or_else(|e| panic!("{e}")), 1);
        assert_eq!(trust(&config, &[handler("sha256:a")])[0].1, Trust::Trusted);
        assert_eq!(trust(&config, &[handler("sha256:b")])[0].1, Trust::Modified);
        assert_eq!(record(&config, &[handler("sha256:b")]).unwrap_or_else(|e| panic!("{e}")), 1);
        assert_eq!(trust(&config, &[handler("sha256:b")])[0].1, Trust::Trusted);
        let text = std::fs::read_to_string(&config).unwrap_or_default();
        assert!(text.starts_with("# mine\nmodel = \"gpt-5.5\"\n\n[features]\nx = true\n"), "{text}");
        assert_eq!(text.matches("trusted_hash").count(), 1, "{text}");
        assert_eq!(record(&config, &[handler("sha256:b")]).unwrap_or_else(|e| panic!("{e}")), 0);
    }
}
