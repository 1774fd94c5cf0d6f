//! A kept write's changes, handed to the next write of its lane's batch
//! (`store::writer::Handover`), which sends them with its lock as one call of
//! `baton_apply_lock` (the migrations `apply_then_lock`, `apply_lock_in_one`): one round
//! trip for both, where a project's writes run one after another on their lane
//! (`baton-bench`'s rows "small memory writes, one hot project" and "Baton/etcd" at 8 and
//! 32 clients). A lock that reads a session first has no such call: the changes go alone in
//! front of it. When no write follows and none other of the batch waits for its commit,
//! the writer sends them as one statement instead (`alone.rs`).

use std::any::Any;

use futures::future::BoxFuture;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Arguments as _, PgConnection, Postgres, Row as _};
use tokio::sync::oneshot;

use super::alone::{self, Part};
use super::sql;
use super::write::{Locking, locking};
use crate::error::{Error, Result, connection_lost};
use crate::store::model::{FirstRead, Lock};
use crate::store::writer::{Handed, Handover, Lease};

/// What failed in a write's refused changes: their SQLSTATE and message.
pub(super) type Refusal = (String, String);

/// A write's changes (`baton_apply_lock`'s arguments, `apply::arguments`), and where to
/// say why they were refused, if they are.
pub(super) struct Apply {
    args: PgArguments,
    refused: oneshot::Sender<Refusal>,
    /// The parts of the one statement that makes them when the write is kept alone
    /// (`alone.rs`), if their shape has one.
    alone: Option<Vec<Part>>,
}

impl Apply {
    pub(super) fn new(args: PgArguments, alone: Option<Vec<Part>>) -> (Self, oneshot::Receiver<Refusal>) {
        let (refused, refusal) = oneshot::channel();
        (Self { args, refused, alone }, refusal)
    }
}

impl Handover<Postgres> for Apply {
    fn send(self: Box<Self>, conn: &mut PgConnection) -> BoxFuture<'_, Result<Handed, sqlx::Error>> {
        Box::pin(async move {
            let Self { args, refused, .. } = *self;
            let failed: Option<Refusal> = sqlx::query_as_with(sql::APPLY, args).fetch_optional(conn).await?;
            Ok(tell(refused, failed))
        })
    }

    /// As one statement, where the changes' shape has one: their failure ends the
    /// transaction, which keeps nothing else. An error the statement did not cause (the
    /// connection lost, a transaction failed before it) leaves the batch in doubt, as
    /// `send`'s does.
    fn send_alone(self: Box<Self>, conn: &mut PgConnection) -> BoxFuture<'_, Result<Handed, sqlx::Error>> {
        let Some(parts) = self.alone.as_deref() else { return self.send(conn) };
        let statement = alone::statement(parts);
        Box::pin(async move {
            let Self { args, refused, .. } = *self;
            match sqlx::query_with(sqlx::AssertSqlSafe(statement), args).execute(conn).await {
                Ok(_) => Ok(Handed::Applied),
                Err(e) => match refusal(&e) {
                    Some(refusal) => {
                        let _ = refused.send(refusal);
                        Ok(Handed::Aborted)
                    }
                    None => Err(e),
                },
            }
        })
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// Failures of a statement that never ran, which `send` would not have had caught either:
/// the connection is abandoned and the batch with it, as for any error in doubt.
const NOT_RUN: &[&str] = &[
    "25P02", // in_failed_sql_transaction: the transaction had failed before it
    "26000", // invalid_sql_statement_name: a prepared statement the connection lost
    "0A000", // feature_not_supported: "cached plan must not change result type" after a migration
];

/// The SQLSTATE and message of a failure the statement itself caused (as
/// `baton_apply_lock`'s subtransaction would have caught it); `None` for any other error.
fn refusal(error: &sqlx::Error) -> Option<Refusal> {
    let sqlx::Error::Database(db) = error else { return None };
    let code = db.code()?;
    if NOT_RUN.contains(&code.as_ref()) || connection_lost(error) {
        return None;
    }
    Some((code.into_owned(), db.message().to_owned()))
}

/// Tells the write that handed over its changes why they were refused, if they were.
fn tell(refused: oneshot::Sender<Refusal>, failed: Option<Refusal>) -> Handed {
    match failed {
        Some(refusal) => {
            let _ = refused.send(refusal);
            Handed::Refused
        }
        None => Handed::Applied,
    }
}

/// Sends the handover `taken` from the lease (`Lease::take_handover`) with the write's lock
/// where the call has a variant for the lock's first read, else alone, and tells the lease
/// what became of it. That runs as a task of its own, so that it is told even if the write
/// is cancelled meanwhile (its request dropped), which would otherwise leave the batch in
/// doubt. The lease back, with what the lock found (`None`: the lock is still to be taken,
/// as the changes went alone or were refused). An error: the batch is abandoned, and the
/// write that handed its changes over gets the database's error, which may be its own.
pub(super) async fn send_with_lock(
    mut lease: Lease<Postgres>,
    taken: Box<dyn Any + Send>,
    lock: &Lock,
) -> Result<(Lease<Postgres>, Option<Locking>)> {
    let apply = taken
        .downcast::<Apply>()
        .map_err(|_| Error::internal("a write handed over something other than its changes"))?;
    // `None`: no variant of the call for the lock's first read.
    let with_lock = match &lock.first_read {
        None => Some(None),
        Some(FirstRead::Record(record)) => Some(Some(record.clone())),
        Some(FirstRead::Session(_)) => None,
    };
    let (project, request_id, bounded) = (lock.project.clone(), lock.request_id.clone(), lease.bounded());
    let task = tokio::spawn(async move {
        let sent = match with_lock {
            None => apply.send(&mut lease).await.map(|handed| (handed, None)),
            Some(record) => {
                call(&mut lease, *apply, &project, request_id.as_deref(), record.as_deref(), bounded).await
            }
        };
        match sent {
            Ok((handed, rows)) => {
                lease.handed(handed);
                Some((lease, rows))
            }
            Err(e) => {
                lease.handover_failed(e);
                None
            }
        }
    });
    match task.await {
        Ok(Some((lease, rows))) => Ok((lease, rows.map(locking).transpose()?)),
        Ok(None) => Err(Error::Unavailable(sqlx::Error::Io(std::io::Error::other(
            "the write before this one in its batch failed; the batch was not kept",
        )))),
        Err(e) => Err(Error::internal(format!("the lock's task ended: {e}"))),
    }
}

/// `baton_apply_lock`: whether the changes were made, and if so the lock's rows.
async fn call(
    lease: &mut Lease<Postgres>,
    apply: Apply,
    project: &str,
    request_id: Option<&str>,
    record: Option<&str>,
    bounded: bool,
) -> Result<(Handed, Option<Vec<PgRow>>), sqlx::Error> {
    let Apply { mut args, refused, .. } = apply;
    args.add(project).map_err(sqlx::Error::Encode)?;
    args.add(request_id).map_err(sqlx::Error::Encode)?;
    args.add(record).map_err(sqlx::Error::Encode)?;
    args.add(bounded).map_err(sqlx::Error::Encode)?;
    let rows: Vec<PgRow> = sqlx::query_with(sql::APPLY_LOCK, args).fetch_all(&mut **lease).await?;
    let failed = match rows.first() {
        Some(row) => match row.try_get::<Option<String>, _>("out_code")? {
            Some(code) => Some((code, row.try_get::<Option<String>, _>("out_message")?.unwrap_or_default())),
            None => None,
        },
        None => None,
    };
    let handed = tell(refused, failed);
    Ok((handed, (handed == Handed::Applied).then_some(rows)))
}
