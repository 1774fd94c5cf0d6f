//! Registering `baton mcp` with each agent, with the permission each needs to call its
//! tools without asking (an agent that has a server but may not call it fails as silently
//! as an untrusted hook): merged into the agent's own files, idempotent, and removed by
//! `--uninstall`. What each agent reads was checked against the installed CLIs
//! (tests/agents/FINDINGS.md, "MCP"); Cursor's from its documentation.
//! Each agent's module says where its entry and permission go (`Spec::register_mcp`, with
//! the helpers here) and how to tell it may call them (`Spec::mcp_health`); the table is in
//! docs/client.md ("MCP").

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Map, Value, json};

use super::Scope;
use super::files::{read_json, remove_if_baton_made, save};
use crate::agents::Agent;

/// The server's name in the agents' configuration: its tools are `mcp__baton__<tool>`.
pub const NAME: &str = "baton";

/// The files holding the server's entry and the permission, by agent and scope.
pub struct Files {
    pub server: PathBuf,
    pub permission: PathBuf,
}

pub fn args(agent: Agent) -> Vec<String> {
    vec!["mcp".into(), "--agent".into(), agent.name().into()]
}

/// Whether a server entry is Baton's (a later `baton init` may replace it).
fn is_ours(entry: &Value) -> bool {
    entry.get("command").and_then(Value::as_str).is_some_and(|c| c.contains("baton"))
        && entry.get("args").and_then(|a| a.get(0)).and_then(Value::as_str) == Some("mcp")
}

/// What `register` changed.
#[derive(Debug, Default)]
pub struct Change {
    pub files: Vec<PathBuf>,
    pub notes: Vec<String>,
}

/// The command a project's MCP configuration names.
pub const COMMAND: &str = "baton";

/// Registers (or removes) `baton mcp` for `agent`; `exe` is this binary.
pub fn register(
    agent: Agent,
    scope: Scope,
    root: &Path,
    exe: &str,
    uninstall: bool,
) -> anyhow::Result<Change> {
    let files = agent.mcp_files(scope, root)?;
    // A project's files are committed and shared: they name `baton` by command (found on
    // each teammate's PATH), not by this machine's path.
    let exe = if scope == Scope::Project { COMMAND } else { exe };
    let mut change = Change { files: agent.register_mcp(scope, &files, exe, uninstall)?, notes: Vec::new() };
    if !uninstall {
        change.notes.extend(agent.mcp_note(scope).map(str::to_owned));
    }
    Ok(change)
}

/// Edits the server's file and then the permission's (the same file or another); returns
/// the files changed.
pub fn edit_both(
    files: &Files,
    server: impl FnOnce(&mut Map<String, Value>) -> anyhow::Result<()>,
    permission: impl FnOnce(&mut Map<String, Value>) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut changed = Vec::new();
    if edit_json(&files.server, server)? {
        changed.push(files.server.clone());
    }
    if edit_json(&files.permission, permission)? && files.permission != files.server {
        changed.push(files.permission.clone());
    }
    Ok(changed)
}

/// Applies `edit` to an agent's JSON file. A file that did not exist is not made just to
/// stay empty, and one Baton made (no backup of the user's) is removed once emptied.
/// Returns whether the file changed.
pub fn edit_json(
    file: &Path,
    edit: impl FnOnce(&mut Map<String, Value>) -> anyhow::Result<()>,
) -> anyhow::Result<bool> {
    let (text, mut doc) = read_json(file)?;
    let before = doc.clone();
    let root = doc.as_object_mut().context("object")?;
    edit(root)?;
    if doc == before {
        return Ok(false);
    }
    if doc.as_object().is_some_and(Map::is_empty) && remove_if_baton_made(file)? {
        return Ok(true);
    }
    save(file, &text, &format!("{}\n", serde_json::to_string_pretty(&doc)?))?;
    Ok(true)
}

/// The object at `key` in `root`, made when missing (and when not an object, refused).
fn object<'a>(root: &'a mut Map<String, Value>, key: &str) -> anyhow::Result<&'a mut Map<String, Value>> {
    root.entry(key)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .with_context(|| format!("\"{key}\" is not an object"))
}

fn list<'a>(root: &'a mut Map<String, Value>, key: &str) -> anyhow::Result<&'a mut Vec<Value>> {
    root.entry(key)
        .or_insert_with(|| Value::Array(vec![]))
        .as_array_mut()
        .with_context(|| format!("\"{key}\" is not a list"))
}

/// Adds `item` to the list at `key` once, or removes it; an emptied list goes away.
pub fn set_item(root: &mut Map<String, Value>, key: &str, item: &str, present: bool) -> anyhow::Result<()> {
    let items = list(root, key)?;
    items.retain(|v| v.as_str() != Some(item));
    if present {
        items.push(json!(item));
    }
    if items.is_empty() {
        root.remove(key);
    }
    Ok(())
}

/// Puts Baton's server under `mcpServers` (`command`, `args`, then `extra`'s fields), or
/// takes it out; refuses to replace a server of that name that is not Baton's.
pub fn set_server(
    doc: &mut Map<String, Value>,
    agent: Agent,
    exe: &str,
    extra: Value,
    uninstall: bool,
) -> anyhow::Result<()> {
    let servers = object(doc, "mcpServers")?;
    if let Some(existing) = servers.get(NAME)
        && !is_ours(existing)
    {
        anyhow::bail!(
            "an MCP server named \"{NAME}\" that is not Baton's is already configured; rename it first"
        );
    }
    servers.remove(NAME);
    if !uninstall {
        let mut entry = json!({ "command": exe, "args": args(agent) });
        if let (Some(entry), Value::Object(extra)) = (entry.as_object_mut(), extra) {
            entry.extend(extra);
        }
        servers.insert(NAME.into(), entry);
    }
    if servers.is_empty() {
        doc.remove("mcpServers");
    }
    Ok(())
}

/// Adds `rule` to `permissions.allow` once, or takes it out.
pub fn allow(doc: &mut Map<String, Value>, rule: &str, uninstall: bool) -> anyhow::Result<()> {
    let permissions = object(doc, "permissions")?;
    set_item(permissions, "allow", rule, !uninstall)?;
    if permissions.is_empty() {
        doc.remove("permissions");
    }
    Ok(())
}

/// Where `init` leaves a mark that the tools are registered for an agent: the brief says
/// so in one line only then (reading the agents' own files on every SessionStart would
/// cost the hook; `baton doctor` reads them).
pub fn marker(data_dir: &Path, agent: Agent) -> PathBuf {
    data_dir.join("mcp").join(agent.name())
}

pub fn mark(data_dir: &Path, agent: Agent, registered: bool) -> anyhow::Result<()> {
    let file = marker(data_dir, agent);
    if registered {
        crate::fsperm::create_private_dir(file.parent().context("marker dir")?)?;
        crate::fsperm::write_atomic(&file, b"", None)?;
    } else if std::fs::remove_file(&file).is_ok() {
        crate::fsperm::sync_dir(file.parent().context("marker dir")?)?;
    }
    Ok(())
}

/// What `baton doctor` says about the server for `agent`: `Ok(where)` when it is
/// registered and may be called, else why not.
pub fn health(agent: Agent, root: &Path) -> Result<String, String> {
    let mut found = None;
    for scope in [Scope::Project, Scope::User] {
        let Ok(files) = agent.mcp_files(scope, root) else { continue };
        if registered_in(agent, &files.server) {
            found = Some((scope, files));
            break;
        }
    }
    let Some((scope, files)) = found else {
        return Err(format!("not registered: run `baton init {}`", agent.name()));
    };

    agent.mcp_health(scope, root, &files).map(|()| files.server.display().to_string())
}

/// Whether `baton mcp` is registered for `agent` in either scope.
pub fn registered(agent: Agent, root: &Path) -> bool {
    [Scope::Project, Scope::User]
        .into_iter()
        .any(|scope| agent.mcp_files(scope, root).is_ok_and(|f| registered_in(agent, &f.server)))
}

fn registered_in(agent: Agent, file: &Path) -> bool {
    agent.mcp_registered(file)
}

/// Whether a JSON file names Baton's server under `mcpServers`.
pub fn in_json(file: &Path) -> bool {
    read_json(file).ok().is_some_and(|(_, doc)| doc.get("mcpServers").and_then(|s| s.get(NAME)).is_some())
}

pub fn rules(doc: &Value, key: &str) -> Vec<String> {
    doc.get("permissions")
        .and_then(|p| p.get(key))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::{claude, codex, cursor, gemini};

    fn read(file: &Path) -> Value {
        read_json(file).unwrap().1
    }

    #[test]
    fn claude_project_scope_registers_approves_and_allows_then_removes_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        let local = root.join(".claude/settings.local.json");
        std::fs::write(&local, r#"{"permissions": {"allow": ["Bash(ls)"]}, "model": "x"}"#).unwrap();
        for _ in 0..2 {
            let change = register(claude::AGENT, Scope::Project, root, "/opt/baton", false).unwrap();
            assert!(change.notes.iter().any(|n| n.contains("trust")), "{change:?}");
        }
        let mcp = read(&root.join(".mcp.json"));
        assert_eq!(
            mcp["mcpServers"]["baton"],
            json!({"command": "baton", "args": ["mcp", "--agent", "claude"], "type": "stdio"}),
            "a project's file (committed, shared) names baton by command, not this machine's path"
        );
        let settings = read(&local);
        assert_eq!(
            settings["permissions"]["allow"],
            json!(["Bash(ls)", "mcp__baton"]),
            "once, beside the user's"
        );
        assert_eq!(settings["enabledMcpjsonServers"], json!(["baton"]));
        assert_eq!(settings["model"], "x");

        register(claude::AGENT, Scope::Project, root, "/opt/baton", true).unwrap();
        assert!(!root.join(".mcp.json").exists(), "a file Baton made is removed once empty");
        assert_eq!(read(&local), json!({"permissions": {"allow": ["Bash(ls)"]}, "model": "x"}));
    }

    #[test]
    fn a_server_of_the_same_name_that_is_not_batons_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".mcp.json");
        let theirs = r#"{"mcpServers": {"baton": {"command": "npx", "args": ["baton-music"]}}}"#;
        std::fs::write(&file, theirs).unwrap();
        let err = register(claude::AGENT, Scope::Project, dir.path(), "/opt/baton", false).unwrap_err();
        assert!(format!("{err:#}").contains("not Baton's"), "{err:#}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), theirs);
    }

    #[test]
    fn codex_table_keeps_the_rest_of_config_toml() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        let before = "# my settings\nmodel = \"o4\"\n\n[mcp_servers.other]\ncommand = \"other\"\n";
        std::fs::write(&file, before).unwrap();
        assert!(codex::mcp::register(&file, "/opt/baton", false).unwrap());
        assert!(!codex::mcp::register(&file, "/opt/baton", false).unwrap(), "idempotent");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with(before.trim_end()), "{text}");
        let server = codex::mcp::server(&file).unwrap();
        assert_eq!(server["command"].as_str(), Some("/opt/baton"));
        assert_eq!(server["default_tools_approval_mode"].as_str(), Some("approve"));
        assert!(server["env_vars"].as_array().unwrap().iter().any(|v| v.as_str() == Some("BATON_SERVER")));
        assert!(codex::mcp::register(&file, "/opt/baton", true).unwrap());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
    }

    #[test]
    fn gemini_trusts_the_server_and_joins_a_kept_allow_list() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".gemini/settings.json");
        std::fs::create_dir_all(dir.path().join(".gemini")).unwrap();
        std::fs::write(&file, r#"{"mcp": {"allowed": ["github"]}}"#).unwrap();
        register(gemini::AGENT, Scope::Project, dir.path(), "/opt/baton", false).unwrap();
        let mut doc = read(&file);
        assert_eq!(doc["mcpServers"]["baton"]["trust"], json!(true));
        assert_eq!(doc["mcp"]["allowed"], json!(["github", "baton"]));
        std::fs::write(&file, doc.to_string()).unwrap();
        assert_eq!(gemini::mcp_health(&file), Ok(()));

        doc["mcp"]["excluded"] = json!(["baton"]);
        std::fs::write(&file, doc.to_string()).unwrap();
        assert!(gemini::mcp_health(&file).unwrap_err().contains("excluded"));
        doc["mcp"] = json!({"allowed": ["github"]});
        std::fs::write(&file, doc.to_string()).unwrap();
        assert!(gemini::mcp_health(&file).unwrap_err().contains("mcp.allowed"));
        doc["mcp"] = json!({});
        doc["mcpServers"]["baton"]["trust"] = json!(false);
        std::fs::write(&file, doc.to_string()).unwrap();
        assert!(gemini::mcp_health(&file).unwrap_err().contains("not trusted"));
    }

    #[test]
    fn cursor_gets_its_allow_rule_and_doctor_sees_a_deny() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        register(cursor::AGENT, Scope::Project, root, "/opt/baton", false).unwrap();
        assert_eq!(read(&root.join(".cursor/cli.json"))["permissions"]["allow"], json!(["Mcp(baton:*)"]));
        assert!(health(cursor::AGENT, root).is_ok());
        std::fs::write(
            root.join(".cursor/cli.json"),
            r#"{"permissions": {"allow": ["Mcp(baton:*)"], "deny": ["Mcp(baton:*)"]}}"#,
        )
        .unwrap();
        assert!(health(cursor::AGENT, root).unwrap_err().contains("denied"));
    }
}
