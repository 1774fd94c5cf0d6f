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
