//! ListCommits: a project's links (a session's, when asked), newest commit first, paged by
//! count and bytes.

use baton_proto::v1::ListCommitsResponse;
use prost::Message;

use super::link_message;
use crate::core::page::{self, Budget};
use crate::error::Result;
use crate::store::commit_links::After;
use crate::store::{Store, head_revision};

/// ListCommits of a validated request.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn list<S: Store>(
    store: &S,
    project: String,
    session: Option<String>,
    limit: i64,
    after: Option<After>,
) -> Result<ListCommitsResponse> {
    let as_of_revision = head_revision(store, project.clone()).await?;
    let rows = store.list_links(project, session, after, limit.saturating_add(1)).await?;
    let mut budget = Budget::new(limit);
    let mut links = Vec::new();
    let mut last = None;
    let mut more = false;
    for row in &rows {
        let message = link_message(row);
        if !budget.take(message.encoded_len()) {
            more = true;
            break;
        }
        last = Some((row.committed_us, row.commit_id.clone(), row.session_id.clone()));
        links.push(message);
    }
    let next_page_token = match last {
        Some(position) if more => page::token(&position),
        _ => String::new(),
    };
    Ok(ListCommitsResponse { links, as_of_revision, next_page_token })
}
