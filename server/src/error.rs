//! The server's error type and its one mapping to `tonic::Status`.
//!
//! Expected failures carry a message that says what was wrong and what to do. Storage and
//! internal failures are logged with their detail and answered without it: no SQL text or
//! driver message ever reaches a client.

use baton_proto::details::{self, Detail, reason};
use baton_proto::v1::{Conflict, RejectedWrite};
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
    /// A write its session's status refuses (FAILED_PRECONDITION).
    #[error(transparent)]
    Refused(#[from] crate::core::status::Refused),
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

impl From<crate::core::resume::NotResumable> for Error {
    fn from(e: crate::core::resume::NotResumable) -> Self {
        Self::FailedPrecondition(e.to_string())
    }
}

impl Error {
    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::Internal(anyhow::anyhow!("{message}"))
    }

    pub fn code(&self) -> Code {
        match self {
            Self::Invalid(_) | Self::MemoryRule(_) | Self::InvalidArgument(_) => Code::InvalidArgument,
            Self::NotFound(_) => Code::NotFound,
            Self::AlreadyExists(_) => Code::AlreadyExists,
            Self::FailedPrecondition(_) | Self::Refused(_) => Code::FailedPrecondition,
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

/// Postgres SQLSTATEs that say the connection is gone (while the server may be fine).
const POSTGRES_CONNECTION_LOST: &[&str] = &[
    "08000", // connection_exception
    "08003", // connection_does_not_exist
    "08006", // connection_failure
    "57P01", // admin_shutdown
    "57P02", // crash_shutdown
    "57P03", // cannot_connect_now
    "25P03", // idle_in_transaction_session_timeout (the server ended an idle transaction)
    "57P05", // idle_session_timeout
];

/// Postgres SQLSTATEs after which a retry may work, besides a lost connection: no new
/// connection could be made, the transaction lost a serialization race or a deadlock, the
/// server ran short of resources, a statement timed out.
const POSTGRES_TRANSIENT: &[&str] = &[
    "08001", // sqlclient_unable_to_establish_sqlconnection
    "08004", // sqlserver_rejected_establishment_of_sqlconnection
    "40001", // serialization_failure
    "40P01", // deadlock_detected
    "53000", // insufficient_resources
    "53100", // disk_full
    "53200", // out_of_memory
    "53300", // too_many_connections
    "57014", // query_canceled (a statement timeout)
];

/// Whether a retry may work after Postgres reported `code`.
/// Whether the engine stopped a statement for running past its time limit: SQLite's
/// progress handler said stop (SQLITE_INTERRUPT) or Postgres's `statement_timeout` passed
/// (query_canceled).
pub fn stopped_for_time(error: &sqlx::Error) -> bool {
    const SQLITE_INTERRUPT: i32 = 9;
    let sqlx::Error::Database(db) = error else { return false };
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        return pg.code() == "57014";
    }
    db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some()
        && db.code().and_then(|c| c.parse::<i32>().ok()).map(|c| c & 0xff) == Some(SQLITE_INTERRUPT)
}

fn postgres_transient(code: &str) -> bool {
    POSTGRES_CONNECTION_LOST.contains(&code) || POSTGRES_TRANSIENT.contains(&code)
}

/// Postgres data exceptions a request's value caused (class 22): text the database cannot
/// store. Validation refuses what it can foresee (a NUL byte); these are the rest.
const POSTGRES_BAD_VALUE: &[&str] = &[
    "22021", // character_not_in_repertoire (a NUL byte in text)
    "22P05", // untranslatable_character
    "22001", // string_data_right_truncation
];

/// SQLite's primary result codes after which a retry may work: SQLITE_BUSY and
/// SQLITE_LOCKED (extended codes carry the primary one in their low byte).
const SQLITE_BUSY: i32 = 5;
const SQLITE_LOCKED: i32 = 6;

/// What a driver error means for the client, told apart per backend by its own codes.
enum Kind {
    Transient,
    BadValue,
    Other,
}

fn kind(error: &sqlx::Error) -> Kind {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => Kind::Transient,
        sqlx::Error::Database(db) => {
            if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                let code = pg.code();
                if postgres_transient(code) {
                    Kind::Transient
                } else if POSTGRES_BAD_VALUE.contains(&code) {
                    Kind::BadValue
                } else {
                    Kind::Other
                }
            } else if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                let primary = db.code().and_then(|c| c.parse::<i32>().ok()).map(|c| c & 0xff);
                if matches!(primary, Some(SQLITE_BUSY | SQLITE_LOCKED)) {
                    Kind::Transient
                } else {
                    Kind::Other
                }
            } else {
                Kind::Other
            }
        }
        _ => Kind::Other,
    }
}

impl From<sqlx::Error> for Error {
    fn from(error: sqlx::Error) -> Self {
        match kind(&error) {
            Kind::Transient => Self::Unavailable(error),
            Kind::BadValue => {
                tracing::debug!(error = %error, "the database refused a value");
                Self::bad_value()
            }
            Kind::Other => Self::Internal(error.into()),
        }
    }
}

impl Error {
    /// A search's statement failed: stopped at its time limit (`RESOURCE_EXHAUSTED`, saying
    /// how to narrow it), or any other failure as usual.
    pub fn search(error: sqlx::Error, limit: std::time::Duration) -> Self {
        if stopped_for_time(&error) {
            return Self::ResourceExhausted(format!(
                "the search ran past its time limit of {} ms (--search-time-limit) and was stopped; \
                 search for rarer words, or narrow it by kind, session, branch, author or time",
                limit.as_millis()
            ));
        }
        Self::from(error)
    }

    /// A failure Postgres reported by its SQLSTATE and message, as a function that caught
    /// it returns them (`baton_apply_lock`): classified as a driver error would be.
    pub fn postgres(code: &str, message: &str) -> Self {
        if postgres_transient(code) {
            Self::Unavailable(sqlx::Error::Protocol(format!("{code}: {message}")))
        } else if POSTGRES_BAD_VALUE.contains(&code) {
            tracing::debug!(%code, %message, "the database refused a value");
            Self::bad_value()
        } else {
            Self::internal(format!("{code}: {message}"))
        }
    }

    fn bad_value() -> Self {
        Self::InvalidArgument(
            "a text field holds a character the database cannot store (such as a NUL byte); remove it and retry"
                .into(),
        )
    }
}

impl From<Error> for Status {
    fn from(error: Error) -> Self {
        let code = error.code();
        match &error {
            Error::Unavailable(source) => tracing::warn!(error = %source, "storage unavailable"),
            Error::Internal(source) => tracing::error!(error = ?source, "internal error"),
            Error::DataLoss { id, source } => {
                tracing::error!(checkpoint = %id, error = %source, "checkpoint failed its integrity check");
            }
            _ => tracing::debug!(%code, error = %error, "request refused"),
        }
        let message = clip(error.to_string());
        let (reason, details) = detail_of(error, &message);
        details::status(code, message, reason, details)
    }
}

/// The `ErrorInfo` reason and the standard details of an error (`baton_proto::details`).
fn detail_of(error: Error, message: &str) -> (&'static str, Vec<Detail>) {
    let described = || message.to_owned();
    match error {
        // Details travel in the headers too: everything in them is clipped like the message.
        Error::Invalid(Invalid { field, message }) => {
            (reason::INVALID_ARGUMENT, vec![Detail::Field { field: clip(field), description: clip(message) }])
        }
        Error::MemoryRule(_) | Error::InvalidArgument(_) => {
            let field = message.split_once(':').map(|(f, _)| f).filter(|f| is_field(f)).unwrap_or_default();
            (
                reason::INVALID_ARGUMENT,
                vec![Detail::Field { field: field.to_owned(), description: described() }],
            )
        }
        Error::NotFound(_) => {
            let (resource_type, resource_name) = missing(message);
            (
                reason::NOT_FOUND,
                vec![Detail::Resource { resource_type, resource_name, description: described() }],
            )
        }
        Error::AlreadyExists(_) => (reason::ALREADY_EXISTS, Vec::new()),
        Error::FailedPrecondition(_) | Error::Refused(_) => (reason::FAILED_PRECONDITION, Vec::new()),
        Error::Rejected(conflict) => (
            reason::WRITE_REJECTED,
            vec![Detail::Rejected(Box::new(RejectedWrite { conflict: Some(*conflict) }))],
        ),
        Error::ResourceExhausted(_) => {
            // The flag that sets the limit names it.
            let subject = message
                .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | ';'))
                .find(|w| w.starts_with("--"))
                .unwrap_or_default()
                .to_owned();
            (reason::RESOURCE_EXHAUSTED, vec![Detail::Quota { subject, description: described() }])
        }
        Error::OutOfRange(_) => (reason::CURSOR_COMPACTED, Vec::new()),
        Error::Unauthenticated(_) => (reason::UNAUTHENTICATED, Vec::new()),
        Error::PermissionDenied(_) => (reason::PERMISSION_DENIED, Vec::new()),
        Error::DataLoss { .. } => (reason::CHECKPOINT_CORRUPT, Vec::new()),
        Error::Unavailable(_) => (reason::STORAGE_UNAVAILABLE, Vec::new()),
        Error::Internal(_) => (reason::INTERNAL, Vec::new()),
    }
}

/// A request field name as messages begin with it (`session_id: …`, `blobs[0].digest: …`).
fn is_field(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'[' | b']'))
}

/// What a NOT_FOUND message says is missing: "… no session X …" → ("session", "X").
fn missing(message: &str) -> (String, String) {
    let mut words = message.split_whitespace().skip_while(|w| *w != "no").skip(1);
    match (words.next(), words.next()) {
        (Some(kind), Some(name)) => (kind.to_owned(), name.trim_end_matches([';', ',', '.', ':']).to_owned()),
        _ => (String::new(), String::new()),
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

    #[test]
    fn details_are_the_standard_ones() {
        let s =
            Status::from(Error::NotFound("session_id: no session 0190; start one with StartSession".into()));
        assert_eq!(details::error_info(&s).map(|i| i.reason), Some("NOT_FOUND".to_owned()));
        let body = details::decode(&s).unwrap_or_default();
        assert_eq!(body.details[1].type_url, "type.googleapis.com/google.rpc.ResourceInfo");
        assert_eq!(missing("session_id: no session 0190; start"), ("session".to_owned(), "0190".to_owned()));
        let s = Status::from(Error::ResourceExhausted(
            "rate limit exceeded: 5 requests/s (--rate-limit, --rate-burst)".into(),
        ));
        let body = details::decode(&s).unwrap_or_default();
        let quota = <details::pb::QuotaFailure as prost::Message>::decode(body.details[1].value.as_slice())
            .unwrap_or_default();
        assert_eq!(quota.violations[0].subject, "--rate-limit");
    }
}
