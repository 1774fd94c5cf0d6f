//! Installing Baton's hooks into each agent's own settings file: merged with what is
//! there, idempotent, and reversible (`--uninstall` removes exactly Baton's entries).
//!
//! Baton's entries are recognised by their command (`… baton … hook <agent> <Event>`), so
//! nothing else in the file is touched and a reinstall replaces rather than duplicates.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{Map, Value, json};

use super::Agent;
use super::files::{baton_made, remove_if_baton_made, save};

/// The command a hook runs: this very binary, so hooks work whatever PATH the agent has.
pub fn hook_command(exe: &str, agent: Agent, event: &str) -> String {
    let exe = if exe.contains(' ') { format!("'{exe}'") } else { exe.to_owned() };
    format!("{exe} hook {} {event}", agent.name())
}

/// Whether a handler command is one of Baton's for `agent`.
pub fn is_ours(command: &str, agent: Agent) -> bool {
    command.contains("baton") && command.contains(&format!(" hook {} ", agent.name()))
}

/// Removes Baton's handlers of `agent` from one event's list; drops emptied groups.
fn strip(list: &mut Vec<Value>, agent: Agent) -> usize {
    let mut removed = 0;
    if !agent.grouped_hooks() {
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
    switch: Option<&str>,
) -> anyhow::Result<(usize, usize)> {
    if !doc.is_object() {
        anyhow::bail!("the settings file does not hold a JSON object");
    }
    let root = doc.as_object_mut().context("object")?;
    agent.fill_settings(root);
    let hooks = root.entry("hooks").or_insert_with(|| Value::Object(Map::new()));
    let hooks = hooks.as_object_mut().context("\"hooks\" is not an object")?;
    let mut removed = 0;
    let mut added = 0;
    for spec in agent.hooks() {
        let list = hooks.entry(spec.event).or_insert_with(|| Value::Array(vec![]));
        let list = list.as_array_mut().with_context(|| format!("\"hooks.{}\" is not a list", spec.event))?;
        removed += strip(list, agent);
        if !uninstall {
            let h = agent.handler(spec, hook_command(exe, agent, spec.event));
            if agent.grouped_hooks() {
                let mut group = Map::new();
                if let Some(m) = spec.matcher {
                    group.insert("matcher".into(), json!(m));
                }
                group.insert("hooks".into(), json!([h]));
                list.push(Value::Object(group));
            } else {
                list.push(h);
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
    if !uninstall && let Some(key) = switch {
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
    let switch = if uninstall { None } else { agent.hooks_switch() };
    let key = switch.map(|(key, note)| {
        notes.extend(note);
        key
    });
    let (added, removed) = apply(&mut doc, agent, exe, uninstall, key)?;
    let no_hooks = doc.get("hooks").and_then(Value::as_object).is_none_or(Map::is_empty);
    if uninstall && no_hooks && baton_made(file)? {
        // In a file Baton made, with no hooks left, a hooks switch is Baton's too.
        agent.forget_hooks_switch(&mut doc);
    }
    // A file Baton created and has now emptied again goes away entirely.
    if uninstall && doc.as_object().is_some_and(Map::is_empty) && remove_if_baton_made(file)? {
        return Ok(Change { file: file.to_path_buf(), added, removed, notes });
    }
    save(file, &text, &format!("{}\n", serde_json::to_string_pretty(&doc)?))?;
    if !uninstall {
        notes.extend(agent.install_note().map(str::to_owned));
    }
    Ok(Change { file: file.to_path_buf(), added, removed, notes })
}

/// Baton's hooks found in a settings file (event names).
pub fn installed(agent: Agent, file: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(file) else { return vec![] };
    let Ok(doc) = serde_json::from_str::<Value>(&text) else { return vec![] };
    installed_in(agent, &doc)
}

/// Baton's hooks in a settings document (event names).
pub fn installed_in(agent: Agent, doc: &Value) -> Vec<String> {
    let Some(hooks) = doc.get("hooks").and_then(Value::as_object) else { return vec![] };
    let mut events = Vec::new();
    for (event, list) in hooks {
        if is_ours(&list.to_string(), agent) {
            events.push(event.clone());
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::files::backup_of;
    use crate::agents::{claude, cursor, gemini};

    /// A settings file Baton made is its own: its backup says there was none (empty; never
    /// Baton's own entries, though Baton writes such a file twice: hooks, then MCP rules),
    /// and uninstalling removes the file and the backup. A user's file stays.
    #[test]
    fn a_file_baton_made_is_removed_by_uninstall() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".claude/settings.json");
        install(claude::AGENT, &file, "/opt/baton", false).unwrap();
        let hooks = std::fs::read_to_string(&file).unwrap();
        // A second write of Baton's (the MCP permission rules), then taken back.
        save(&file, &hooks, "{\"permissions\": {}}\n").unwrap();
        assert_eq!(std::fs::read_to_string(backup_of(&file)).unwrap(), "", "nothing of Baton's backed up");
        save(&file, "{\"permissions\": {}}\n", &hooks).unwrap();
        install(claude::AGENT, &file, "/opt/baton", true).unwrap();
        assert!(!file.exists() && !backup_of(&file).exists(), "an emptied file Baton made is removed");

        let theirs = dir.path().join("theirs.json");
        std::fs::write(&theirs, "{}\n").unwrap();
        install(claude::AGENT, &theirs, "/opt/baton", false).unwrap();
        install(claude::AGENT, &theirs, "/opt/baton", true).unwrap();
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
        let (added, removed) = apply(&mut doc, claude::AGENT, "/usr/bin/baton", false, None).unwrap();
        assert_eq!((added, removed), (11, 0));
        let once = doc.clone();
        let (added, removed) = apply(&mut doc, claude::AGENT, "/usr/bin/baton", false, None).unwrap();
        assert_eq!((added, removed), (11, 11));
        assert_eq!(doc, once, "a second install changes nothing");
        assert_eq!(doc["hooks"]["SessionStart"][0]["hooks"][0]["command"], "other-tool start");
        assert_eq!(
            doc["hooks"]["SessionStart"][1]["hooks"][0]["command"],
            "/usr/bin/baton hook claude SessionStart"
        );
        apply(&mut doc, claude::AGENT, "/usr/bin/baton", true, None).unwrap();
        assert_eq!(doc, original, "uninstall restores the original");
    }

    #[test]
    fn cursor_and_gemini_shapes() {
        let mut doc = json!({});
        apply(&mut doc, cursor::AGENT, "baton", false, None).unwrap();
        assert_eq!(doc["version"], 1);
        assert_eq!(doc["hooks"]["sessionStart"][0]["command"], "baton hook cursor sessionStart");
        let mut doc = json!({"tools": {"sandbox": true}});
        apply(&mut doc, gemini::AGENT, "baton", false, Some("hooksConfig.enabled")).unwrap();
        assert_eq!(doc["hooksConfig"]["enabled"], true);
        assert_eq!(doc["tools"]["sandbox"], true);
        assert_eq!(doc["hooks"]["AfterAgent"][0]["hooks"][0]["name"], "baton-afteragent");
        assert_eq!(doc["hooks"]["SessionStart"][0]["hooks"][0]["timeout"], 10_000);
        // Gemini matches SessionStart by exact string: no matcher, so every source fires it.
        assert!(doc["hooks"]["SessionStart"][0].get("matcher").is_none(), "{doc}");
        assert!(doc["hooks"].get("PreCompress").is_none(), "PreCompress fires on every request");
        assert_eq!(doc["hooks"]["BeforeAgent"][0]["hooks"][0]["command"], "baton hook gemini BeforeAgent");
    }
}
