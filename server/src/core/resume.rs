//! Resume's rules: which session a resume takes over, whether it may, and from which
//! checkpoint it starts (the nearest valid one, walking up the tree past corrupt ones).

use std::collections::HashSet;
use std::fmt::Display;

use baton_proto::v1::{SessionStatus, SkippedCheckpoint};

/// What a resume asks to take over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked<'a> {
    /// This session.
    Session(&'a str),
    /// The session this checkpoint belongs to, from this checkpoint.
    Checkpoint(&'a str),
    /// The project's latest crashed or idle session, else its latest completed one.
    Latest,
}

/// A session as the choice sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    pub id: &'a str,
    pub status: SessionStatus,
    pub updated_us: i64,
}

/// The candidate a resume takes over (its index), of those the store read for `asked`: the
/// one named (directly or by its checkpoint), or the most recently updated crashed or idle
/// session, else the most recently updated completed one (ties: the greater id, the later
/// of two uuid v7).
pub fn choose(asked: Asked<'_>, candidates: &[Candidate<'_>]) -> Option<usize> {
    fn rank<'a>(c: &Candidate<'a>) -> (bool, bool, i64, &'a str) {
        let unfinished = matches!(c.status, SessionStatus::Crashed | SessionStatus::Idle);
        let eligible = unfinished || c.status == SessionStatus::Completed;
        (eligible, unfinished, c.updated_us, c.id)
    }
    if !matches!(asked, Asked::Latest) {
        return (!candidates.is_empty()).then_some(0);
    }
    let best = candidates.iter().enumerate().max_by(|(_, a), (_, b)| rank(a).cmp(&rank(b)))?;
    rank(best.1).0.then_some(best.0)
}

/// Why a session cannot be resumed (FAILED_PRECONDITION).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotResumable {
    #[error("session {id} was already resumed by session {by}; resume that one instead")]
    AlreadyResumed { id: String, by: String },
    #[error(
        "session {id} is still active; it can be resumed once it is idle, crashed or completed \
         (end it with EndSession, or wait for it to go idle)"
    )]
    StillActive { id: String },
}

/// Refuses a resume of a session taken over already or still running.
pub fn check_resumable(
    id: &str,
    status: SessionStatus,
    resumed_by: Option<&str>,
) -> Result<(), NotResumable> {
    let id = id.to_owned();
    match status {
        SessionStatus::Resumed => {
            Err(NotResumable::AlreadyResumed { id, by: resumed_by.unwrap_or("?").to_owned() })
        }
        SessionStatus::Active | SessionStatus::Initializing | SessionStatus::Unspecified => {
            Err(NotResumable::StillActive { id })
        }
        SessionStatus::Idle | SessionStatus::Crashed | SessionStatus::Completed => Ok(()),
    }
}

/// Whether resuming a session claims it (it becomes resumed, fenced against its old
/// writers): crashed and idle ones are; a completed one stays completed, and can be resumed
/// again.
pub fn claims(status: SessionStatus) -> bool {
    matches!(status, SessionStatus::Crashed | SessionStatus::Idle)
}

/// A field of the new session: the one asked for, else the resumed session's.
pub fn inherit(asked: &str, resumed: &str) -> String {
    if asked.is_empty() { resumed } else { asked }.to_owned()
}

/// The new session's git base: the starting checkpoint's git head, else the resumed
/// session's last one.
pub fn git_base(checkpoint_git_head: Option<&str>, resumed_git_head: &str) -> String {
    checkpoint_git_head.filter(|h| !h.is_empty()).unwrap_or(resumed_git_head).to_owned()
}

/// The walk from the starting checkpoint up its ancestors to the first that verifies; each
/// corrupt one is skipped, and said so in the reply.
#[derive(Debug, Default)]
pub struct Walk {
    seen: HashSet<String>,
    pub skipped: Vec<SkippedCheckpoint>,
}

/// What to do after a checkpoint of the walk.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<T> {
    /// Start from this one.
    Found(T),
    /// It is corrupt: read its parent.
    Parent(String),
    /// No valid checkpoint on the way up: start without one.
    End,
}

impl Walk {
    /// A checkpoint on the way (`id`, its `parent`), as verified.
    pub fn visit<T, E: Display>(
        &mut self,
        id: &str,
        parent: Option<&str>,
        verified: Result<T, E>,
    ) -> Step<T> {
        if !self.seen.insert(id.to_owned()) {
            // A cycle (never made by Baton, which only points at existing checkpoints).
            return Step::End;
        }
        match verified {
            Ok(checkpoint) => Step::Found(checkpoint),
            Err(e) => {
                self.skipped.push(SkippedCheckpoint { checkpoint_id: id.to_owned(), reason: e.to_string() });
                parent.map_or(Step::End, |p| Step::Parent(p.to_owned()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SessionStatus::*;

    fn c(id: &str, status: SessionStatus, updated_us: i64) -> Candidate<'_> {
        Candidate { id, status, updated_us }
    }

    #[test]
    fn a_named_session_is_the_one_read() {
        assert_eq!(choose(Asked::Session("a"), &[c("a", Active, 1)]), Some(0));
        assert_eq!(choose(Asked::Checkpoint("k"), &[c("a", Completed, 1)]), Some(0));
        assert_eq!(choose(Asked::Session("a"), &[]), None);
    }

    #[test]
    fn the_latest_unfinished_session_wins_over_any_completed_one() {
        let all = [c("a", Completed, 9), c("b", Idle, 3), c("c", Crashed, 5)];
        assert_eq!(choose(Asked::Latest, &all), Some(2));
        let all = [c("a", Completed, 9), c("b", Completed, 10)];
        assert_eq!(choose(Asked::Latest, &all), Some(1));
        // Ties go to the later id.
        let all = [c("b", Idle, 5), c("a", Crashed, 5)];
        assert_eq!(choose(Asked::Latest, &all), Some(0));
        assert_eq!(choose(Asked::Latest, &[c("a", Active, 1), c("b", Resumed, 2)]), None);
        assert_eq!(choose(Asked::Latest, &[]), None);
    }

    #[test]
    fn only_ended_sessions_can_be_resumed_and_only_unfinished_ones_are_claimed() {
        assert!(check_resumable("s", Crashed, None).is_ok() && claims(Crashed));
        assert!(check_resumable("s", Idle, None).is_ok() && claims(Idle));
        assert!(check_resumable("s", Completed, None).is_ok() && !claims(Completed));
        let resumed = check_resumable("s", Resumed, Some("t")).unwrap_err().to_string();
        assert!(resumed.contains("already resumed by session t"), "{resumed}");
        let active = check_resumable("s", Active, None).unwrap_err().to_string();
        assert!(active.contains("still active") && active.contains("EndSession"), "{active}");
        assert!(check_resumable("s", Initializing, None).is_err());
    }

    #[test]
    fn the_new_session_inherits_what_was_not_asked() {
        assert_eq!(inherit("", "old"), "old");
        assert_eq!(inherit("new", "old"), "new");
        assert_eq!(git_base(Some("cp"), "sess"), "cp");
        assert_eq!(git_base(Some(""), "sess"), "sess");
        assert_eq!(git_base(None, "sess"), "sess");
    }

    #[test]
    fn the_walk_skips_corrupt_checkpoints_up_to_a_valid_ancestor() {
        let mut walk = Walk::default();
        assert_eq!(walk.visit::<u8, _>("c", Some("b"), Err("bad digest")), Step::Parent("b".into()));
        assert_eq!(walk.visit::<u8, _>("b", Some("a"), Err("bad state")), Step::Parent("a".into()));
        assert_eq!(walk.visit::<u8, &str>("a", None, Ok(7)), Step::Found(7));
        let skipped: Vec<_> =
            walk.skipped.iter().map(|s| (s.checkpoint_id.as_str(), s.reason.as_str())).collect();
        assert_eq!(skipped, [("c", "bad digest"), ("b", "bad state")]);
    }

    #[test]
    fn the_walk_ends_at_the_root_or_a_cycle() {
        let mut walk = Walk::default();
        assert_eq!(walk.visit::<u8, _>("a", None, Err("bad")), Step::End);
        let mut walk = Walk::default();
        assert_eq!(walk.visit::<u8, _>("a", Some("b"), Err("bad")), Step::Parent("b".into()));
        assert_eq!(walk.visit::<u8, _>("b", Some("a"), Err("bad")), Step::Parent("a".into()));
        assert_eq!(walk.visit::<u8, _>("a", Some("b"), Err("bad")), Step::End);
    }
}
