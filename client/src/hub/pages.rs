//! Lists read to the end: the hub answers every list a page at a time (by count and by
//! bytes), and these follow `next_page_token` until it is empty or the caller has enough.

use baton_proto::v1::{
    Checkpoint, Conflict, Event, ListCheckpointsRequest, ListConflictsRequest, ListEventsRequest,
    ListMemoryRequest, ListMemoryResponse, ListSessionsRequest, Session,
};

use crate::hub::remote::{self, Hub};

/// Whether to ask for the page after this one: a token that repeats, or comes with an empty
/// page, would have the client ask forever (a hub is not trusted to end its lists).
fn continues(next: &str, current: &str, got: usize) -> bool {
    !next.is_empty() && next != current && got > 0
}

/// A session's checkpoints in tree order, and its head.
pub async fn checkpoints(
    hub: &mut Hub,
    session_id: &str,
    include_state: bool,
) -> anyhow::Result<(Vec<Checkpoint>, String)> {
    let mut all = Vec::new();
    let mut page_token = String::new();
    loop {
        let reply = hub
            .checkpoints
            .list_checkpoints(ListCheckpointsRequest {
                session_id: session_id.to_owned(),
                include_state,
                page_size: 1000,
                page_token: page_token.clone(),
            })
            .await
            .map_err(remote::fail)?
            .into_inner();
        let got = reply.checkpoints.len();
        all.extend(reply.checkpoints);
        if !continues(&reply.next_page_token, &page_token, got) {
            return Ok((all, reply.head_checkpoint_id));
        }
        page_token = reply.next_page_token;
    }
}

/// Memory as one reply: every page's entries and record revisions, the first page's caps and
/// revision (the oldest: what was read is at least as new).
pub async fn memory(hub: &mut Hub, request: ListMemoryRequest) -> anyhow::Result<ListMemoryResponse> {
    let mut all: Option<ListMemoryResponse> = None;
    let mut page_token = String::new();
    loop {
        let reply = hub
            .memory
            .list_memory(ListMemoryRequest {
                page_size: 1000,
                page_token: page_token.clone(),
                ..request.clone()
            })
            .await
            .map_err(remote::fail)?
            .into_inner();
        let more = continues(&reply.next_page_token, &page_token, reply.entries.len());
        page_token.clone_from(&reply.next_page_token);
        match &mut all {
            None => all = Some(reply),
            Some(all) => {
                all.entries.extend(reply.entries);
                all.record_revisions.extend(reply.record_revisions);
            }
        }
        if !more {
            let mut all = all.unwrap_or_default();
            all.next_page_token.clear();
            return Ok(all);
        }
    }
}

/// Up to `limit` events after `after`, and the project's revision when the first was read.
pub async fn events(
    hub: &mut Hub,
    project: &str,
    after: i64,
    limit: usize,
) -> anyhow::Result<(Vec<Event>, i64)> {
    let mut all = Vec::new();
    let mut page_token = String::new();
    let mut as_of = None;
    while all.len() < limit {
        let reply = hub
            .events
            .list_events(ListEventsRequest {
                project: project.to_owned(),
                after_revision: after,
                limit: i32::try_from(limit - all.len()).unwrap_or(i32::MAX).min(10_000),
                kinds: vec![],
                page_token: page_token.clone(),
            })
            .await
            .map_err(remote::fail)?
            .into_inner();
        as_of.get_or_insert(reply.as_of_revision);
        let got = reply.events.len();
        all.extend(reply.events);
        if !continues(&reply.next_page_token, &page_token, got) {
            break;
        }
        page_token = reply.next_page_token;
    }
    Ok((all, as_of.unwrap_or(0)))
}

/// Every conflict after `after`.
pub async fn conflicts(hub: &mut Hub, project: &str, after: i64) -> anyhow::Result<Vec<Conflict>> {
    let mut all = Vec::new();
    let mut page_token = String::new();
    loop {
        let reply = hub
            .events
            .list_conflicts(ListConflictsRequest {
                project: project.to_owned(),
                after_revision: after,
                limit: 10_000,
                page_token: page_token.clone(),
            })
            .await
            .map_err(remote::fail)?
            .into_inner();
        let got = reply.conflicts.len();
        all.extend(reply.conflicts);
        if !continues(&reply.next_page_token, &page_token, got) {
            return Ok(all);
        }
        page_token = reply.next_page_token;
    }
}

/// Up to `limit` sessions matching `request`, newest first, and the revision of the first page.
pub async fn sessions(
    hub: &mut Hub,
    request: ListSessionsRequest,
    limit: usize,
) -> anyhow::Result<(Vec<Session>, i64)> {
    let mut all = Vec::new();
    let mut page_token = String::new();
    let mut as_of = None;
    while all.len() < limit {
        let reply = hub
            .sessions
            .list_sessions(ListSessionsRequest {
                page_size: i32::try_from(limit - all.len()).unwrap_or(i32::MAX).min(1000),
                page_token: page_token.clone(),
                ..request.clone()
            })
            .await
            .map_err(remote::fail)?
            .into_inner();
        as_of.get_or_insert(reply.as_of_revision);
        let got = reply.sessions.len();
        all.extend(reply.sessions);
        if !continues(&reply.next_page_token, &page_token, got) {
            break;
        }
        page_token = reply.next_page_token;
    }
    Ok((all, as_of.unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::continues;

    #[test]
    fn a_hub_cannot_keep_the_client_paging() {
        assert!(continues("b", "a", 3));
        assert!(!continues("", "a", 3), "the end");
        assert!(!continues("a", "a", 3), "the same token again");
        assert!(!continues("b", "a", 0), "a token with an empty page");
    }
}
