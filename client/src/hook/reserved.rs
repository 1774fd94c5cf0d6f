//! Reservations at the hooks. Before a tool call that writes files, its paths are checked
//! against what other sessions hold: per the project's setting the model is warned, or the
//! call refused, with the holder named and what to do instead; the session's own
//! reservations never stand in its way. With the hub unreachable the hook fails open: it
//! warns from the last view it kept (marked with its age) and never refuses. After tool
//! calls, the session's reservations are renewed (at most every `RENEW_EVERY`) and the
//! model is told of any it lost, and to whom.

use baton_proto::v1::{
    ListReservationsRequest, RenewReservationsRequest, Reservation, ReservationEnforcement, ReservationStatus,
};

use super::session::conversation_project;
use super::writes;
use crate::agents::Agent;
use crate::agents::payload::Payload;
use crate::ctx::{Ctx, log};
use crate::hub::remote::{self, Hub, Timeouts};
use crate::project::git;
use crate::usecase::reservations::{holder_line, repo_path, target};

/// How often a conversation's reservations are renewed, at most (their time to live is
/// minutes: one renewal per 10 s of tool calls keeps them, and costs the hub little).
pub const RENEW_EVERY: i64 = 10_000_000;

pub use crate::agents::Verdict;

/// The check before a tool call: `None` when it writes nothing another session holds.
pub(super) async fn check(ctx: &Ctx, agent: Agent, p: &Payload) -> Option<Verdict> {
    let cwd = p.cwd();
    let (raw, dir) = writes::planned(p, &cwd);
    if raw.is_empty() {
        return None;
    }
    let sid = p.agent_session_id()?;
    let (project, known) = conversation_project(ctx, agent, sid, &cwd);
    let mut paths: Vec<String> = raw.iter().filter_map(|r| repo_path(&project.root, &dir, r).ok()).collect();
    paths.sort();
    paths.dedup();
    if paths.is_empty() {
        return None;
    }
    let own = known.map(|s| s.baton_session_id).unwrap_or_default();
    let branch = git::info(&dir).branch.unwrap_or_default();
    let request = ListReservationsRequest {
        project: project.key.clone(),
        paths: paths.clone(),
        branch,
        page_size: 20,
        ..Default::default()
    };
    let mut hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
    let asked = match hub.as_mut() {
        Some(hub) => hub.reservations.list_reservations(request).await,
        None => Err(tonic::Status::unavailable("the hub cannot be reached")),
    };
    match asked {
        Ok(reply) => {
            let reply = reply.into_inner();
            let others: Vec<Reservation> =
                reply.reservations.iter().filter(|r| held_by_other(r, &own)).cloned().collect();
            let settings = reply.settings.unwrap_or_default();
            if others.is_empty()
                && settings.auto_reserve
                && !own.is_empty()
                && let Some(hub) = hub.as_mut()
            {
                let mine: Vec<&str> = reply
                    .reservations
                    .iter()
                    .filter(|r| r.session_id == own)
                    .map(|r| r.path.as_str())
                    .collect();
                let new: Vec<String> =
                    paths.iter().filter(|p| !mine.iter().any(|m| overlaps(m, p))).cloned().collect();
                auto_reserve(ctx, hub, &project.key, &own, new, Vec::new()).await;
            }
            verdict(&paths, &others, settings.enforcement, None)
        }
        Err(status) if remote::is_transient(&status) => {
            let cached = crate::local::reserved::load(&ctx.settings.data_dir, &project.key)?;
            let now = crate::clock::now_us();
            let others: Vec<Reservation> = cached
                .reservations()
                .into_iter()
                .filter(|r| held_by_other(r, &own))
                .filter(|r| r.expires_at.as_ref().is_some_and(|t| t.seconds * 1_000_000 > now))
                .filter(|r| paths.iter().any(|p| overlaps(&r.path, p)))
                .collect();
            let age = crate::text::ago(now - cached.seen_at_us);
            verdict(&paths, &others, ReservationEnforcement::Warn as i32, Some(&age))
        }
        Err(status) => {
            log(ctx, &format!("reservation check refused: {}", remote::explain(&status)));
            None
        }
    }
}

/// Reserves for the session what it starts on (auto-reservations, a project's opt-in):
/// files it is about to edit, tasks it marks in progress. Best effort: a refusal (someone
/// got there first) is the pre-tool check's to report, and is logged.
pub(super) async fn auto_reserve(
    ctx: &Ctx,
    hub: &mut Hub,
    project: &str,
    session_id: &str,
    paths: Vec<String>,
    tasks: Vec<String>,
) {
    if paths.is_empty() && tasks.is_empty() {
        return;
    }
    let request = baton_proto::v1::ReserveRequest {
        project: project.to_owned(),
        session_id: session_id.to_owned(),
        paths,
        tasks,
        reason: "auto-reserved: the agent started on it".into(),
        write: crate::outbox::write::options(0, session_id),
        ..Default::default()
    };
    match hub.reservations.reserve(request).await {
        Ok(reply) if !reply.get_ref().granted => {
            log(
                ctx,
                &format!(
                    "auto-reservation not granted: {}",
                    crate::usecase::reservations::blocked_text(&reply.get_ref().blockers)
                ),
            );
        }
        Ok(_) => {}
        Err(status) => log(ctx, &format!("auto-reservation failed: {}", remote::explain(&status))),
    }
}

fn held_by_other(r: &Reservation, own: &str) -> bool {
    r.status == ReservationStatus::Held as i32 && r.session_id != own
}

/// Equal, or one a directory holding the other (the hub's rule).
fn overlaps(a: &str, b: &str) -> bool {
    !a.is_empty() && (a == b || b.starts_with(&format!("{a}/")) || a.starts_with(&format!("{b}/")))
}

/// What the agent is told about `others` holding some of `paths`; `stale` is the age of a
/// cached view (the hub unreachable), which only ever warns.
pub(crate) fn verdict(
    paths: &[String],
    others: &[Reservation],
    enforcement: i32,
    stale: Option<&str>,
) -> Option<Verdict> {
    if others.is_empty() || enforcement == ReservationEnforcement::Off as i32 {
        return None;
    }
    let mut lines: Vec<String> = Vec::new();
    for r in others.iter().take(5) {
        let hit = paths.iter().find(|p| overlaps(&r.path, p)).cloned().unwrap_or_else(|| target(r));
        let whole = if r.path == hit { String::new() } else { format!(" (within {})", target(r)) };
        lines.push(format!("- {hit}{whole} is reserved by {}", holder_line(r)));
    }
    let holders = lines.join("\n");
    let first =
        paths.iter().find(|p| others.iter().any(|r| overlaps(&r.path, p))).map_or("PATH", String::as_str);
    let how = format!(
        "Another session is working on it. Wait for it (`baton reserve {} --wait 5m` returns when it is yours), \
         ask its holder, or work on something else.",
        crate::safe::shell_line(&[first.to_owned()])
    );
    let as_of =
        stale.map(|age| format!(" (as of {age} ago: the Baton hub cannot be reached)")).unwrap_or_default();
    if enforcement == ReservationEnforcement::Deny as i32 && stale.is_none() {
        Some(Verdict::Deny(format!(
            "Baton refused this edit: the file is reserved by another session.\n{holders}\n{how}"
        )))
    } else {
        Some(Verdict::Warn(format!(
            "Baton: this edit touches files another session has reserved{as_of}.\n{holders}\n{how} If you go \
             ahead, expect conflicts with its work."
        )))
    }
}

/// Renews the conversation's reservations (`known`: those it held at the last renewal),
/// keeps the project's view for the pre-tool hook, and says what was lost since (text for the
/// model) and whether the project has auto-reservations on.
pub(super) async fn renew(
    ctx: &Ctx,
    agent: Agent,
    agent_sid: &str,
    hub: &mut Hub,
    (project, session_id): (&str, &str),
    known: Vec<String>,
) -> (Option<String>, Option<bool>) {
    let request = RenewReservationsRequest {
        project: project.to_owned(),
        session_id: session_id.to_owned(),
        known_ids: known,
    };
    let reply = match hub.reservations.renew_reservations(request).await {
        Ok(r) => r.into_inner(),
        Err(status) => {
            if !remote::is_transient(&status) {
                log(ctx, &format!("reservation renewal refused: {}", remote::explain(&status)));
            }
            return (None, None);
        }
    };
    let held: Vec<String> = reply.held.iter().map(|r| r.id.clone()).collect();
    let auto = reply.settings.as_ref().is_some_and(|s| s.auto_reserve);
    let kept = ctx.state.update(agent.name(), agent_sid, |s| {
        s.reserved_ids = held;
        s.auto_reserve = auto;
    });
    if let Err(e) = kept {
        log(ctx, &format!("cannot record the reservations held: {e:#}"));
    }
    keep_view(ctx, hub, project).await;
    (lost_text(&reply.lost), Some(auto))
}

/// Auto-reservations of tasks (for a project that has them on): a task the agent marked in
/// progress since the last call is reserved by its title; one it finished (or dropped) is
/// released.
pub(super) async fn auto_tasks(
    ctx: &Ctx,
    agent: Agent,
    agent_sid: &str,
    hub: &mut Option<Hub>,
    project: &str,
    session_id: &str,
) {
    let Some(state) = ctx.state.get(agent.name(), agent_sid).filter(|s| s.auto_reserve) else { return };
    let doing: Vec<String> = state
        .journal
        .tasks
        .iter()
        .filter(|t| t.status == "in_progress")
        .map(|t| task_key(&t.content))
        .filter(|k| !k.trim().is_empty())
        .collect();
    let started: Vec<String> = doing.iter().filter(|k| !state.auto_tasks.contains(k)).cloned().collect();
    let finished: Vec<String> = state.auto_tasks.iter().filter(|k| !doing.contains(k)).cloned().collect();
    if started.is_empty() && finished.is_empty() {
        return;
    }
    if hub.is_none() {
        *hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
    }
    let Some(h) = hub.as_mut() else { return };
    auto_reserve(ctx, h, project, session_id, Vec::new(), started).await;
    if !finished.is_empty() {
        let request = baton_proto::v1::ReleaseRequest {
            project: project.to_owned(),
            session_id: session_id.to_owned(),
            tasks: finished,
            write: crate::outbox::write::options(0, session_id),
            ..Default::default()
        };
        if let Err(status) = h.reservations.release(request).await {
            log(ctx, &format!("auto-release failed: {}", remote::explain(&status)));
        }
    }
    if let Err(e) = ctx.state.update(agent.name(), agent_sid, |s| s.auto_tasks = doing) {
        log(ctx, &format!("cannot record the auto-reserved tasks: {e:#}"));
    }
}

/// A task's title as a reservation's key: one line, at most 256 bytes (cut on a character).
fn task_key(title: &str) -> String {
    let line: String = title
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let line = line.as_str();
    let mut end = line.len().min(256);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_owned()
}

/// Keeps the project's held reservations for a check with the hub down (one page).
async fn keep_view(ctx: &Ctx, hub: &mut Hub, project: &str) {
    let request =
        ListReservationsRequest { project: project.to_owned(), page_size: 1000, ..Default::default() };
    if let Ok(reply) = hub.reservations.list_reservations(request).await {
        let held: Vec<Reservation> = reply
            .into_inner()
            .reservations
            .into_iter()
            .filter(|r| r.status == ReservationStatus::Held as i32)
            .collect();
        if let Err(e) = crate::local::reserved::store(&ctx.settings.data_dir, project, &held) {
            log(ctx, &format!("cannot keep the project's reservations: {e:#}"));
        }
    }
}

/// What the model is told of reservations it lost.
pub fn lost_text(lost: &[Reservation]) -> Option<String> {
    if lost.is_empty() {
        return None;
    }
    let lines: Vec<String> = lost
        .iter()
        .map(|r| {
            let how = match ReservationStatus::try_from(r.status).unwrap_or_default() {
                ReservationStatus::TakenOver => {
                    format!("was taken over by session {}", crate::view::short(&r.ended_by_session_id))
                }
                ReservationStatus::Expired => {
                    "lapsed (it was not renewed within its time to live)".to_owned()
                }
                ReservationStatus::SessionEnded => "ended with the session".to_owned(),
                _ => "was released".to_owned(),
            };
            format!("- {} {how}", target(r))
        })
        .collect();
    Some(format!(
        "Baton: this session no longer holds some of its reservations:\n{}\nAnother session may be working on \
         them now: check with `baton reservations` before editing them, and reserve them again if they are free.",
        lines.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(path: &str, session: &str) -> Reservation {
        Reservation {
            path: path.into(),
            session_id: session.into(),
            status: ReservationStatus::Held as i32,
            reason: "refactoring auth".into(),
            ..Default::default()
        }
    }

    #[test]
    fn deny_and_warn_name_the_holder_and_the_way_on() {
        let paths = vec!["src/auth/jwt.rs".to_owned()];
        let others = vec![held("src/auth", "01a2-other-session-abcdef12")];
        let Some(Verdict::Deny(text)) = verdict(&paths, &others, ReservationEnforcement::Deny as i32, None)
        else {
            panic!()
        };
        assert!(
            text.contains("src/auth/jwt.rs (within src/auth) is reserved by") && text.contains("abcdef12")
        );
        assert!(text.contains("refactoring auth") && text.contains("--wait"));
        // A stale view never refuses.
        let stale = verdict(&paths, &others, ReservationEnforcement::Deny as i32, Some("3 min"));
        assert!(matches!(stale, Some(Verdict::Warn(t)) if t.contains("as of 3 min ago")));
        assert_eq!(verdict(&paths, &others, ReservationEnforcement::Off as i32, None), None);
        assert_eq!(verdict(&paths, &[], ReservationEnforcement::Deny as i32, None), None);
    }

    #[test]
    fn overlap_follows_the_hub() {
        assert!(overlaps("src", "src/a.rs") && overlaps("src/a.rs", "src") && overlaps("a", "a"));
        assert!(!overlaps("src", "src2/a.rs") && !overlaps("", "a"));
    }
}
