//! Whom the store tells of commits, without knowing it: the watch fan-out
//! (`events::Wakers`, and on Postgres `events::Instances`, which tells the other instances
//! too) implements [`Commits`], and the store calls it as its writes commit. So the store
//! depends on nothing above it.

use super::model::LoggedEvent;

/// What a watcher of the store's commits is told, in commit order.
pub trait Commits: Send + Sync + 'static {
    /// Before a write that rewrites or deletes events joins a batch; dropped once its commit
    /// is told.
    fn hold(&self, project: &str) -> Box<dyn Send>;
    /// A copy of a write's events, taken before it commits, for a reader that would take
    /// them (`None`: there is none).
    fn copy_for_reader(&self, project: &str, events: &[LoggedEvent]) -> Option<Vec<LoggedEvent>>;
    /// A write of this process committed, up to revision `newest` (`None`: it logged no
    /// event), with the copy taken of its events.
    fn committed(&self, project: &str, newest: Option<i64>, events: Option<Vec<LoggedEvent>>);
}
