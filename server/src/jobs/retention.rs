//! Retention: prunes old checkpoints by the rules in `core::retention` and deletes item logs
//! idle longer than `item_log_days`, project by project (each its own write with its own
//! event), and forgets old idempotency replies. Runs
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
    /// Item logs not changed for this many days go; 0 keeps them.
    pub item_log_days: u32,
    /// Commit links recorded this many days ago go; 0 keeps them.
    pub commit_link_days: u32,
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

impl Policy {
    /// The server's configured policy.
    pub fn of(config: &crate::config::Config) -> Self {
        Self {
            keep_days: config.keep_days,
            keep_ancestors: config.keep_ancestors,
            item_log_days: config.item_log_days,
            commit_link_days: config.commit_link_days,
        }
    }

    pub fn cutoff_us(&self) -> i64 {
        days_ago(self.keep_days)
    }

    /// Item logs last changed before this go (`None`: they are kept).
    pub fn item_cutoff_us(&self) -> Option<i64> {
        (self.item_log_days > 0).then(|| days_ago(self.item_log_days))
    }

    /// Commit links recorded before this go (`None`: they are kept).
    pub fn link_cutoff_us(&self) -> Option<i64> {
        (self.commit_link_days > 0).then(|| days_ago(self.commit_link_days))
    }
}

fn days_ago(days: u32) -> i64 {
    now_us().saturating_sub(i64::from(days).saturating_mul(86_400_000_000))
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
    let projects = match &project {
        Some(p) => vec![p.clone()],
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
    if let Some(item_cutoff) = policy.item_cutoff_us() {
        expire_item_logs(store, project.clone(), item_cutoff, dry_run, &actor, &mut out).await?;
    }
    if let Some(link_cutoff) = policy.link_cutoff_us() {
        expire_commit_links(store, project, link_cutoff, dry_run, &actor, &mut out).await?;
    }
    Ok(out)
}

/// The report of `project` in `out`, added when it has none.
fn report<'a>(out: &'a mut Vec<ProjectPruned>, project: &str) -> &'a mut ProjectPruned {
    let at = out.iter().position(|r| r.project == project).unwrap_or_else(|| {
        out.push(ProjectPruned { project: project.to_owned(), ..ProjectPruned::default() });
        out.len() - 1
    });
    &mut out[at]
}

/// Deletes the old commit links of one project, or of every project that has some, into
/// the projects' reports.
async fn expire_commit_links<S: Store>(
    store: &S,
    project: Option<String>,
    cutoff_us: i64,
    dry_run: bool,
    actor: &Actor,
    out: &mut Vec<ProjectPruned>,
) -> Result<()> {
    let projects = match project {
        Some(p) => vec![p],
        None => store.projects_with_old_commit_links(cutoff_us).await?,
    };
    for project in projects {
        let expired =
            crate::service::commit::expire(store, project.clone(), cutoff_us, dry_run, actor.clone()).await?;
        if expired.0 == 0 {
            continue;
        }
        let r = report(out, &project);
        r.removed_commit_links = i64::try_from(expired.0).unwrap_or(i64::MAX);
        r.commit_links_revision = expired.1;
    }
    Ok(())
}

/// Deletes the idle item logs of one project, or of every project that has some, into the
/// projects' reports.
async fn expire_item_logs<S: Store>(
    store: &S,
    project: Option<String>,
    cutoff_us: i64,
    dry_run: bool,
    actor: &Actor,
    out: &mut Vec<ProjectPruned>,
) -> Result<()> {
    let projects = match project {
        Some(p) => vec![p],
        None => store.projects_with_idle_item_logs(cutoff_us).await?,
    };
    for project in projects {
        let expired =
            crate::service::items::expire(store, project.clone(), cutoff_us, dry_run, actor.clone()).await?;
        if expired.keys.is_empty() {
            continue;
        }
        let r = report(out, &project);
        r.removed_item_logs = expired.keys;
        r.item_logs_revision = expired.revision;
    }
    Ok(())
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
                        item_logs = p.removed_item_logs.len(),
                        commit_links = p.removed_commit_links,
                        revision = p.revision,
                        "retention pruned"
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
