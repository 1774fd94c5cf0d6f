//! The server's error type and its one mapping to `tonic::Status`.
//!
//! Expected failures carry a message that says what was wrong and what to do. Storage and
//! internal failures are logged with their detail and answered without it: no SQL text or
//! driver message ever reaches a client.

use baton_proto::v1::{Conflict, RejectedWrite};
use prost::Message;
use tonic::{Code, Status};

use crate::core::checkpoint::IntegrityError;
use crate::core::memory::MemoryRuleError;
use crate::core::validate::Invalid;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request field is malformed, missing or over a limit (INVALID_ARGUMENT).
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error(transparent)]
    MemoryRule(#[from] MemoryRuleError),
    /// Any other INVALID_ARGUMENT, e.g. a reused request_id.
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    /// Invalid status transition, fenced session (FAILED_PRECONDITION).
    #[error("{0}")]
    FailedPrecondition(String),
    /// A write refused under CONFLICT_POLICY_REJECT (ABORTED, conflict in the details).
    #[error("write rejected: {} changed since revision {} (now revision {}); re-read it, merge, and retry with the new base_revision", .0.record, .0.base_revision.unwrap_or(0), .0.current_revision)]
    Rejected(Box<Conflict>),
    #[error("{0}")]
    ResourceExhausted(String),
    /// A cursor below the compacted part of the event log.
    #[error("{0}")]
    OutOfRange(String),
    /// No token, or an unknown or revoked one.
    #[error("{0}")]
    Unauthenticated(String),
    /// A token used beyond its role or project scope.
    #[error("{0}")]
    PermissionDenied(String),
    /// A stored checkpoint failed its integrity check.
    #[error("checkpoint {id} is corrupt ({source}); resume falls back to an earlier checkpoint")]
    DataLoss {
        id: String,
        #[source]
        source: IntegrityError,
    },
    /// The database cannot be reached or had a transient fault: retrying later may work.
    #[error("storage is unavailable, try again shortly")]
    Unavailable(#[source] sqlx::Error),
    /// A bug or an unexpected storage failure.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::Internal(anyhow::anyhow!("{message}"))
    }

    pub fn code(&self) -> Code {
        match self {
            Self::Invalid(_) | Self::MemoryRule(_) | Self::InvalidArgument(_) => Code::InvalidArgument,
            Self::NotFound(_) => Code::NotFound,
            Self::AlreadyExists(_) => Code::AlreadyExists,
            Self::FailedPrecondition(_) => Code::FailedPrecondition,
            Self::Rejected(_) => Code::Aborted,
            Self::ResourceExhausted(_) => Code::ResourceExhausted,
            Self::OutOfRange(_) => Code::OutOfRange,
            Self::Unauthenticated(_) => Code::Unauthenticated,
            Self::PermissionDenied(_) => Code::PermissionDenied,
            Self::DataLoss { .. } => Code::DataLoss,
            Self::Unavailable(_) => Code::Unavailable,
            Self::Internal(_) => Code::Internal,
        }
    }
}

/// Whether a driver error is transient (the database is down, restarting or busy).
fn is_transient(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // SQLite: SQLITE_BUSY (5) and SQLITE_LOCKED (6), extended codes included.
            // Postgres: connection exceptions (08…), serialization and deadlock (40…),
            // insufficient resources (53…), operator intervention such as shutdown (57…).
            let sqlite_busy = code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6));
            sqlite_busy || ["08", "40", "53", "57"].iter().any(|class| code.starts_with(class))
        }
        _ => false,
    }
}

impl From<sqlx::Error> for Error {
    fn from(error: sqlx::Error) -> Self {
        if is_transient(&error) { Self::Unavailable(error) } else { Self::Internal(error.into()) }
    }
}

impl From<Error> for Status {
    fn from(error: Error) -> Self {
        let code = error.code();
        match &error {
            Error::Unavailable(source) => tracing::warn!(error = %source, "storage unavailable"),
            Error::Internal(source) => tracing::error!(error = ?source, "internal error"),
            Error::DataLoss { id, source } => {
                tracing::error!(checkpoint = %id, error = %source, "checkpoint failed its integrity check")
            }
            _ => tracing::debug!(%code, error = %error, "request refused"),
        }
        let message = clip(error.to_string());
        match error {
            Error::Rejected(conflict) => {
                let details = RejectedWrite { conflict: Some(*conflict) }.encode_to_vec();
                Status::with_details(code, message, details.into())
            }
            _ => Status::new(code, message),
        }
    }
}

/// Messages can quote what the client sent; past a few KiB a status no longer fits the
/// HTTP/2 headers it travels in (the stream would be reset instead of answered).
const MAX_MESSAGE: usize = 1024;

fn clip(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("… (truncated)");
    }
    message
}

impl From<Invalid> for Status {
    fn from(error: Invalid) -> Self {
        Error::from(error).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_clipped_on_a_char_boundary() {
        let status =
            Status::from(Error::InvalidArgument(format!("category: {:?} is unknown", "é".repeat(5000))));
        assert!(status.message().len() < MAX_MESSAGE + 20, "{}", status.message().len());
        assert!(status.message().ends_with("… (truncated)"));
        assert_eq!(Status::from(Error::NotFound("short".into())).message(), "short");
    }
}
