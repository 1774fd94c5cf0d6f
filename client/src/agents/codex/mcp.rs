//! Codex's `[mcp_servers.baton]` table in `config.toml`, with the approval mode that lets its
//! tools run without a prompt per call.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;

use crate::agents::files::save;
use crate::agents::mcp::{NAME, args};

/// Baton's variables, passed through by Codex (which gives servers only an allowlist).
const BATON_VARS: [&str; 6] =
    ["BATON_SERVER", "BATON_TOKEN", "BATON_CA_CERT", "BATON_HOME", "BATON_HOST", "XDG_CONFIG_HOME"];

/// Codex's `[mcp_servers.baton]` table, edited as text so that the rest of the user's
/// config.toml (comments, order) stays as it is; the result is parsed to check it.
pub fn register(file: &Path, exe: &str, uninstall: bool) -> anyhow::Result<bool> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if uninstall {
                return Ok(false);
            }
            String::new()
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    let table: toml::Table = text.parse().with_context(|| format!("{} is not valid TOML", file.display()))?;
    if let Some(existing) = table.get("mcp_servers").and_then(|s| s.get(NAME)) {
        let ours = existing.get("command").and_then(toml::Value::as_str).is_some_and(|c| c.contains("baton"));
        anyhow::ensure!(
            ours,
            "{} has an MCP server named \"{NAME}\" that is not Baton's; rename it first",
            file.display()
        );
    }
    let mut kept = String::new();
    let mut skipping = false;
    for line in text.lines() {
        let header = line.trim();
        if header.starts_with('[') {
            skipping = header == format!("[mcp_servers.{NAME}]")
                || header.starts_with(&format!("[mcp_servers.{NAME}."));
        }
        if !skipping {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    let mut new = kept.trim_end().to_owned();
    if !uninstall {
        let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
        let args: Vec<String> = args(super::AGENT).iter().map(|a| quote(a)).collect();
        let vars: Vec<String> = BATON_VARS.iter().map(|v| quote(v)).collect();
        if !new.is_empty() {
            new.push_str("\n\n");
        }
        let _ = write!(
            new,
            "[mcp_servers.{NAME}]\ncommand = {}\nargs = [{}]\n# Baton's own settings, when set in the environment (Codex passes servers only a few variables).\nenv_vars = [{}]\n# Baton's tools read and write Baton's memory only: no approval prompt for each call.\ndefault_tools_approval_mode = \"approve\"\n",
            quote(exe),
            args.join(", "),
            vars.join(", ")
        );
    } else if !new.is_empty() {
        new.push('\n');
    }
    let parsed: toml::Table =
        new.parse().with_context(|| format!("{} would not stay valid TOML", file.display()))?;
    let server = parsed.get("mcp_servers").and_then(|s| s.get(NAME));
    anyhow::ensure!(server.is_some() != uninstall, "changing {} did not take", file.display());
    if new.trim() == text.trim() {
        return Ok(false);
    }
    save(file, &text, &new)?;
    Ok(true)
}

pub fn server(file: &Path) -> Option<toml::Value> {
    let table: toml::Table = std::fs::read_to_string(file).ok()?.parse().ok()?;
    table.get("mcp_servers")?.get(NAME).cloned()
}

/// Whether the table lets the tools run without a prompt per call.
pub fn approved(file: &Path) -> bool {
    server(file)
        .and_then(|s| s.get("default_tools_approval_mode").and_then(toml::Value::as_str).map(str::to_owned))
        .is_some_and(|m| m == "approve")
}
