//! Last-write-wins with conflict reporting: the decision table in docs/architecture.md's
//! section of the same name.
//!
//! A record (a session's editable fields, a memory set, a note, a session's head) carries
//! the revision and the time of its last write. A write names the revision it was based on
//! (optionally) and, when it was replayed from a client's offline queue, the time it was
//! made. This module decides what happens; it does no I/O.

/// What a writer asked for when its base is not current.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Last write wins; the conflict is reported (the default).
    #[default]
    Overwrite,
    /// Nothing is written; the caller gets the current value.
    Reject,
}

/// The last write of a record, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordVersion {
    pub revision: i64,
    /// Server time (µs since the epoch) of the record's last write.
    pub written_us: i64,
}

/// The parts of a write that the decision depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteIntent {
    pub base_revision: Option<i64>,
    pub policy: Policy,
    /// For writes replayed from an offline queue: when the write was made, already
    /// corrected to the server's clock (see [`corrected_written_at`]).
    pub queued_at_us: Option<i64>,
}

/// The outcome of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Apply; no conflict.
    Applied,
    /// Apply, and report that the record's newer value was overwritten.
    Overwritten,
    /// Do not apply, but record the attempt (a queued write older than the record).
    Stale,
    /// Do not apply, record nothing: the caller asked to be refused on conflict.
    Rejected,
}

impl Decision {
    /// Whether the write's value is stored.
    pub fn applies(self) -> bool {
        matches!(self, Self::Applied | Self::Overwritten)
    }

    /// Whether a conflict is reported for this decision.
    pub fn is_conflict(self) -> bool {
        !matches!(self, Self::Applied)
    }
}

/// Decides a write to a record. `current` is `None` when the record does not exist, which
/// counts as revision 0.
pub fn decide(current: Option<RecordVersion>, intent: WriteIntent) -> Decision {
    let current_revision = current.map_or(0, |c| c.revision);
    let base_matches = intent.base_revision == Some(current_revision);
    if base_matches {
        // A writer that read the current value is never stale, whatever its clock says.
        return Decision::Applied;
    }
    if let (Some(queued_at), Some(current)) = (intent.queued_at_us, current)
        && queued_at < current.written_us
    {
        return Decision::Stale;
    }
    match (intent.base_revision, intent.policy) {
        (None, _) => Decision::Applied,
        (Some(_), Policy::Overwrite) => Decision::Overwritten,
        (Some(_), Policy::Reject) => Decision::Rejected,
    }
}

/// The server-clock time of a queued write: `written_at + (server_now - client_now)`,
/// which removes the client's clock offset. A `written_at` after `client_now` (a write
/// from the future: a hostile client, or a clock that stepped back while the write was
/// queued) is clamped to `client_now`, so the result is never after the server's now and
/// one write cannot make every later honest write to the record STALE; the write is kept,
/// not refused, so work queued offline is never lost. Saturating, so absurd inputs cannot
/// overflow.
pub fn corrected_written_at(written_at_us: i64, client_now_us: i64, server_now_us: i64) -> i64 {
    written_at_us
        .min(client_now_us)
        .saturating_add(server_now_us.saturating_sub(client_now_us))
        .min(server_now_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REC: RecordVersion = RecordVersion { revision: 7, written_us: 1_000 };

    fn intent(base: Option<i64>, policy: Policy, queued: Option<i64>) -> WriteIntent {
        WriteIntent { base_revision: base, policy, queued_at_us: queued }
    }

    #[test]
    fn no_base_is_applied() {
        assert_eq!(decide(Some(REC), intent(None, Policy::Overwrite, None)), Decision::Applied);
        assert_eq!(decide(None, intent(None, Policy::Reject, None)), Decision::Applied);
    }

    #[test]
    fn matching_base_is_applied_even_under_reject() {
        assert_eq!(decide(Some(REC), intent(Some(7), Policy::Reject, None)), Decision::Applied);
        assert_eq!(decide(None, intent(Some(0), Policy::Reject, None)), Decision::Applied);
    }

    #[test]
    fn mismatched_base_overwrites_or_rejects() {
        assert_eq!(decide(Some(REC), intent(Some(6), Policy::Overwrite, None)), Decision::Overwritten);
        assert_eq!(decide(Some(REC), intent(Some(6), Policy::Reject, None)), Decision::Rejected);
        // Expecting a record that is gone (or never was) is a conflict too.
        assert_eq!(decide(None, intent(Some(3), Policy::Reject, None)), Decision::Rejected);
    }

    #[test]
    fn queued_write_older_than_record_is_stale() {
        assert_eq!(decide(Some(REC), intent(None, Policy::Overwrite, Some(999))), Decision::Stale);
        assert_eq!(decide(Some(REC), intent(Some(6), Policy::Reject, Some(999))), Decision::Stale);
        // Newer queued writes follow the normal rules.
        assert_eq!(decide(Some(REC), intent(None, Policy::Overwrite, Some(1_001))), Decision::Applied);
        assert_eq!(decide(Some(REC), intent(Some(6), Policy::Overwrite, Some(1_001))), Decision::Overwritten);
    }

    #[test]
    fn matching_base_is_never_stale() {
        assert_eq!(decide(Some(REC), intent(Some(7), Policy::Overwrite, Some(1))), Decision::Applied);
    }

    #[test]
    fn a_write_from_the_future_is_clamped_to_now() {
        // written_at a year past client_now: recorded at the server's now, no later.
        let year = 365 * 24 * 3600 * 1_000_000i64;
        assert_eq!(corrected_written_at(200 + year, 200, 10_000_200), 10_000_200);
        assert!(corrected_written_at(i64::MAX, i64::MIN, 5) <= 5);
    }

    #[test]
    fn clock_offset_is_removed() {
        // Client clock 10 s behind the server: its written_at moves forward by 10 s.
        assert_eq!(corrected_written_at(100, 200, 10_000_200), 10_000_100);
        assert_eq!(corrected_written_at(i64::MAX, 0, i64::MAX), i64::MAX);
    }
}
