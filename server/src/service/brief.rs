//! The brief: what an agent is told when a session starts or resumes, read from the store
//! and fitted to a budget by `core::brief`.

use baton_proto::v1::Brief;

use crate::core::brief;
use crate::error::Result;
use crate::store::{BriefData, BriefFor, Store};

/// Reads what the brief is made of and fits it to `budget` characters.
pub async fn build_brief<S: Store>(
    store: &S,
    q: BriefFor,
    budget: usize,
    changes: &[String],
) -> Result<Brief> {
    let project = q.project.clone();
    Ok(fit_brief(&project, store.brief_data(q).await?, budget, changes))
}

/// Fits what was read to `budget` characters.
pub fn fit_brief(project: &str, data: BriefData, budget: usize, changes: &[String]) -> Brief {
    let mut out = brief::fit(project, brief::sections(&data, changes), budget);
    out.as_of_revision = data.as_of_revision;
    out.last_git_head = data.previous.map(|p| p.git_head).unwrap_or_default();
    out
}
