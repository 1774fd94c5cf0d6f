//! The git pre-commit hook (`baton init AGENT --pre-commit`): a commit touching files another
//! session has reserved is refused (the project's setting deny) or warned about (warn), with
//! the pre-tool hook's message. Other sessions are those of other users or hosts: the commit
//! of an agent's conversation (found by process ancestry) or of its person on this machine
//! passes its own reservations. With the hub unreachable it lets the commit through.

use std::path::Path;
use std::process::Command;

use baton_proto::v1::{ListReservationsRequest, ListSessionsRequest, ReservationStatus, SessionStatus};

use crate::hook::reserved::{Verdict, verdict};
use crate::hub::remote::{self, Timeouts};
use crate::outbox::write;
use crate::project::git;
use crate::{ctx::Ctx, project};

/// The hook (`cmd::githook`).
pub const HOOK: super::githook::Hook<'static> = super::githook::Hook {
    name: "pre-commit",
    does: "a commit touching files another session reserved is refused (deny) or warned about (warn); \
           `git commit --no-verify` skips it",
    chain: "check reservations",
    then: " || exit 1",
};

/// The files a commit about to be made changes, repository-relative.
fn staged(root: &Path) -> anyhow::Result<Vec<String>> {
    let out = Command::new("git")
        .args(["diff", "--cached", "--name-only", "-z", "--no-renames"])
        .current_dir(root)
        .output()?;
    if !out.status.success() {
        anyhow::bail!("git diff --cached failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}

/// `baton pre-commit`: the hook's check. An error refuses the commit.
pub async fn run(ctx: &Ctx, dir: &Path) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let paths = staged(&project.root)?;
    if paths.is_empty() {
        return Ok(());
    }
    let Ok(mut hub) = remote::connect(&ctx.settings, Timeouts::HOOK).await else {
        eprintln!("baton: the hub cannot be reached: reservations not checked; committing");
        return Ok(());
    };
    let mut own: Vec<String> = crate::usecase::workspace::conversation(ctx, None, &project.key)
        .map(|c| c.record.baton_session_id)
        .into_iter()
        .collect();
    if own.is_empty() {
        // A person committing: their own agents' sessions on this machine are theirs.
        let request = ListSessionsRequest {
            project: project.key.clone(),
            statuses: vec![
                SessionStatus::Active as i32,
                SessionStatus::Idle as i32,
                SessionStatus::Initializing as i32,
            ],
            host: write::hostname(),
            user: write::user(),
            page_size: 200,
            ..Default::default()
        };
        if let Ok(reply) = hub.sessions.list_sessions(request).await {
            own.extend(reply.into_inner().sessions.into_iter().map(|s| s.id));
        }
    }
    let request = ListReservationsRequest {
        project: project.key.clone(),
        paths: paths.clone(),
        branch: git::info(dir).branch.unwrap_or_default(),
        page_size: 50,
        ..Default::default()
    };
    let reply = match hub.reservations.list_reservations(request).await {
        Ok(r) => r.into_inner(),
        Err(status) if remote::is_transient(&status) => {
            eprintln!("baton: the hub cannot be reached: reservations not checked; committing");
            return Ok(());
        }
        Err(status) => return Err(remote::fail(status)),
    };
    let others: Vec<_> = reply
        .reservations
        .into_iter()
        .filter(|r| r.status == ReservationStatus::Held as i32 && !own.contains(&r.session_id))
        .collect();
    let enforcement = reply.settings.map_or(0, |s| s.enforcement);
    match verdict(&paths, &others, enforcement, None) {
        None => Ok(()),
        Some(Verdict::Warn(text)) => {
            eprintln!("{}", crate::safe::text(&text));
            Ok(())
        }
        Some(Verdict::Deny(text)) => {
            let text = text.replace("refused this edit", "refused this commit");
            anyhow::bail!("{text}\nTo commit anyway: git commit --no-verify")
        }
    }
}
