//! Session status transitions (ARCHITECTURE.md): status is never last-write-wins; a
//! transition is either allowed or FAILED_PRECONDITION.

use baton_proto::v1::SessionStatus;

/// Whether `from → to` is an allowed transition.
pub fn allowed(from: SessionStatus, to: SessionStatus) -> bool {
    use SessionStatus::{Active, Completed, Crashed, Idle, Initializing, Resumed};
    matches!(
        (from, to),
        (Initializing, Active)
            | (Active, Idle)
            | (Idle, Active)
            | (Active | Idle, Completed)
            // An orchestrated worker can die before it ever reported activity.
            | (Active | Idle | Initializing, Crashed)
            | (Crashed | Idle, Resumed)
    )
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
