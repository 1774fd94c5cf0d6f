//! A session's head checkpoint as a last-write-wins record (docs/architecture.md, The head
//! checkpoint): a new checkpoint becomes the head unless the decision says otherwise, and
//! one whose parent is not the head is a fork, reported as a conflict on the head (both
//! branches are kept).

use super::lww::{self, Decision, RecordVersion, WriteIntent};

/// The parent of a new checkpoint: the session's head unless the request names one
/// (`Some("")` = a new root).
pub fn parent<'a>(asked: Option<&'a str>, head: Option<&'a str>) -> Option<&'a str> {
    match asked {
        None => head,
        Some("") => None,
        Some(parent) => Some(parent),
    }
}

/// What a new checkpoint does to its session's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub decision: Decision,
    /// Why a fork is a conflict ("" when not a fork).
    pub detail: String,
}

/// Decides whether a checkpoint with `parent` moves the head (`head`, last written at
/// `current`). A fork made without a base revision counts as written against a revision
/// the head never had, so it reports its conflict; a writer whose base is the head's
/// revision forks knowingly, and is not told.
pub fn decide(
    parent: Option<&str>,
    head: Option<&str>,
    current: RecordVersion,
    mut intent: WriteIntent,
) -> Move {
    let fork = parent != head;
    if fork && intent.base_revision.is_none() {
        intent.base_revision = Some(-1);
    }
    let decision = lww::decide(head.is_some().then_some(current), intent);
    let detail = if fork {
        format!(
            "fork: parent {} is not the session's head {}; both branches are kept",
            parent.unwrap_or("(none)"),
            head.unwrap_or("(none)")
        )
    } else {
        String::new()
    };
    Move { decision, detail }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::lww::Policy;

    const AT: RecordVersion = RecordVersion { revision: 7, written_us: 100 };

    #[test]
    fn the_parent_is_the_head_unless_named() {
        assert_eq!(parent(None, Some("h")), Some("h"));
        assert_eq!(parent(Some(""), Some("h")), None);
        assert_eq!(parent(Some("p"), Some("h")), Some("p"));
        assert_eq!(parent(None, None), None);
    }

    #[test]
    fn a_checkpoint_on_the_head_moves_it_without_conflict() {
        let m = decide(Some("h"), Some("h"), AT, WriteIntent::default());
        assert_eq!(m, Move { decision: Decision::Applied, detail: String::new() });
        // The first checkpoint of a session.
        assert_eq!(decide(None, None, AT, WriteIntent::default()).decision, Decision::Applied);
    }

    #[test]
    fn a_fork_without_a_base_is_a_conflict_and_says_so() {
        let m = decide(Some("p"), Some("h"), AT, WriteIntent::default());
        assert_eq!(m.decision, Decision::Overwritten);
        assert!(m.detail.contains("parent p is not the session's head h"), "{}", m.detail);
        // A writer that read the head forks knowingly.
        let read = WriteIntent { base_revision: Some(7), ..Default::default() };
        assert_eq!(decide(Some("p"), Some("h"), AT, read).decision, Decision::Applied);
        let reject = WriteIntent { policy: Policy::Reject, ..Default::default() };
        assert_eq!(decide(Some("p"), Some("h"), AT, reject).decision, Decision::Rejected);
        // A new root beside a head.
        let m = decide(None, Some("h"), AT, WriteIntent::default());
        assert!(m.detail.contains("parent (none)"), "{}", m.detail);
    }

    #[test]
    fn a_queued_checkpoint_older_than_the_head_is_stale() {
        let queued = WriteIntent { base_revision: Some(3), queued_at_us: Some(50), ..Default::default() };
        assert_eq!(decide(Some("h"), Some("h"), AT, queued).decision, Decision::Stale);
    }
}
