//! What a write reports: its conflict (when it was not simply applied) and its result, as
//! the LWW decision (`lww::decide`) makes them. Shared by every kind of write, so that a
//! session, a checkpoint's head and a memory record report conflicts alike.

use baton_proto::v1::{Actor, Conflict, RecordValue, WriteOutcome, WriteResult};

use crate::core::lww::{Decision, RecordVersion};

/// Who wrote, with what intent: the parts of a write its conflict and result carry.
#[derive(Debug, Clone, Copy)]
pub struct Writer<'a> {
    pub actor: &'a Actor,
    pub base_revision: Option<i64>,
    /// Secrets redacted from the request.
    pub redacted: u32,
    /// The write's `written_at` was after its `client_now` and was clamped.
    pub clamped: bool,
}

/// The record a conflict is about, as it stands and as the write wanted it.
#[derive(Debug, Clone, Default)]
pub struct Contested {
    pub record: String,
    pub current: Option<(RecordVersion, Actor)>,
    pub current_value: Option<RecordValue>,
    pub written_value: Option<RecordValue>,
    pub detail: String,
}

/// The conflict of a write that was not simply applied (a new id; project, revision and
/// time are stamped when its event is logged).
pub fn conflict(decision: Decision, writer: Writer<'_>, contested: Contested) -> Conflict {
    let Contested { record, current, current_value, written_value, detail } = contested;
    Conflict {
        id: uuid::Uuid::now_v7().to_string(),
        record,
        outcome: outcome(decision) as i32,
        base_revision: writer.base_revision,
        current_revision: current.as_ref().map_or(0, |(v, _)| v.revision),
        current_author: current.as_ref().map(|(_, a)| a.clone()),
        current_written_at: current.as_ref().map(|(v, _)| crate::core::time::ts(v.written_us)),
        current_value,
        written_value,
        writer: Some(writer.actor.clone()),
        detail,
        ..Default::default()
    }
}

pub fn outcome(decision: Decision) -> WriteOutcome {
    match decision {
        Decision::Applied => WriteOutcome::Applied,
        Decision::Overwritten => WriteOutcome::Overwritten,
        Decision::Stale => WriteOutcome::Stale,
        Decision::Rejected => WriteOutcome::Rejected,
    }
}

/// The result a write answers with.
pub fn result(
    revision: i64,
    decision: Decision,
    conflict: Option<Conflict>,
    writer: Writer<'_>,
) -> WriteResult {
    WriteResult {
        revision,
        outcome: outcome(decision) as i32,
        conflict,
        redacted: i32::try_from(writer.redacted).unwrap_or(i32::MAX),
        replayed: false,
        written_at_clamped: writer.clamped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conflict_names_the_current_version_and_the_writer() {
        let actor = Actor { user: "a".into(), ..Default::default() };
        let current_author = Actor { user: "b".into(), ..Default::default() };
        let writer = Writer { actor: &actor, base_revision: Some(3), redacted: 2, clamped: true };
        let c = conflict(
            Decision::Overwritten,
            writer,
            Contested {
                record: "note/k".into(),
                current: Some((RecordVersion { revision: 7, written_us: 1_000_000 }, current_author.clone())),
                ..Default::default()
            },
        );
        assert_eq!(c.outcome, WriteOutcome::Overwritten as i32);
        assert_eq!((c.base_revision, c.current_revision), (Some(3), 7));
        assert_eq!(c.current_author, Some(current_author));
        assert_eq!(c.current_written_at.map(|t| t.seconds), Some(1));
        assert_eq!(c.writer, Some(actor.clone()));
        let r = result(9, Decision::Overwritten, Some(c), writer);
        assert_eq!((r.revision, r.redacted, r.written_at_clamped, r.replayed), (9, 2, true, false));
        assert_eq!(r.outcome, WriteOutcome::Overwritten as i32);
    }
}
