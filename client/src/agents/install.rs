//! Installing Baton's hooks into each agent's own settings file: merged with what is
//! there, idempotent, and reversible (`--uninstall` removes exactly Baton's entries).
//!
//! Baton's entries are recognised by their command (`… baton … hook <agent> <Event>`), so
//! nothing else in the file is touched and a reinstall replaces rather than duplicates.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{Map, Value, json};

use crate::agents::Agent;

/// Where hooks go: the user's settings (every project) or this project's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    User,
    Project,
}

/// One hook Baton installs.
struct Spec {
    /// The agent's event name.
    event: &'static str,
    matcher: Option<&'static str>,
    /// In the agent's unit (seconds, or milliseconds for Gemini).
    timeout: u64,
}

fn specs(agent: Agent) -> Vec<Spec> {
    let s = |event, matcher, timeout| Spec { event, matcher, timeout };
    match agent {
        Agent::Claude => vec![
            s("SessionStart", Some("startup|resume|clear|compact"), 10),
            s("UserPromptSubmit", None, 10),
            s("PreToolUse", Some("Bash"), 10),
            s("PostToolUse", None, 10),
            s("PostToolUseFailure", None, 10),
            s("PreCompact", Some("manual|auto"), 10),
            s("PostCompact", None, 10),
            s("SubagentStop", None, 10),
            s("Stop", None, 10),
            s("StopFailure", None, 10),
            s("SessionEnd", None, 5),
        ],
        Agent::Codex => vec![
            s("SessionStart", Some("startup|resume|clear|compact"), 10),
            s("UserPromptSubmit", None, 10),
            s("PreToolUse", None, 10),
            s("PostToolUse", None, 10),
            s("PreCompact", Some("manual|auto"), 10),
            s("PostCompact", None, 10),
            s("Stop", None, 10),
            // Codex caps SessionEnd at 3 s; the work is detached anyway.
            s("SessionEnd", None, 3),
        ],
        // Gemini compares SessionStart's matcher with the trigger as one exact string (0.61):
        // "startup|resume|clear" never matches, no matcher matches all. It fires PreCompress
        // before every model request, compressing or not, so PreCompress cannot mark a
        // compaction and is not installed: AfterAgent checkpoints every turn.
        Agent::Gemini => vec![
            s("SessionStart", None, 10_000),
            s("BeforeAgent", None, 10_000),
            s("BeforeTool", Some("run_shell_command"), 10_000),
            s("AfterTool", None, 10_000),
            s("AfterAgent", None, 10_000),
            s("SessionEnd", None, 5_000),
        ],
        Agent::Cursor => vec![
            s("sessionStart", None, 10),
            s("beforeShellExecution", None, 10),
            s("postToolUse", None, 10),
            s("preCompact", None, 10),
            s("stop", None, 10),
            s("sessionEnd", None, 5),
        ],
    }
}

/// The settings file for an agent and scope.
pub fn settings_file(agent: Agent, scope: Scope, project_root: &Path) -> anyhow::Result<PathBuf> {
    let home = || -> anyhow::Result<PathBuf> {
        Ok(directories::BaseDirs::new().context("no home directory")?.home_dir().to_path_buf())
    };
    Ok(match (agent, scope) {
        (Agent::Claude, Scope::User) => home()?.join(".claude/settings.json"),
        // Personal and not committed: the agent's "local" project settings.
        (Agent::Claude, Scope::Project) => project_root.join(".claude/settings.local.json"),
        (Agent::Codex, Scope::User) => std::env::var_os("CODEX_HOME")
            .map_or_else(|| home().map(|h| h.join(".codex")), |h| Ok(PathBuf::from(h)))?
            .join("hooks.json"),
        (Agent::Codex, Scope::Project) => project_root.join(".codex/hooks.json"),
        (Agent::Gemini, Scope::User) => home()?.join(".gemini/settings.json"),
        (Agent::Gemini, Scope::Project) => project_root.join(".gemini/settings.json"),
        (Agent::Cursor, Scope::User) => home()?.join(".cursor/hooks.json"),
        (Agent::Cursor, Scope::Project) => project_root.join(".cursor/hooks.json"),
    })
}

/// The command a hook runs: this very binary, so hooks work whatever PATH the agent has.
pub fn hook_command(exe: &str, agent: Agent, event: &str) -> String {
    let exe = if exe.contains(' ') { format!("'{exe}'") } else { exe.to_owned() };
    format!("{exe} hook {} {event}", agent.name())
}

/// Whether a handler command is one of Baton's for `agent`.
pub fn is_ours(command: &str, agent: Agent) -> bool {
    command.contains("baton") && command.contains(&format!(" hook {} ", agent.name()))
}

fn handler(agent: Agent, spec: &Spec, exe: &str) -> Value {
    let command = hook_command(exe, agent, spec.event);
    match agent {
        Agent::Cursor => json!({ "command": command, "timeout": spec.timeout }),
        Agent::Gemini => json!({
            "name": format!("baton-{}", spec.event.to_ascii_lowercase()),
            "type": "command",
            "command": command,
            "timeout": spec.timeout,
            "description": "Baton session continuity",
        }),
        Agent::Claude | Agent::Codex => {
            json!({ "type": "command", "command": command, "timeout": spec.timeout })
        }
    }
}

/// Removes Baton's handlers of `agent` from one event's list; drops emptied groups.
fn strip(list: &mut Vec<Value>, agent: Agent) -> usize {
    let mut removed = 0;
    if agent == Agent::Cursor {
        let before = list.len();
        list.retain(|h| !h.get("command").and_then(Value::as_str).is_some_and(|c| is_ours(c, agent)));
        return before - list.len();
    }
    for group in list.iter_mut() {
        if let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) {
            let before = handlers.len();
            handlers.retain(|h| !h.get("command").and_then(Value::as_str).is_some_and(|c| is_ours(c, agent)));
            removed += before - handlers.len();
        }
    }
    list.retain(|g| g.get("hooks").and_then(Value::as_array).is_none_or(|h| !h.is_empty()));
    removed
}

/// What an install or uninstall did.
#[derive(Debug, Default)]
pub struct Change {
    pub file: PathBuf,
    pub added: usize,
    pub removed: usize,
    pub notes: Vec<String>,
}

/// Applies the install (or uninstall) to a settings document.
pub fn apply(
    doc: &mut Value,
    agent: Agent,
    exe: &str,
    uninstall: bool,
    gemini_enable_key: Option<&str>,
) -> anyhow::Result<(usize, usize)> {
    if !doc.is_object() {
        anyhow::bail!("the settings file does not hold a JSON object");
    }
    let root = doc.as_object_mut().context("object")?;
    if agent == Agent::Cursor && !root.contains_key("version") {
        root.insert("version".into(), json!(1));
    }
    let hooks = root.entry("hooks").or_insert_with(|| Value::Object(Map::new()));
    let hooks = hooks.as_object_mut().context("\"hooks\" is not an object")?;
    let mut removed = 0;
    let mut added = 0;
    for spec in specs(agent) {
        let list = hooks.entry(spec.event).or_insert_with(|| Value::Array(vec![]));
        let list = list.as_array_mut().with_context(|| format!("\"hooks.{}\" is not a list", spec.event))?;
        removed += strip(list, agent);
        if !uninstall {
            let h = handler(agent, &spec, exe);
            if agent == Agent::Cursor {
                list.push(h);
            } else {
                let mut group = Map::new();
                if let Some(m) = spec.matcher {
                    group.insert("matcher".into(), json!(m));
                }
                group.insert("hooks".into(), json!([h]));
                list.push(Value::Object(group));
            }
            added += 1;
        }
        if list.is_empty() {
            hooks.remove(spec.event);
        }
    }
    if hooks.is_empty() {
        root.remove("hooks");
    }
    if agent == Agent::Gemini
        && !uninstall
        && let Some(key) = gemini_enable_key
    {
        set_path(root, key, json!(true));
    }
    Ok((added, removed))
}

/// Sets `a.b` = value, creating objects on the way.
fn set_path(root: &mut Map<String, Value>, dotted: &str, value: Value) {
    let mut parts = dotted.split('.').peekable();
    let mut cur = root;
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            cur.insert(part.to_owned(), value);
            return;
        }
        let next = cur.entry(part).or_insert_with(|| Value::Object(Map::new()));
        if !next.is_object() {
            *next = Value::Object(Map::new());
        }
        match next.as_object_mut() {
            Some(obj) => cur = obj,
            None => return,
        }
    }
}

/// Which setting enables hooks in the installed Gemini CLI: `hooksConfig.enabled` since
/// v0.26.0, `tools.enableHooks` before (AGENT_HOOKS.md §3.1). Unknown version: the current
/// key, and a note.
pub fn gemini_enable_key() -> (&'static str, Option<String>) {
    let version = std::process::Command::new("gemini")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().trim_start_matches('v').to_owned());
    match version.as_deref().and_then(parse_version) {
        Some(v) if v < (0, 26, 0) => ("tools.enableHooks", Some(format!("Gemini CLI {} found: enabled hooks with tools.enableHooks", version.unwrap_or_default()))),
        Some(_) => ("hooksConfig.enabled", Some(format!("Gemini CLI {} found: enabled hooks with hooksConfig.enabled", version.unwrap_or_default()))),
        None => (
            "hooksConfig.enabled",
            Some("Gemini CLI not found on PATH: set hooksConfig.enabled (v0.26+); on older versions enable hooks under /settings → Advanced".into()),
        ),
    }
}

fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut it =
        v.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse::<u32>().ok());
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

/// Installs (or removes) Baton's hooks for `agent` in `file`.
pub fn install(agent: Agent, file: &Path, exe: &str, uninstall: bool) -> anyhow::Result<Change> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if uninstall {
                return Ok(Change { file: file.to_path_buf(), ..Default::default() });
            }
            String::new()
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    let mut doc: Value = if text.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON; fix it or move it away first", file.display()))?
    };
    let mut notes = Vec::new();
    let gemini_key = if agent == Agent::Gemini && !uninstall {
        let (key, note) = gemini_enable_key();
        notes.extend(note);
        Some(key)
    } else {
        None
    };
    let (added, removed) = apply(&mut doc, agent, exe, uninstall, gemini_key)?;
    let no_hooks = doc.get("hooks").and_then(Value::as_object).is_none_or(Map::is_empty);
    if agent == Agent::Gemini && uninstall && no_hooks && baton_made(file)? {
        // In a file Baton made, with no hooks left, the hooks switch is Baton's too.
        forget_gemini_switch(&mut doc);
    }
    // A file Baton created and has now emptied again goes away entirely.
    if uninstall && doc.as_object().is_some_and(Map::is_empty) && remove_if_baton_made(file)? {
        return Ok(Change { file: file.to_path_buf(), added, removed, notes });
    }
    save(file, &text, &format!("{}\n", serde_json::to_string_pretty(&doc)?))?;
    if !uninstall {
        match agent {
            Agent::Codex => notes.push(
                "Codex runs a new or changed hook only after you trust it: open /hooks in Codex and trust the Baton entries, or run `baton init codex --trust` (records that trust as /hooks does)".into(),
            ),
            Agent::Cursor => notes.push(
                "Cursor also loads Claude Code's hooks; Baton's Claude hooks stand down inside Cursor while these are installed, so nothing runs twice".into(),
            ),
            _ => {}
        }
    }
    Ok(Change { file: file.to_path_buf(), added, removed, notes })
}

/// Reads an agent's JSON settings file: `(its text, the document)`; a missing or empty
/// file is an empty object.
pub fn read_json(file: &Path) -> anyhow::Result<(String, Value)> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    if text.trim().is_empty() {
        return Ok((text, json!({})));
    }
    let doc: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON; fix it or move it away first", file.display()))?;
    if !doc.is_object() {
        anyhow::bail!("{} does not hold a JSON object", file.display());
    }
    Ok((text, doc))
}

/// Writes `new` over an agent's file that held `old`, when they differ: the user's
/// original is kept once beside it (`.baton-backup`, empty when there was no file) before
/// Baton first changes it, and the file is replaced whole (write, then rename).
pub fn save(file: &Path, old: &str, new: &str) -> anyhow::Result<()> {
    if new == old {
        return Ok(());
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // The file as it was before Baton first changed it; empty when Baton made it.
    // Both private: the agents' files can hold secrets (an MCP server's environment).
    let backup = backup_of(file);
    if !backup.exists() {
        crate::fsperm::write_private(&backup, old.as_bytes())?;
    }
    let mut tmp = file.as_os_str().to_owned();
    tmp.push(".baton-tmp");
    crate::fsperm::write_private(std::path::Path::new(&tmp), new.as_bytes())?;
    std::fs::rename(&tmp, file)?;
    Ok(())
}

/// Whether Baton made `file`: its backup is empty (there was no file), or there is none.
fn baton_made(file: &Path) -> anyhow::Result<bool> {
    let backup = backup_of(file);
    match std::fs::metadata(&backup) {
        Ok(m) => Ok(m.len() == 0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(e).with_context(|| format!("reading {}", backup.display())),
    }
}

/// Takes out the settings that turn Gemini's hooks on, and the objects they leave empty.
fn forget_gemini_switch(doc: &mut Value) {
    for (outer, inner) in [("hooksConfig", "enabled"), ("tools", "enableHooks")] {
        let Some(map) = doc.get_mut(outer).and_then(Value::as_object_mut) else { continue };
        map.remove(inner);
        if map.is_empty()
            && let Some(root) = doc.as_object_mut()
        {
            root.remove(outer);
        }
    }
}

/// Removes `file` (emptied of Baton's entries) and its backup when Baton made it. Returns
/// whether it did.
pub fn remove_if_baton_made(file: &Path) -> anyhow::Result<bool> {
    let made = baton_made(file)?;
    if made {
        let backup = backup_of(file);
        std::fs::remove_file(file).with_context(|| format!("removing {}", file.display()))?;
        let _ = std::fs::remove_file(&backup);
    }
    Ok(made)
}

pub fn backup_of(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".baton-backup");
    PathBuf::from(name)
}

/// Baton's hooks found in a settings file (event names).
pub fn installed(agent: Agent, file: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(file) else { return vec![] };
    let Ok(doc) = serde_json::from_str::<Value>(&text) else { return vec![] };
    let Some(hooks) = doc.get("hooks").and_then(Value::as_object) else { return vec![] };
    let mut events = Vec::new();
    for (event, list) in hooks {
        let text = list.to_string();
        if text.contains("baton") && text.contains(&format!(" hook {} ", agent.name())) {
            events.push(event.clone());
        }
    }
    events
}

/// Baton's hook groups in `file` whose matcher the agent can never match: Gemini compares
/// SessionStart's and PreCompress's matcher with the trigger as one exact string, so a
/// list such as `startup|resume|clear` never fires (Gemini CLI 0.61). (event, matcher).
pub fn never_matching(agent: Agent, file: &Path) -> Vec<(String, String)> {
    if agent != Agent::Gemini {
        return Vec::new();
    }
    let Ok(doc) =
        std::fs::read_to_string(file).map(|t| serde_json::from_str::<Value>(&t).unwrap_or(Value::Null))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for event in ["SessionStart", "PreCompress"] {
        for group in doc.pointer(&format!("/hooks/{event}")).and_then(Value::as_array).into_iter().flatten() {
            let ours = group.to_string().contains(&format!(" hook {} ", agent.name()));
            let matcher = group.get("matcher").and_then(Value::as_str).unwrap_or_default();
            if ours
                && !matcher.is_empty()
                && matcher != "*"
                && !matcher.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                out.push((event.to_owned(), matcher.to_owned()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A settings file Baton made is its own: its backup says there was none (empty; never
    /// Baton's own entries, though Baton writes such a file twice: hooks, then MCP rules),
    /// and uninstalling removes the file and the backup. A user's file stays.
    #[test]
    fn a_file_baton_made_is_removed_by_uninstall() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".claude/settings.json");
        install(Agent::Claude, &file, "/opt/baton", false).unwrap();
        let hooks = std::fs::read_to_string(&file).unwrap();
        // A second write of Baton's (the MCP permission rules), then taken back.
        save(&file, &hooks, "{\"permissions\": {}}\n").unwrap();
        assert_eq!(std::fs::read_to_string(backup_of(&file)).unwrap(), "", "nothing of Baton's backed up");
        save(&file, "{\"permissions\": {}}\n", &hooks).unwrap();
        install(Agent::Claude, &file, "/opt/baton", true).unwrap();
        assert!(!file.exists() && !backup_of(&file).exists(), "an emptied file Baton made is removed");

        let theirs = dir.path().join("theirs.json");
        std::fs::write(&theirs, "{}\n").unwrap();
        install(Agent::Claude, &theirs, "/opt/baton", false).unwrap();
        install(Agent::Claude, &theirs, "/opt/baton", true).unwrap();
        assert!(theirs.exists() && backup_of(&theirs).exists(), "the user's file and its backup stay");
    }

    #[test]
    fn merges_idempotently_and_uninstalls_exactly() {
        let original = json!({
            "model": "opus",
            "hooks": {
                "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "other-tool start"}]}],
                "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
            }
        });
        let mut doc = original.clone();
        let (added, removed) = apply(&mut doc, Agent::Claude, "/usr/bin/baton", false, None).unwrap();
        assert_eq!((added, removed), (11, 0));
        let once = doc.clone();
        let (added, removed) = apply(&mut doc, Agent::Claude, "/usr/bin/baton", false, None).unwrap();
        assert_eq!((added, removed), (11, 11));
        assert_eq!(doc, once, "a second install changes nothing");
        assert_eq!(doc["hooks"]["SessionStart"][0]["hooks"][0]["command"], "other-tool start");
        assert_eq!(
            doc["hooks"]["SessionStart"][1]["hooks"][0]["command"],
            "/usr/bin/baton hook claude SessionStart"
        );
        apply(&mut doc, Agent::Claude, "/usr/bin/baton", true, None).unwrap();
        assert_eq!(doc, original, "uninstall restores the original");
    }

    #[test]
    fn cursor_and_gemini_shapes() {
        let mut doc = json!({});
        apply(&mut doc, Agent::Cursor, "baton", false, None).unwrap();
        assert_eq!(doc["version"], 1);
        assert_eq!(doc["hooks"]["sessionStart"][0]["command"], "baton hook cursor sessionStart");
        let mut doc = json!({"tools": {"sandbox": true}});
        apply(&mut doc, Agent::Gemini, "baton", false, Some("hooksConfig.enabled")).unwrap();
        assert_eq!(doc["hooksConfig"]["enabled"], true);
        assert_eq!(doc["tools"]["sandbox"], true);
        assert_eq!(doc["hooks"]["AfterAgent"][0]["hooks"][0]["name"], "baton-afteragent");
        assert_eq!(doc["hooks"]["SessionStart"][0]["hooks"][0]["timeout"], 10_000);
        // Gemini matches SessionStart by exact string: no matcher, so every source fires it.
        assert!(doc["hooks"]["SessionStart"][0].get("matcher").is_none(), "{doc}");
        assert!(doc["hooks"].get("PreCompress").is_none(), "PreCompress fires on every request");
        assert_eq!(doc["hooks"]["BeforeAgent"][0]["hooks"][0]["command"], "baton hook gemini BeforeAgent");
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("0.25.1"), Some((0, 25, 1)));
        assert_eq!(parse_version("0.26"), Some((0, 26, 0)));
        assert_eq!(parse_version("nope"), None);
    }
}
