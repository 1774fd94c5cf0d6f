//! What every write shares: the project lock (which allocates the write's revision), the
//! answer to a repeated request id (its stored reply, never a second write), exactly one
//! event per revision, the reply kept for idempotency, one commit.

use baton_proto::v1::{Actor, Conflict, Event, EventKind, WriteResult};
use futures::future::BoxFuture;
use prost::Message;

use crate::core::time::ts;
use crate::error::{Error, Result};
use crate::store::model::{
    Change, EarlierRequest, Index, Lock, Log, LoggedConflict, LoggedEvent, Session, StoredRequest,
};
use crate::store::{Decided, Kept, Store, WriteCtx, WriteTx};

/// A write in progress: its transaction, the revisions it took, what it will log and the
/// changes it decided on, kept together once its body has finished it (`run`).
pub(crate) struct Write<T> {
    tx: T,
    pub project: String,
    /// The write's time by the database clock (µs).
    pub now_us: i64,
    /// The project's memory caps (JSON), as the lock read them.
    pub caps_json: String,
    /// A revision allocated but not yet given its event.
    pending: Option<i64>,
    /// The revision the lock allocated, and the last one taken.
    locked: i64,
    last: i64,
    changes: Vec<Change>,
    /// Sessions the write read (`session`): the index gives checkpoints the write adds their
    /// session's branch and user, as read when the write does not change the session
    /// (`index::follow`).
    sessions_read: Vec<Session>,
    log: Log,
    /// (event kind, conflict outcome) of each event, for the metrics once committed.
    emitted: Vec<(i32, Option<i32>)>,
    clamped: bool,
    /// Whether the body finished the write (`finish`): only then is it kept.
    finished: bool,
}

/// What a write's body gave, or the stored reply of an earlier request with the same
/// request id (then the body did not run).
pub(crate) enum Ran<R> {
    Done(R),
    Replay(Vec<u8>),
}

impl<R> Ran<R> {
    /// The body's value; a replay is the write's stored reply, decoded and marked replayed.
    pub fn or_replayed(self, result: impl FnOnce(&mut R) -> Option<&mut WriteResult>) -> Result<R>
    where
        R: Message + Default,
    {
        match self {
            Self::Done(value) => Ok(value),
            Self::Replay(bytes) => replayed(&bytes, result),
        }
    }

    /// The body's value, for a write without a request id (which never replays).
    pub fn done(self) -> Result<R> {
        match self {
            Self::Done(value) => Ok(value),
            Self::Replay(_) => Err(Error::internal("a write without a request id replayed")),
        }
    }
}

/// Runs `body` as one write of `lock`'s project (`Store::write`): takes the lock (which
/// allocates the write's revision), answers a repeated request id with its stored reply
/// instead, then runs the body, which reads through the write, decides, and finishes it
/// (`Write::finish`). A finished write is kept; one the body did not finish, or that
/// failed, is undone, its revision included. Answered once the write's batch is durable.
/// The body owns what it captures: a write runs to its end even if its request is gone.
#[tracing::instrument(level = "debug", skip_all, fields(project = lock.project))]
pub(crate) async fn run<S, R, F>(store: &S, lock: Lock, ctx: WriteCtx, body: F) -> Result<Ran<R>>
where
    S: Store,
    R: Send + 'static,
    F: for<'c> FnOnce(&'c mut Write<S::Tx>, &'c WriteCtx) -> BoxFuture<'c, Result<R>> + Send + 'static,
{
    let project = lock.project.clone();
    let written = store
        .write(
            lock,
            Box::new(move |tx, locked| {
                Box::pin(async move {
                    let mut w = Write {
                        tx,
                        project,
                        now_us: locked.now_us,
                        caps_json: locked.memory_caps,
                        pending: Some(locked.revision),
                        locked: locked.revision,
                        last: locked.revision,
                        changes: Vec::new(),
                        sessions_read: Vec::new(),
                        log: Log::default(),
                        emitted: Vec::new(),
                        clamped: ctx.clamped(),
                        finished: false,
                    };
                    let decided = w.decide(&ctx, locked.earlier, body).await;
                    (w.tx, decided)
                })
            }),
        )
        .await?;
    crate::metrics::record_commit(&written.emitted);
    // Committed, but the reply is lost (as when the network drops it): a retry with the
    // same request_id must get the stored reply.
    fail::fail_point!("write.after_commit", |_| Err(injected("write.after_commit")));
    Ok(written.ran)
}

/// A write's answer, and the events it logged (for the metrics, once committed).
pub(crate) struct Written<R> {
    ran: Ran<R>,
    emitted: Vec<(i32, Option<i32>)>,
}

impl<T: WriteTx> Write<T> {
    /// The replay of an earlier request, or the body's value and what it keeps.
    async fn decide<R, F>(
        &mut self,
        ctx: &WriteCtx,
        earlier: Option<EarlierRequest>,
        body: F,
    ) -> Result<Decided<Written<R>>>
    where
        F: for<'c> FnOnce(&'c mut Write<T>, &'c WriteCtx) -> BoxFuture<'c, Result<R>>,
    {
        fail::fail_point!("write.after_lock", |_| Err(injected("write.after_lock")));
        if let (Some(request_id), Some(earlier)) = (&ctx.request_id, earlier) {
            // The revision is not used. The earlier reply may come from a write of this
            // batch: it is answered once that write's commit is durable, like the write.
            if earlier.request_hash != ctx.request_hash {
                return Err(Error::InvalidArgument(format!(
                    "write.request_id: {request_id:?} was already used for a different request in project \
                     {:?}; a new write needs a new request_id",
                    self.project
                )));
            }
            let ran = Ran::Replay(earlier.reply);
            return Ok(Decided { value: Written { ran, emitted: Vec::new() }, kept: None });
        }
        let value = body(self, ctx).await?;
        let kept = if self.finished { Some(self.kept()?) } else { None };
        let emitted = if kept.is_some() { std::mem::take(&mut self.emitted) } else { Vec::new() };
        Ok(Decided { value: Written { ran: Ran::Done(value), emitted }, kept })
    }

    /// The finished write's changes and log, in the order they are applied.
    fn kept(&mut self) -> Result<Kept> {
        let mut changes = std::mem::take(&mut self.changes);
        // A record's documents are found through its entries: they go before the entries do.
        let (first, then): (Vec<Change>, Vec<Change>) = super::index::follow(&changes, &self.sessions_read)
            .into_iter()
            .partition(|c| matches!(c, Change::Index(Index::DropRecord { .. })));
        changes.splice(0..0, first);
        changes.extend(then);
        fail::fail_point!("write.before_commit", |_| Err(injected("write.before_commit")));
        Ok(Kept { changes, log: std::mem::take(&mut self.log) })
    }
}

impl<T: WriteTx> Write<T> {
    /// The transaction, for the write's reads.
    pub fn tx(&mut self) -> &mut T {
        &mut self.tx
    }

    /// The revision the next event will get (allocated on first ask). The project lock is
    /// held, so the next number is this write's to take; `finish` records the new head.
    pub fn revision(&mut self) -> i64 {
        if let Some(revision) = self.pending {
            return revision;
        }
        let revision = self.last + 1;
        self.pending = Some(revision);
        self.last = revision;
        revision
    }

    /// The revision the next event will get, without taking it: a body may decide with it
    /// and then write nothing.
    pub fn next_revision(&self) -> i64 {
        self.pending.unwrap_or(self.last + 1)
    }

    /// The last revision the write took.
    pub fn revision_taken(&self) -> i64 {
        self.last
    }

    /// Adds a change to those `finish` applies.
    pub fn apply(&mut self, change: Change) {
        self.changes.push(change);
    }

    /// Reads a session of the write's project, and keeps it for the search documents of
    /// checkpoints the write adds to it without changing it (an older fork, a checkpoint
    /// written on another session's behalf, an import batch whose session came earlier).
    pub async fn session(&mut self, id: &str) -> Result<Option<Session>> {
        let session = self.tx.session(id).await?;
        self.sessions_read.extend(session.clone());
        Ok(session)
    }

    /// Logs the event of the pending revision (and its conflict, if any); returns it as
    /// stored, its conflict stamped with project, revision and time.
    #[allow(clippy::unnecessary_wraps, reason = "a fail point makes it fail in the fault tests")]
    pub fn emit(&mut self, mut event: Event) -> Result<Event> {
        let revision = self.revision();
        self.pending = None;
        event.project.clone_from(&self.project);
        event.revision = revision;
        event.at = Some(ts(self.now_us));
        event.written_at_clamped = self.clamped;
        if let Some(conflict) = event.conflict.as_mut() {
            conflict.project.clone_from(&self.project);
            conflict.revision = revision;
            conflict.at = Some(ts(self.now_us));
            self.log.conflicts.push(LoggedConflict {
                id: conflict.id.clone(),
                revision,
                body: conflict.encode_to_vec(),
            });
        }
        fail::fail_point!("write.before_event", |_| Err(injected("write.before_event")));
        self.emitted.push((event.kind, event.conflict.as_ref().map(|c| c.outcome)));
        let body = crate::core::packed::pack(event.encode_to_vec());
        self.log.events.push(LoggedEvent { revision, kind: event.kind, body });
        Ok(event)
    }

    /// The error for a write refused under CONFLICT_POLICY_REJECT (which uses no revision:
    /// the transaction is dropped, so rolled back).
    pub fn rejected(&self, mut conflict: Conflict) -> Error {
        crate::metrics::record_conflict(conflict.outcome);
        conflict.project.clone_from(&self.project);
        conflict.at = Some(ts(self.now_us));
        Error::Rejected(Box::new(conflict))
    }

    /// Finishes the write: its changes, events and reply (kept for idempotency) are
    /// committed once the body returns. A write the body does not finish is undone.
    pub fn finish(&mut self, ctx: &WriteCtx, reply: &impl Message) -> Result<()> {
        if self.pending.is_some() {
            // A revision without its event would be a gap in the log: refuse to commit.
            return Err(Error::internal("write allocated a revision without an event"));
        }
        fail::fail_point!("write.before_reply", |_| Err(injected("write.before_reply")));
        self.log.request = ctx.request_id.as_ref().map(|request_id| StoredRequest {
            request_id: request_id.clone(),
            request_hash: ctx.request_hash.clone(),
            reply: reply.encode_to_vec(),
            created_us: self.now_us,
        });
        if self.last > self.locked {
            self.log.head = Some(self.last);
        }
        self.finished = true;
        Ok(())
    }
}

/// Decodes a stored reply and marks it as replayed.
pub(crate) fn replayed<T: Message + Default>(
    bytes: &[u8],
    result: impl FnOnce(&mut T) -> Option<&mut WriteResult>,
) -> Result<T> {
    let mut reply =
        T::decode(bytes).map_err(|e| Error::internal(format!("stored reply does not decode: {e}")))?;
    if let Some(r) = result(&mut reply) {
        r.replayed = true;
    }
    Ok(reply)
}

/// A new event about an entity, by an actor.
pub(crate) fn event(kind: EventKind, entity: &str, entity_id: &str, actor: &Actor) -> Event {
    Event {
        kind: kind as i32,
        entity: entity.to_owned(),
        entity_id: entity_id.to_owned(),
        actor: Some(actor.clone()),
        ..Default::default()
    }
}

/// A storage fault injected by a fail point (tests only): what a lost connection gives.
#[allow(dead_code)] // used only when the failpoints feature is on
pub(crate) fn injected(point: &str) -> Error {
    Error::Unavailable(sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        format!("fault injected at {point}"),
    )))
}
