//! The gRPC services: decode and validate a request, call the store, map errors. One file
//! per service; they share the `Api` state and the helpers here.

use std::sync::Arc;

use baton_proto::v1::{Actor, AgentKind, ConflictPolicy, WriteOptions};
use prost::Message;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::auth::{Auth, Principal};
use crate::core::lww::Policy;
use crate::core::validate::{self, Invalid, invalid, limits};
use crate::events::Hub;
use crate::store::{Store, WriteCtx};

pub mod admin;
mod brief;
pub(crate) mod checkpoint;
pub(crate) mod commit;
mod event;
mod items;
pub(crate) mod memory;
mod reservation;
mod search;
pub(crate) mod session;
mod thread;

pub use crate::service::brief::build_brief;
pub use checkpoint::MAX_CHUNKS_BYTES;

/// Request limits of this instance.
#[derive(Debug, Clone)]
pub struct Limits {
    /// State plus payload of one checkpoint, uncompressed.
    pub max_checkpoint_bytes: usize,
    /// Projects in one Watch.
    pub max_watch_projects: usize,
    /// Retention defaults for AdminService.Prune.
    pub retention: crate::jobs::retention::Policy,
    /// How long a search's statements may run.
    pub search_time_limit: std::time::Duration,
    /// Live reservations one project may have.
    pub max_reservations: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_checkpoint_bytes: 8 * 1024 * 1024,
            max_watch_projects: 100,
            retention: crate::jobs::retention::Policy {
                keep_days: 90,
                keep_ancestors: 5,
                item_log_days: 0,
                commit_link_days: 0,
            },
            search_time_limit: std::time::Duration::from_secs(2),
            max_reservations: 1000,
        }
    }
}

/// State shared by every service.
#[derive(Clone)]
pub struct Api<S: Store> {
    pub store: S,
    pub hub: Hub<S>,
    pub limits: Arc<Limits>,
    pub shutdown: watch::Receiver<bool>,
    pub auth: Auth<S>,
    /// The brief's memory sections, kept while a project's memory is unchanged.
    pub memory_cache: crate::service::memory_cache::MemoryCache,
    pub watch_slots: Arc<crate::limits::Slots>,
    pub search_slots: Arc<crate::limits::Slots>,
}

/// Who a per-token cap counts a request against, and how a refusal names them: the token,
/// or on an open hub (no tokens to tell callers apart) the client's address.
pub(crate) fn slot_key<T>(who: &Principal, request: &tonic::Request<T>) -> (String, String) {
    match who {
        Principal::Token { name, .. } => (format!("token:{name}"), format!("token {name:?}")),
        Principal::Open => {
            let ip = request.remote_addr().map(|a| a.ip().to_string()).unwrap_or_default();
            (format!("open:{ip}"), format!("client {ip}"))
        }
    }
}

fn us(ts: &prost_types::Timestamp) -> i64 {
    crate::store::rows::us(ts)
}

/// Validates a write's options and makes its context. `hash_view` is the request with its
/// clock fields cleared (a retried queue flush sends a new `client_now`, and a write first tried live has no `written_at`), hashed to tell a
/// retry from a reused request_id.
pub(crate) fn write_ctx(
    rpc: &str,
    hash_view: &impl Message,
    write: Option<&WriteOptions>,
    redacted: u32,
    who: &Principal,
) -> Result<WriteCtx, Invalid> {
    let default = WriteOptions::default();
    let w = write.unwrap_or(&default);
    validate::single_line("write.request_id", &w.request_id, 128)?;
    let policy = match validate::enum_value::<ConflictPolicy>("write.policy", w.policy, true)? {
        ConflictPolicy::Reject => Policy::Reject,
        _ => Policy::Overwrite,
    };
    let queued = match (&w.written_at, &w.client_now) {
        (None, None) => None,
        (Some(at), Some(now)) => Some((us(at), us(now))),
        _ => {
            return Err(invalid(
                "write.written_at",
                "written_at and client_now go together: set both (queued writes) or neither",
            ));
        }
    };
    if let Some(base) = w.base_revision
        && base < 0
    {
        return Err(invalid(
            "write.base_revision",
            format!("{base} is negative; revisions start at 1 (0 = record absent)"),
        ));
    }
    validate::enum_value::<AgentKind>("write.agent", w.agent, true)?;
    validate::single_line("write.host", &w.host, limits::SHORT)?;
    validate::single_line("write.user", &w.user, limits::SHORT)?;
    if !w.session_id.is_empty() {
        validate::uuid("write.session_id", &w.session_id)?;
    }
    let mut hasher = Sha256::new();
    hasher.update(rpc.as_bytes());
    hasher.update([0]);
    hasher.update(hash_view.encode_to_vec());
    Ok(WriteCtx {
        request_id: (!w.request_id.is_empty()).then(|| w.request_id.clone()),
        request_hash: hasher.finalize().to_vec(),
        base_revision: w.base_revision,
        policy,
        queued,
        actor: Actor {
            token: who.name().to_owned(),
            agent: w.agent,
            host: w.host.clone(),
            user: w.user.clone(),
            session_id: w.session_id.clone(),
        },
        redacted,
    })
}

/// Clears the clock fields that legitimately differ between retries of one write: a write
/// first tried live and then replayed from a client's queue is the same write.
pub(crate) fn without_clock(write: &mut Option<WriteOptions>) {
    if let Some(w) = write.as_mut() {
        w.client_now = None;
        w.written_at = None;
    }
}
