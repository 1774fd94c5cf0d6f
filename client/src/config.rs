//! Client configuration: `~/.config/baton/config.toml`, then the environment
//! (`BATON_SERVER`, `BATON_TOKEN`, `BATON_CA_CERT`), then flags — later wins.

use std::path::PathBuf;

use anyhow::Context;
use serde::Deserialize;

pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7437";

/// What the config file may hold.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub server: Option<String>,
    pub token: Option<String>,
    /// A CA certificate (PEM) to trust for an `https://` server, besides the system's roots.
    pub ca_cert: Option<PathBuf>,
    /// Auto-checkpoint every N tool calls (default 20; 0 = never).
    pub checkpoint_every: Option<u32>,
    /// A checkpoint after this many minutes of activity since the last one (default 30;
    /// 0 = never).
    pub checkpoint_minutes: Option<u32>,
    /// Brief budget in characters for `baton warmup` and hooks (default 9000); each agent's
    /// hooks also stay within what that agent shows inline (`brief_budgets`).
    pub brief_budget: Option<u32>,
    /// Per agent, the brief budget of its hooks in characters, e.g. `{ codex = 5000 }`
    /// (defaults: claude 9000, codex 6000, gemini 9000, cursor 9000).
    pub brief_budgets: Option<std::collections::BTreeMap<String, u32>>,
    /// Upload agent transcripts with checkpoints (`baton init claude --sync-transcripts`).
    pub sync_transcripts: Option<bool>,
    /// Summarize each session at its end and before a compaction with this agent's own CLI
    /// run headless with no tools: "claude" or "gemini" (off when absent; another agent's
    /// name is read but writes none, and `baton doctor` says why).
    pub summarize: Option<String>,
    /// The summarizer's time limit in seconds (default 120).
    pub summarize_seconds: Option<u64>,
}

/// The effective settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub server: String,
    pub token: Option<String>,
    pub ca_cert: Option<PathBuf>,
    pub checkpoint_every: u32,
    pub checkpoint_minutes: u32,
    pub brief_budget: u32,
    /// Per-agent hook budgets set in the config file (see `Settings::brief_budget`).
    pub brief_budgets: std::collections::BTreeMap<String, u32>,
    pub sync_transcripts: bool,
    /// The agent whose CLI writes session summaries (`crate::agents::summary`); `None` = off.
    pub summarize: Option<crate::agents::Agent>,
    pub summarize_seconds: u64,
    /// Where the queue, caches and local session state live.
    pub data_dir: PathBuf,
    pub config_file: PathBuf,
}

/// Baton's directories: `BATON_HOME` puts everything under one folder (tests, portable
/// setups); otherwise the platform's config and data directories.
pub fn dirs() -> anyhow::Result<(PathBuf, PathBuf)> {
    if let Some(home) = std::env::var_os("BATON_HOME") {
        let home = PathBuf::from(home);
        return Ok((home.join("config"), home.join("data")));
    }
    let dirs = directories::ProjectDirs::from("", "", "baton")
        .context("no home directory found (set HOME or BATON_HOME)")?;
    // Linux and macOS alike: ~/.config/baton for the config file, as documented.
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| directories::BaseDirs::new().map(|b| b.home_dir().join(".config")))
        .map_or_else(|| dirs.config_dir().to_path_buf(), |c| c.join("baton"));
    Ok((config, dirs.data_dir().to_path_buf()))
}

impl Settings {
    /// The brief budget of `agent`'s hooks: `brief_budgets.<agent>` from the config, else
    /// the smaller of `brief_budget` and the agent's own, never past `MAX_BRIEF_CHARS`.
    pub fn brief_budget(&self, agent: crate::agents::Agent) -> usize {
        let configured = self.brief_budgets.get(agent.name()).map(|b| *b as usize);
        configured
            .unwrap_or_else(|| (self.brief_budget as usize).min(agent.default_budget()))
            .min(crate::agents::Agent::MAX_BRIEF_CHARS)
    }

    /// Loads the file (if any), then the environment, then the flags.
    pub fn load(
        server_flag: Option<&str>,
        token_flag: Option<&str>,
        ca_flag: Option<&std::path::Path>,
    ) -> anyhow::Result<Self> {
        let (config_dir, data_dir) = dirs()?;
        let config_file = config_dir.join("config.toml");
        let file = match std::fs::read_to_string(&config_file) {
            Ok(text) => toml::from_str::<FileConfig>(&text)
                .with_context(|| format!("{} is not a valid Baton config", config_file.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileConfig::default(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", config_file.display())),
        };
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let server = server_flag
            .map(str::to_owned)
            .or_else(|| env("BATON_SERVER"))
            .or(file.server)
            .unwrap_or_else(|| DEFAULT_SERVER.to_owned());
        let server = server_url(&server)?;
        let token = token_flag.map(str::to_owned).or_else(|| env("BATON_TOKEN")).or(file.token);
        let ca_cert =
            ca_flag.map(PathBuf::from).or_else(|| env("BATON_CA_CERT").map(PathBuf::from)).or(file.ca_cert);
        Ok(Self {
            server,
            token,
            ca_cert,
            checkpoint_every: file.checkpoint_every.unwrap_or(20),
            checkpoint_minutes: file.checkpoint_minutes.unwrap_or(30),
            brief_budget: file.brief_budget.unwrap_or(9000).clamp(500, 100_000),
            brief_budgets: file
                .brief_budgets
                .unwrap_or_default()
                .into_iter()
                .map(|(agent, chars)| (agent, chars.clamp(500, 100_000)))
                .collect(),
            sync_transcripts: file.sync_transcripts.unwrap_or(false),
            summarize: match file.summarize.as_deref().map(str::trim) {
                None | Some("" | "off" | "none") => None,
                Some(name) => Some(crate::agents::Agent::from_name(name).with_context(|| {
                    format!(
                        "{}: summarize = {name:?}: use {} (or leave it out)",
                        config_file.display(),
                        crate::agents::summary::offered()
                    )
                })?),
            },
            summarize_seconds: file.summarize_seconds.unwrap_or(120).clamp(10, 1800),
            data_dir,
            config_file,
        })
    }
}

/// The hub's URL: `http://` or `https://`; an address without a scheme (`127.0.0.1:7437`,
/// the form `baton-server --listen` takes) is `http://`.
pub fn server_url(given: &str) -> anyhow::Result<String> {
    let given = given.trim();
    match given.split_once("://") {
        None => Ok(format!("http://{given}")),
        Some((scheme, rest)) if matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") => {
            Ok(format!("{}://{rest}", scheme.to_ascii_lowercase()))
        }
        Some((scheme, _)) => anyhow::bail!(
            "server {given:?}: a Baton hub is reached over http:// or https://, not {scheme}:// (e.g. http://127.0.0.1:7437)"
        ),
    }
}

/// Sets one key of the config file, keeping the rest as it is.
pub fn set_key(file: &std::path::Path, key: &str, value: toml::Value) -> anyhow::Result<()> {
    let mut table: toml::Table = match std::fs::read_to_string(file) {
        Ok(text) => text.parse().with_context(|| format!("{} is not valid TOML", file.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => toml::Table::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    table.insert(key.to_owned(), value);
    if let Some(dir) = file.parent() {
        crate::fsperm::create_private_dir(dir)?;
    }
    crate::fsperm::write_atomic(file, toml::to_string(&table)?.as_bytes(), None)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_address_without_a_scheme_is_http() {
        assert_eq!(server_url("127.0.0.1:7437").unwrap(), "http://127.0.0.1:7437");
        assert_eq!(server_url(" https://hub:7437 ").unwrap(), "https://hub:7437");
        assert_eq!(server_url("http://[::1]:7437").unwrap(), "http://[::1]:7437");
        assert_eq!(server_url("HTTP://hub:7437").unwrap(), "http://hub:7437");
        let refused = server_url("grpc://hub:7437").unwrap_err().to_string();
        assert!(refused.contains("not grpc://"), "{refused}");
    }
}
