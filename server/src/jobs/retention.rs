//! Retention: prunes old checkpoints by the rules in `core::retention`, project by project
//! (each its own write with its own event), and forgets old idempotency replies. Runs
//! periodically in every instance (several instances serialize on the project lock, and the
//! second finds nothing left to do), from `baton-server prune`, and from AdminService.

use std::time::Duration;

use baton_proto::v1::{Actor, ProjectPruned};
use tokio::sync::watch;

use crate::error::Result;
use crate::store::Store;

/// Clients stop retrying a queued write after 30 days; its stored reply can go after 31.
const REQUEST_REPLIES_KEPT: Duration = Duration::from_hours(31 * 24);

/// What a retention run keeps.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub keep_days: u32,
    pub keep_ancestors: usize,
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

impl Policy {
    pub fn cutoff_us(&self) -> i64 {
        now_us().saturating_sub(i64::from(self.keep_days).saturating_mul(86_400_000_000))
    }
}

/// Prunes one project, or every project with old checkpoints. Reports the projects changed
/// (or, on a dry run, that would change).
pub async fn prune<S: Store>(
    store: &S,
    project: Option<String>,
    policy: Policy,
    dry_run: bool,
    actor: Actor,
) -> Result<Vec<ProjectPruned>> {
    let cutoff = policy.cutoff_us();
    let projects = match project {
        Some(p) => vec![p],
        None => store.projects_with_old_checkpoints(cutoff).await?,
    };
    let mut out = Vec::new();
    for project in projects {
        if let Some(report) = crate::service::retention::prune(
            store,
            project,
            cutoff,
            policy.keep_ancestors,
            dry_run,
            actor.clone(),
        )
        .await?
        {
            out.push(report);
        }
    }
    Ok(out)
}

/// The periodic job.
pub async fn run<S: Store>(
    store: S,
    policy: Policy,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let actor = Actor { token: "retention".into(), ..Actor::default() };
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
        match prune(&store, None, policy, false, actor.clone()).await {
            Ok(changed) => {
                for p in changed {
                    tracing::info!(
                        project = %p.project,
                        checkpoints = p.removed_checkpoints.len(),
                        chunks = p.removed_chunks,
                        revision = p.revision,
                        "retention pruned checkpoints"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "retention run failed; will retry"),
        }
        let before =
            now_us().saturating_sub(i64::try_from(REQUEST_REPLIES_KEPT.as_micros()).unwrap_or(i64::MAX));
        match store.prune_requests(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(replies = n, "forgot old idempotency replies"),
            Err(e) => tracing::warn!(error = %e, "forgetting old idempotency replies failed; will retry"),
        }
    }
}
