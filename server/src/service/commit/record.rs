//! RecordCommits: the stored links of the request's commits read under the project's lock,
//! `core::commit::plan` decides, one write stores what changed (none when nothing did).

use std::collections::BTreeSet;

use baton_proto::v1::{CommitLink, CommitsChange, EventKind, RecordCommitsResponse, event::Value};

use super::link_message;
use crate::core::commit::{Recorded, plan};
use crate::core::conflict;
use crate::core::lww::Decision;
use crate::error::{Error, Result};
use crate::service::write::{self, event};
use crate::store::commit_links::CommitTx;
use crate::store::model::{Change, CommitChange, Lock};
use crate::store::rows::encode_actor;
use crate::store::{Store, WriteCtx};

/// RecordCommits of validated links (`api::commit`).
#[tracing::instrument(level = "debug", skip_all)]
pub async fn record<S: Store>(
    store: &S,
    ctx: WriteCtx,
    project: String,
    mut links: Vec<Recorded>,
) -> Result<RecordCommitsResponse> {
    let lock = Lock {
        project,
        request_id: ctx.request_id.clone(),
        memory: false,
        first_read: None,
        rewrites_log: false,
    };
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let sessions: BTreeSet<String> = links.iter().map(|r| r.link.session_id.clone()).collect();
            for id in &sessions {
                if w.session(id).await?.is_none() {
                    return Err(Error::NotFound(format!(
                        "links: no session {id} in project {:?}: start it first (a queued link is sent after \
                         its session's start)",
                        w.project
                    )));
                }
            }
            let commits: Vec<String> =
                links.iter().map(|r| r.link.commit_id.clone()).collect::<BTreeSet<_>>().into_iter().collect();
            let stored = w.tx().commit_links(&commits).await?;
            let author = encode_actor(&ctx.actor);
            for r in &mut links {
                r.link.created_us = w.now_us;
                r.link.author.clone_from(&author);
            }
            let mut plan = plan(&stored, links);
            if plan.put.is_empty() && plan.remove.is_empty() {
                let links = plan.result.iter().map(link_message).collect();
                return Ok(RecordCommitsResponse { links, result: None });
            }
            let revision = w.revision();
            for (l, _) in &mut plan.put {
                l.revision = revision;
                l.author.clone_from(&author);
            }
            for l in &mut plan.result {
                if let Some((put, _)) =
                    plan.put.iter().find(|(p, _)| p.commit_id == l.commit_id && p.session_id == l.session_id)
                {
                    l.clone_from(put);
                }
            }
            let removed: Vec<CommitLink> = plan
                .remove
                .iter()
                .map(|(commit, session)| CommitLink {
                    commit_id: commit.clone(),
                    session_id: session.clone(),
                    ..Default::default()
                })
                .collect();
            let change =
                CommitsChange { links: plan.put.iter().map(|(l, _)| link_message(l)).collect(), removed };
            let first = plan.put.first().map(|(l, _)| l.commit_id.clone()).unwrap_or_default();
            if !plan.remove.is_empty() {
                w.apply(Change::Commits(CommitChange::Remove(plan.remove)));
            }
            w.apply(Change::Commits(CommitChange::Put(plan.put)));
            let mut ev = event(EventKind::CommitsChanged, "commit", &first, &ctx.actor);
            ev.value = Some(Value::Commits(change));
            w.emit(ev)?;
            let result = conflict::result(revision, Decision::Applied, None, ctx.writer());
            let reply = RecordCommitsResponse {
                links: plan.result.iter().map(link_message).collect(),
                result: Some(result),
            };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}
