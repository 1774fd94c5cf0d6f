//! Session status transitions (docs/architecture.md, Session status): status is never
//! last-write-wins; a transition is either allowed or FAILED_PRECONDITION.

use baton_proto::v1::SessionStatus;

/// Whether `from → to` is an allowed transition.
pub fn allowed(from: SessionStatus, to: SessionStatus) -> bool {
    use SessionStatus::{Active, Completed, Crashed, Idle, Initializing, Resumed};
    matches!(
        (from, to),
        (Initializing | Idle, Active)
            | (Active, Idle)
            | (Active | Idle, Completed)
            // An orchestrated worker can die before it ever reported activity.
            | (Active | Idle | Initializing, Crashed)
            | (Crashed | Idle, Resumed)
    )
}

/// A write refused by a session's status (FAILED_PRECONDITION), saying what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("status: session {id} cannot go from {} to {}", name(*from), name(*to))]
    Transition { id: String, from: SessionStatus, to: SessionStatus },
    #[error("session {id} was resumed by session {by}; it is fenced: continue in that session")]
    Fenced { id: String, by: String },
    #[error("session {id} is completed and takes no more writes; start a new session or resume from it")]
    Completed { id: String },
    #[error("session {id} is marked crashed (no heartbeat within its lease); resume it with ResumeSession")]
    Crashed { id: String },
}

/// Refuses a status change the session's lifecycle does not allow.
pub fn check_transition(id: &str, from: SessionStatus, to: SessionStatus) -> Result<(), Refused> {
    if allowed(from, to) {
        return Ok(());
    }
    Err(Refused::Transition { id: id.to_owned(), from, to })
}

/// Refuses writes to a session that has ended or was taken over (fencing).
pub fn check_open(id: &str, status: SessionStatus, resumed_by: Option<&str>) -> Result<(), Refused> {
    let id = id.to_owned();
    match status {
        SessionStatus::Resumed => Err(Refused::Fenced { id, by: resumed_by.unwrap_or("?").to_owned() }),
        SessionStatus::Completed => Err(Refused::Completed { id }),
        SessionStatus::Crashed => Err(Refused::Crashed { id }),
        _ => Ok(()),
    }
}

/// Statuses whose session takes no more writes: ended, or claimed by a successor.
pub fn is_closed(status: SessionStatus) -> bool {
    matches!(status, SessionStatus::Completed | SessionStatus::Crashed | SessionStatus::Resumed)
}

/// Whether a write to a session is that session's activity (it keeps it alive, and makes an
/// idle one active): yes, unless the writer names another session it writes for, such as
/// the next session on a machine saving what a killed one's hooks recorded.
pub fn is_activity(session_id: &str, writer_session_id: &str) -> bool {
    writer_session_id.is_empty() || writer_session_id == session_id
}

/// Lower-case name used in messages.
pub fn name(status: SessionStatus) -> &'static str {
    match status {
        SessionStatus::Unspecified => "unspecified",
        SessionStatus::Initializing => "initializing",
        SessionStatus::Active => "active",
        SessionStatus::Idle => "idle",
        SessionStatus::Completed => "completed",
        SessionStatus::Crashed => "crashed",
        SessionStatus::Resumed => "resumed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SessionStatus::*;

    #[test]
    fn only_the_session_itself_or_an_unnamed_writer_is_its_activity() {
        assert!(is_activity("s1", ""));
        assert!(is_activity("s1", "s1"));
        assert!(!is_activity("s1", "s2"));
    }

    #[test]
    fn closed_sessions_refuse_writes_and_say_what_to_do() {
        assert_eq!(check_open("s", Active, None), Ok(()));
        assert_eq!(check_open("s", Idle, None), Ok(()));
        let fenced = check_open("s", Resumed, Some("t")).unwrap_err().to_string();
        assert!(
            fenced.contains("resumed by session t") && fenced.contains("continue in that session"),
            "{fenced}"
        );
        assert!(check_open("s", Completed, None).unwrap_err().to_string().contains("start a new session"));
        assert!(check_open("s", Crashed, None).unwrap_err().to_string().contains("ResumeSession"));
        assert_eq!(
            check_transition("s", Completed, Active).unwrap_err().to_string(),
            "status: session s cannot go from completed to active"
        );
        assert_eq!(check_transition("s", Idle, Active), Ok(()));
    }

    #[test]
    fn table() {
        let all = [Initializing, Active, Idle, Completed, Crashed, Resumed];
        let ok = [
            (Initializing, Active),
            (Initializing, Crashed),
            (Active, Idle),
            (Idle, Active),
            (Active, Completed),
            (Idle, Completed),
            (Active, Crashed),
            (Idle, Crashed),
            (Crashed, Resumed),
            (Idle, Resumed),
        ];
        for from in all {
            for to in all {
                assert_eq!(allowed(from, to), ok.contains(&(from, to)), "{from:?} -> {to:?}");
            }
        }
    }
}
