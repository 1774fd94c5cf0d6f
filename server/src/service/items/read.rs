//! ReadItems and ListItemLogs: reads on the pool, paged by count and bytes
//! (`core::page`). A read's pages show the log as its first page found it (`ReadFrom`); a
//! listing groups keys by a delimiter and skips past each group without reading it twice.

use baton_proto::v1::{ItemLog as LogMessage, ListItemLogsResponse, ReadItemsResponse};
use prost::Message;

use super::{item_message, log_message};
use crate::core::items::{ListFrom, Listing, Place, ReadFrom, after_common};
use crate::core::page::{self, Budget};
use crate::error::Result;
use crate::store::Store;
use crate::store::items::From;

/// A read of a log's items, validated.
#[derive(Debug, Clone)]
pub struct Reading {
    pub project: String,
    pub key: String,
    /// Only the newest this many (`None`: all).
    pub last: Option<u32>,
    pub after_seq: i64,
    pub page_size: i64,
    /// From a previous page's token.
    pub from: Option<ReadFrom>,
}

/// What an item costs a page besides its value: its other fields, encoded.
const ITEM_OVERHEAD: usize = 64;

/// ReadItems.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn read<S: Store>(store: &S, r: Reading) -> Result<ReadItemsResponse> {
    let as_of_revision = crate::store::head_revision(store, r.project.clone()).await?;
    let Some(log) = store.item_log(r.project.clone(), r.key.clone()).await? else {
        return Ok(ReadItemsResponse { as_of_revision, ..Default::default() });
    };
    let shown = log_message(&log);
    let empty = |log: LogMessage| ReadItemsResponse { log: Some(log), as_of_revision, ..Default::default() };
    let from = if let Some(from) = r.from {
        from
    } else {
        let through = log.last_seq;
        let after = match r.last {
            Some(0) => return Ok(empty(shown)),
            Some(n) => {
                let nth =
                    store.nth_newest_seq(r.project.clone(), r.key.clone(), through, i64::from(n)).await?;
                nth.map_or(r.after_seq, |seq| r.after_seq.max(seq - 1))
            }
            None => r.after_seq,
        };
        ReadFrom { after, through }
    };
    let sizes = store
        .item_sizes(r.project.clone(), r.key.clone(), (from.after, from.through), r.page_size + 1)
        .await?;
    let mut budget = Budget::with_bytes(r.page_size, page::REPLY_BUDGET.saturating_sub(shown.encoded_len()));
    let fits: Vec<i64> = sizes
        .iter()
        .take_while(|(_, bytes)| {
            budget.take(usize::try_from(*bytes).unwrap_or(usize::MAX).saturating_add(ITEM_OVERHEAD))
        })
        .map(|(seq, _)| *seq)
        .collect();
    let Some(&last_fit) = fits.last() else { return Ok(empty(shown)) };
    let items = store.items(r.project, r.key, (from.after, last_fit)).await?;
    let next_page_token = if sizes.len() > fits.len() {
        page::token(&ReadFrom { after: last_fit, through: from.through })
    } else {
        String::new()
    };
    Ok(ReadItemsResponse {
        log: Some(shown),
        items: items.into_iter().map(item_message).collect(),
        next_page_token,
        as_of_revision,
    })
}

/// A listing of logs, validated.
#[derive(Debug, Clone)]
pub struct Listed {
    pub project: String,
    pub listing: Listing,
    pub summaries: bool,
    pub page_size: i64,
    pub from: Option<ListFrom>,
}

/// ListItemLogs.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn list<S: Store>(store: &S, l: Listed) -> Result<ListItemLogsResponse> {
    let as_of_revision = crate::store::head_revision(store, l.project.clone()).await?;
    let mut from = match l.from {
        None => From::AtLeast(l.listing.prefix.clone()),
        Some(ListFrom::Key(key)) => From::After(key),
        Some(ListFrom::Common(common)) => From::AtLeast(after_common(&common)),
    };
    let batch = (l.page_size + 1).min(1000);
    let mut budget = Budget::new(l.page_size);
    let mut reply = ListItemLogsResponse { as_of_revision, ..Default::default() };
    let mut last: Option<ListFrom> = None;
    let mut skipping: Option<String> = None;
    'pages: loop {
        let rows = store.item_logs(l.project.clone(), from.clone(), batch, l.summaries).await?;
        let full = i64::try_from(rows.len()).unwrap_or(i64::MAX) == batch;
        for row in rows {
            if skipping.as_ref().is_some_and(|c| row.key.starts_with(c.as_str())) {
                continue;
            }
            match l.listing.place(&row.key) {
                Place::Beyond => break 'pages,
                Place::Log => {
                    let shown = log_message(&row);
                    if !budget.take(shown.encoded_len()) {
                        reply.next_page_token = last.as_ref().map(page::token).unwrap_or_default();
                        break 'pages;
                    }
                    from = From::After(row.key.clone());
                    last = Some(ListFrom::Key(row.key));
                    reply.logs.push(shown);
                }
                Place::Common(common) => {
                    if !budget.take(common.len() + 8) {
                        reply.next_page_token = last.as_ref().map(page::token).unwrap_or_default();
                        break 'pages;
                    }
                    from = From::AtLeast(after_common(&common));
                    reply.common_prefixes.push(common.clone());
                    last = Some(ListFrom::Common(common.clone()));
                    skipping = Some(common);
                }
            }
        }
        if !full {
            break;
        }
    }
    Ok(reply)
}
