//! The details of a refused call, in gRPC's richer error model: `grpc-status-details-bin`
//! carries a `google.rpc.Status` whose `details` are `Any`s, so stock tooling reads them
//! (Python's `grpcio-status`, Go's `status.Details()`, grpcurl). Every refusal carries an
//! `ErrorInfo` (domain `baton.v1`, a stable `reason` from [`reason`]); besides it, where
//! they fit, `BadRequest` (INVALID_ARGUMENT naming a field), `ResourceInfo` (NOT_FOUND),
//! `QuotaFailure` (RESOURCE_EXHAUSTED), and `baton.v1.RejectedWrite` (ABORTED by
//! CONFLICT_POLICY_REJECT).

use prost::Message;
use prost_types::Any;
pub use tonic_types::pb;

use crate::v1::RejectedWrite;

/// `ErrorInfo.domain` of every Baton error.
pub const DOMAIN: &str = "baton.v1";

/// `ErrorInfo.reason`s: stable, one per kind of refusal (documented in `model.proto`).
pub mod reason {
    pub const INVALID_ARGUMENT: &str = "INVALID_ARGUMENT";
    pub const MALFORMED_MESSAGE: &str = "MALFORMED_MESSAGE";
    pub const NOT_FOUND: &str = "NOT_FOUND";
    pub const ALREADY_EXISTS: &str = "ALREADY_EXISTS";
    pub const FAILED_PRECONDITION: &str = "FAILED_PRECONDITION";
    pub const WRITE_REJECTED: &str = "WRITE_REJECTED";
    pub const RESOURCE_EXHAUSTED: &str = "RESOURCE_EXHAUSTED";
    pub const REQUEST_TOO_LARGE: &str = "REQUEST_TOO_LARGE";
    pub const CURSOR_COMPACTED: &str = "CURSOR_COMPACTED";
    pub const UNAUTHENTICATED: &str = "UNAUTHENTICATED";
    pub const PERMISSION_DENIED: &str = "PERMISSION_DENIED";
    pub const CHECKPOINT_CORRUPT: &str = "CHECKPOINT_CORRUPT";
    pub const STORAGE_UNAVAILABLE: &str = "STORAGE_UNAVAILABLE";
    pub const INTERNAL: &str = "INTERNAL";
}

const TYPE_PREFIX: &str = "type.googleapis.com/";

fn any(type_name: &str, message: &impl Message) -> Any {
    Any { type_url: format!("{TYPE_PREFIX}{type_name}"), value: message.encode_to_vec() }
}

/// One detail of a refusal, besides its `ErrorInfo`.
#[derive(Debug, Clone)]
pub enum Detail {
    /// A request field and what is wrong with it.
    Field {
        field: String,
        description: String,
    },
    /// What was not found.
    Resource {
        resource_type: String,
        resource_name: String,
        description: String,
    },
    /// The limit that was hit.
    Quota {
        subject: String,
        description: String,
    },
    Rejected(Box<RejectedWrite>),
}

/// A `tonic::Status` carrying `google.rpc.Status` details: an `ErrorInfo` with `reason`,
/// then `details`.
pub fn status(code: tonic::Code, message: String, reason: &str, details: Vec<Detail>) -> tonic::Status {
    let mut anys = vec![any(
        "google.rpc.ErrorInfo",
        &pb::ErrorInfo {
            reason: reason.to_owned(),
            domain: DOMAIN.to_owned(),
            metadata: std::collections::HashMap::default(),
        },
    )];
    for detail in details {
        anys.push(match detail {
            Detail::Field { field, description } => any(
                "google.rpc.BadRequest",
                &pb::BadRequest {
                    field_violations: vec![pb::bad_request::FieldViolation {
                        field,
                        description,
                        ..Default::default()
                    }],
                },
            ),
            Detail::Resource { resource_type, resource_name, description } => any(
                "google.rpc.ResourceInfo",
                &pb::ResourceInfo { resource_type, resource_name, owner: String::new(), description },
            ),
            Detail::Quota { subject, description } => any(
                "google.rpc.QuotaFailure",
                &pb::QuotaFailure {
                    violations: vec![pb::quota_failure::Violation {
                        subject,
                        description,
                        ..Default::default()
                    }],
                },
            ),
            Detail::Rejected(rejected) => any("baton.v1.RejectedWrite", rejected.as_ref()),
        });
    }
    let body = pb::Status { code: code as i32, message: message.clone(), details: anys };
    tonic::Status::with_details(code, message, body.encode_to_vec().into())
}

/// The `google.rpc.Status` a refusal carries, if any.
pub fn decode(status: &tonic::Status) -> Option<pb::Status> {
    if status.details().is_empty() {
        return None;
    }
    pb::Status::decode(status.details()).ok()
}

fn find<M: Message + Default>(status: &tonic::Status, type_name: &str) -> Option<M> {
    let body = decode(status)?;
    let url = format!("{TYPE_PREFIX}{type_name}");
    body.details.iter().find(|a| a.type_url == url).and_then(|a| M::decode(a.value.as_slice()).ok())
}

/// The `ErrorInfo` of a refusal.
pub fn error_info(status: &tonic::Status) -> Option<pb::ErrorInfo> {
    find(status, "google.rpc.ErrorInfo")
}

/// The current state a CONFLICT_POLICY_REJECT write was refused against (ABORTED).
pub fn rejected_write(status: &tonic::Status) -> Option<RejectedWrite> {
    find(status, "baton.v1.RejectedWrite")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_the_standard_way() {
        let rejected = RejectedWrite {
            conflict: Some(crate::v1::Conflict { record: "note/k".into(), ..Default::default() }),
        };
        let s = status(
            tonic::Code::Aborted,
            "rejected".into(),
            reason::WRITE_REJECTED,
            vec![Detail::Rejected(Box::new(rejected))],
        );
        let body = decode(&s).unwrap_or_default();
        assert_eq!((body.code, body.message.as_str()), (tonic::Code::Aborted as i32, "rejected"));
        assert_eq!(body.details[0].type_url, "type.googleapis.com/google.rpc.ErrorInfo");
        assert_eq!(body.details[1].type_url, "type.googleapis.com/baton.v1.RejectedWrite");
        assert_eq!(error_info(&s).map(|i| i.reason), Some("WRITE_REJECTED".to_owned()));
        assert_eq!(rejected_write(&s).and_then(|r| r.conflict).map(|c| c.record), Some("note/k".to_owned()));
    }
}
