//! Whom the store tells of commits, without knowing it: the watch fan-out
//! (`events::Wakers`) implements [`Commits`], and each backend calls it as its writes commit
//! (and, on Postgres, as other instances announce theirs). So the store depends on nothing
//! above it.

use super::model::LoggedEvent;

/// What a watcher of the store's commits is told, in commit order.
pub trait Commits: Send + Sync + 'static {
    /// Before a write that rewrites or deletes events joins a batch; dropped once its commit
    /// is told.
    fn hold(&self, project: &str) -> Box<dyn Send>;
    /// A copy of a write's events, taken before it commits, for a reader that would take
    /// them (`None`: there is none).
    fn copy_for_reader(&self, project: &str, events: &[LoggedEvent]) -> Option<Vec<LoggedEvent>>;
    /// A write of this process committed, with the copy taken of its events.
    fn committed(&self, project: &str, events: Option<Vec<LoggedEvent>>);
    /// Another instance committed `project` up to `revision`.
    fn announced(&self, project: &str, revision: i64);
    /// Another instance committed `project`, up to a revision not told.
    fn wake(&self, project: &str);
}
