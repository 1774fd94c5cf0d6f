//! Baton's git hooks in a repository (`baton init AGENT --pre-commit`, `--post-commit`): a
//! small script calling this `baton`, marked as Baton's so that `--uninstall` removes exactly
//! it; another tool's hook of the same name is left alone.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One of Baton's git hooks.
pub struct Hook<'a> {
    /// git's name for it: `pre-commit`, `post-commit`.
    pub name: &'a str,
    /// What it does, for the script's comment and init's note.
    pub does: &'a str,
    /// What calling it from another hook of the same name is for.
    pub chain: &'a str,
    /// What follows the call there (` || exit 1`: its refusal stops the commit).
    pub then: &'a str,
}

impl Hook<'_> {
    fn mark(&self) -> String {
        format!("# Installed by `baton init --{}`", self.name)
    }

    /// The hook script, calling this `baton`.
    fn script(&self, exe: &str) -> String {
        format!(
            "#!/bin/sh\n{}: {}.\n# Remove it with `baton init <agent> --uninstall`.\nexec {} {}\n",
            self.mark(),
            self.does,
            crate::safe::shell_line(&[exe.to_owned()]),
            self.name
        )
    }

    /// Installs (or, with `uninstall`, removes) the hook; what it did, for init's notes.
    pub fn install(&self, root: &Path, exe: &str, uninstall: bool) -> anyhow::Result<Option<String>> {
        let dir = match hooks_dir(root) {
            Ok(dir) => dir,
            Err(_) if uninstall => return Ok(None),
            Err(e) => return Err(e),
        };
        let file = dir.join(self.name);
        let existing = std::fs::read_to_string(&file).ok();
        let ours = existing.as_deref().is_some_and(|t| t.contains(&self.mark()));
        if uninstall {
            if ours {
                std::fs::remove_file(&file)?;
                crate::fsperm::sync_dir(&dir)?;
                return Ok(Some(format!("removed Baton's git {} hook {}", self.name, file.display())));
            }
            return Ok(None);
        }
        if existing.is_some() && !ours {
            return Ok(Some(format!(
                "{} is another {} hook: left as it is. To {} too, add this line to it: {} {}{}",
                file.display(),
                self.name,
                self.chain,
                crate::safe::shell_line(&[exe.to_owned()]),
                self.name,
                self.then
            )));
        }
        crate::fsperm::create_dir(&dir, 0o777)?;
        // Never half a script for git to run, nor one without Baton's mark.
        crate::fsperm::write_atomic(&file, self.script(exe).as_bytes(), Some(0o755))?;
        Ok(Some(format!("git {} hook {}: {}", self.name, file.display(), self.does)))
    }
}

/// The repository's hooks directory (`core.hooksPath` honoured, worktrees too).
fn hooks_dir(root: &Path) -> anyhow::Result<PathBuf> {
    let out = Command::new("git").args(["rev-parse", "--git-path", "hooks"]).current_dir(root).output()?;
    if !out.status.success() {
        anyhow::bail!("git hooks need a git repository; {} is not one", root.display());
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Ok(if dir.is_absolute() { dir } else { root.join(dir) })
}
