//! Reservations as the front ends share them (`baton reserve`, the MCP tools, the pre-tool
//! hook): a path given here made repository-relative (never outside the repository, through
//! `..` or a symlink), the session that holds, and how a holder is named to people and
//! models.

use std::path::{Component, Path, PathBuf};

use baton_proto::v1::{Blocker, Reservation, ReservationStatus};

use crate::ctx::Ctx;
use crate::hub::remote::Hub;
use crate::view;

/// `path` (relative to `cwd`, or absolute) as the hub stores it: relative to the
/// repository's `root`, '/'-separated. Refused when it leaves the repository, lexically or
/// through a symlink on the way, or names the repository itself.
pub fn repo_path(root: &Path, cwd: &Path, path: &str) -> anyhow::Result<String> {
    if path.is_empty() {
        anyhow::bail!("an empty path names nothing: give a file or directory inside the repository");
    }
    let joined = if Path::new(path).is_absolute() { PathBuf::from(path) } else { cwd.join(path) };
    let mut parts: Vec<String> = Vec::new();
    let root_real = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let lexical = normalize(&joined);
    let inside = lexical
        .strip_prefix(root)
        .or_else(|_| lexical.strip_prefix(&root_real))
        .map_err(|_| anyhow::anyhow!("{path:?} is outside the repository {}", root.display()))?;
    for c in inside.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            _ => anyhow::bail!("{path:?} is not a plain path inside the repository"),
        }
    }
    if parts.is_empty() {
        anyhow::bail!("{path:?} is the repository itself: name a file or directory inside it");
    }
    // The longest part of it that exists, with its symlinks followed, must stay inside too.
    let mut probe = root_real.clone();
    for p in &parts {
        let next = probe.join(p);
        if next.symlink_metadata().is_err() {
            break;
        }
        let real = std::fs::canonicalize(&next)
            .map_err(|e| anyhow::anyhow!("{path:?}: cannot follow {}: {e}", next.display()))?;
        if !real.starts_with(&root_real) {
            anyhow::bail!("{path:?} leads outside the repository (through the symlink {})", next.display());
        }
        probe = real;
    }
    Ok(parts.join("/"))
}

/// `..` and `.` taken out without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The session that holds for a command run here: the one named (a unique part of its id),
/// else the agent conversation running this command (process ancestry, as `baton mcp`
/// finds its own).
pub async fn session(ctx: &Ctx, hub: &mut Hub, project: &str, named: Option<&str>) -> anyhow::Result<String> {
    if let Some(s) = named {
        return crate::usecase::sessions::resolve(hub, project, s).await;
    }
    match crate::usecase::workspace::conversation(ctx, None, project) {
        Some(c) => Ok(c.record.baton_session_id),
        None => anyhow::bail!(
            "no agent conversation of this project runs this command: run it from the agent's shell, or name the \
             session with --session ID (see baton sessions)"
        ),
    }
}

/// What a reservation is on, as people read it.
pub fn target(r: &Reservation) -> String {
    if r.path.is_empty() {
        format!("task {:?}", crate::safe::line(&r.task))
    } else {
        crate::safe::line(&r.path).into_owned()
    }
}

/// Who holds (or waits for) a reservation, in one line: agent, user, host, session, since
/// when, and why.
pub fn holder_line(r: &Reservation) -> String {
    let h = r.holder.clone().unwrap_or_default();
    let since = view::age(r.granted_at.as_ref().or(r.created_at.as_ref()));
    let mut line = format!(
        "{} of {} on {} (session {}), since {since}",
        nonempty(view::agent(h.agent), "an agent"),
        nonempty(&crate::safe::line(&h.user), "someone"),
        nonempty(&crate::safe::line(&h.host), "an unknown host"),
        view::short(&r.session_id),
    );
    if !r.branch.is_empty() {
        line = format!("{line}, on branch {}", crate::safe::line(&r.branch));
    }
    if !r.reason.is_empty() {
        line = format!("{line}: {}", crate::text::clip(&crate::safe::line(&r.reason), 200));
    }
    line
}

fn nonempty<'a>(s: &'a str, or: &'a str) -> &'a str {
    if s.is_empty() { or } else { s }
}

/// A refusal, one line per blocker.
pub fn blocked_text(blockers: &[Blocker]) -> String {
    blockers
        .iter()
        .filter_map(|b| {
            let r = b.reservation.as_ref()?;
            let how =
                if r.status == ReservationStatus::Waiting as i32 { "is waited for by" } else { "is held by" };
            Some(format!("{} {how} {}", crate::safe::line(&b.requested), holder_line(r)))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A status as people read it.
pub fn status(s: i32) -> String {
    ReservationStatus::try_from(s)
        .unwrap_or_default()
        .as_str_name()
        .trim_start_matches("RESERVATION_STATUS_")
        .to_ascii_lowercase()
        .replace('_', " ")
}

/// A reservation as `--json` prints it.
pub fn json(r: &Reservation) -> serde_json::Value {
    let h = r.holder.clone().unwrap_or_default();
    serde_json::json!({
        "id": r.id,
        "session_id": r.session_id,
        "path": (!r.path.is_empty()).then_some(&r.path),
        "task": (!r.task.is_empty()).then_some(&r.task),
        "branch": r.branch,
        "reason": r.reason,
        "status": status(r.status),
        "agent": view::agent(h.agent),
        "host": h.host,
        "user": h.user,
        "granted_at": view::time(r.granted_at.as_ref()),
        "expires_at": view::time(r.expires_at.as_ref()),
        "ended_at": view::time(r.ended_at.as_ref()),
        "ended_by_session_id": (!r.ended_by_session_id.is_empty()).then_some(&r.ended_by_session_id),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_repository() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join("src/auth")).unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("src/out")).unwrap();
        let sub = root.join("src");
        assert_eq!(repo_path(&root, &sub, "auth/jwt.rs").unwrap(), "src/auth/jwt.rs");
        assert_eq!(repo_path(&root, &sub, "./auth//../auth/").unwrap(), "src/auth");
        assert_eq!(repo_path(&root, &root, &root.join("src").display().to_string()).unwrap(), "src");
        for bad in ["../../etc/passwd", "/etc/passwd", "..", "", "out/x.rs", "out"] {
            assert!(repo_path(&root, &sub, bad).is_err(), "{bad:?}");
        }
        assert!(repo_path(&root, &root, ".").is_err(), "the repository itself");
        assert!(repo_path(&root, &sub, "out/new-file.rs").unwrap_err().to_string().contains("symlink"));
    }
}
