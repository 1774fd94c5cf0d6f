//! A kept write's `baton_apply`, handed to the next write of its lane's batch
//! (`store::writer::Handover`), which sends it with its lock as one call,
//! `baton_apply_lock` (the migration `apply_then_lock`): one round trip for both, where a
//! project's writes run one after another on their lane (`baton-bench`'s rows "small memory
//! writes, one hot project" and "Baton/etcd" at 8 and 32 clients). A lock that reads a
//! session first has no such call: the changes go alone in front of it.

use std::any::Any;

use futures::future::BoxFuture;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Arguments as _, PgConnection, Postgres, Row as _};
use tokio::sync::oneshot;

use super::sql;
use super::write::{Locking, locking};
use crate::error::{Error, Result};
use crate::store::model::{FirstRead, Lock};
use crate::store::writer::{Handed, Handover, Lease};

/// What failed in a refused `baton_apply`: its SQLSTATE and message.
pub(super) type Refusal = (String, String);

/// A write's `baton_apply` (its arguments, `apply::arguments`), and where to say why it was
/// refused, if it is.
pub(super) struct Apply {
    args: PgArguments,
    refused: oneshot::Sender<Refusal>,
}

impl Apply {
    pub(super) fn new(args: PgArguments) -> (Self, oneshot::Receiver<Refusal>) {
        let (refused, refusal) = oneshot::channel();
        (Self { args, refused }, refusal)
    }
}

impl Handover<Postgres> for Apply {
    fn send(self: Box<Self>, conn: &mut PgConnection) -> BoxFuture<'_, Result<Handed, sqlx::Error>> {
        Box::pin(async move {
            let Self { args, refused } = *self;
            let failed: Option<Refusal> = sqlx::query_as_with(sql::APPLY, args).fetch_optional(conn).await?;
            Ok(tell(refused, failed))
        })
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
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
/// where the call has a variant for the lock's first read, else alone; tells the lease what
/// became of it. `Some`: what the lock found; `None`: the lock is still to be taken (the
/// changes went alone, or were refused, and the call took no lock).
pub(super) async fn send_with_lock(
    lease: &mut Lease<Postgres>,
    taken: Box<dyn Any + Send>,
    lock: &Lock<'_>,
) -> Result<Option<Locking>> {
    let apply = taken
        .downcast::<Apply>()
        .map_err(|_| Error::internal("a write handed over something other than its changes"))?;
    let record = match lock.first_read {
        None => None,
        Some(FirstRead::Record(record)) => Some(record),
        Some(FirstRead::Session(_)) => {
            let handed = apply.send(&mut **lease).await?;
            lease.handed(handed);
            return Ok(None);
        }
    };
    let Apply { mut args, refused } = *apply;
    let bound = (|| {
        args.add(lock.project)?;
        args.add(lock.request_id)?;
        args.add(record)?;
        args.add(lease.bounded())
    })();
    bound.map_err(|e| Error::internal(format!("the lock's arguments: {e}")))?;
    let rows: Vec<PgRow> = sqlx::query_with(sql::APPLY_LOCK, args).fetch_all(&mut **lease).await?;
    let failed = match rows.first() {
        Some(row) => match row.try_get::<Option<String>, _>("out_code")? {
            Some(code) => Some((code, row.try_get::<Option<String>, _>("out_message")?.unwrap_or_default())),
            None => None,
        },
        None => None,
    };
    let handed = tell(refused, failed);
    lease.handed(handed);
    match handed {
        Handed::Applied => Ok(Some(locking(rows)?)),
        Handed::Refused => Ok(None),
    }
}
