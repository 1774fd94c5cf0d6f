//! Retention of commit links (`--commit-link-days`, 0 keeping them): a project's links
//! recorded before the cut-off deleted with their fingerprints, in writes of at most
//! `BATCH` links each with its COMMITS_CHANGED event naming them, by the retention job,
//! `baton-server prune` or AdminService.Prune.

use baton_proto::v1::{Actor, CommitLink, CommitsChange, EventKind, event::Value};

use crate::error::Result;
use crate::service::retention::run;
use crate::service::write::event;
use crate::store::commit_links::CommitTx;
use crate::store::model::{Change, CommitChange};
use crate::store::{Store, WriteCtx};

/// Links one write deletes, at most.
const BATCH: usize = 1000;

/// Deletes the project's links recorded before `cutoff_us`: how many (or, on a dry run, how
/// many would go, up to a batch), and the revision of the last write.
#[tracing::instrument(level = "debug", skip_all, fields(project = %project))]
pub async fn expire<S: Store>(
    store: &S,
    project: String,
    cutoff_us: i64,
    dry_run: bool,
    actor: Actor,
) -> Result<(usize, i64)> {
    let mut out = (0, 0);
    loop {
        let ctx = WriteCtx { actor: actor.clone(), ..WriteCtx::default() };
        let limit = i64::try_from(BATCH).unwrap_or(i64::MAX);
        let (gone, revision) = run(store, &project, ctx, false, move |w, ctx| {
            Box::pin(async move {
                let old = w.tx().old_commit_links(cutoff_us, limit).await?;
                if dry_run || old.is_empty() {
                    return Ok((old.len(), 0));
                }
                let removed = old
                    .iter()
                    .map(|(commit, session)| CommitLink {
                        commit_id: commit.clone(),
                        session_id: session.clone(),
                        ..CommitLink::default()
                    })
                    .collect();
                let n = old.len();
                w.revision();
                w.apply(Change::Commits(CommitChange::Remove(old)));
                let mut ev = event(EventKind::CommitsChanged, "commit", "", &ctx.actor);
                ev.value = Some(Value::Commits(CommitsChange { links: Vec::new(), removed }));
                let revision = w.emit(ev)?.revision;
                w.finish(ctx, &baton_proto::v1::ListCommitsResponse::default())?;
                Ok((n, revision))
            })
        })
        .await?;
        out = (out.0 + gone, out.1.max(revision));
        if gone < BATCH || dry_run {
            return Ok(out);
        }
    }
}
