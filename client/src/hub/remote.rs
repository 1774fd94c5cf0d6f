//! The connection to the hub: short timeouts (a hook must never hang the agent), the
//! bearer token on every call, and telling "unreachable" (queue it) from "refused" (say so).

use std::time::Duration;

use baton_proto::v1::brief_service_client::BriefServiceClient;
use baton_proto::v1::checkpoint_service_client::CheckpointServiceClient;
use baton_proto::v1::commit_service_client::CommitServiceClient;
use baton_proto::v1::event_service_client::EventServiceClient;
use baton_proto::v1::memory_service_client::MemoryServiceClient;
use baton_proto::v1::reservation_service_client::ReservationServiceClient;
use baton_proto::v1::search_service_client::SearchServiceClient;
use baton_proto::v1::session_service_client::SessionServiceClient;
use baton_proto::v1::thread_service_client::ThreadServiceClient;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Request, Status};

use crate::config::Settings;

/// Adds `authorization: Bearer <token>` when a token is configured.
#[derive(Clone)]
pub struct Auth(Option<MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(token) = &self.0 {
            request.metadata_mut().insert("authorization", token.clone());
        }
        Ok(request)
    }
}

pub type Ch = InterceptedService<Channel, Auth>;

/// One client per service on one connection.
#[derive(Clone)]
pub struct Hub {
    pub sessions: SessionServiceClient<Ch>,
    pub checkpoints: CheckpointServiceClient<Ch>,
    pub memory: MemoryServiceClient<Ch>,
    pub brief: BriefServiceClient<Ch>,
    pub events: EventServiceClient<Ch>,
    pub search: SearchServiceClient<Ch>,
    /// Orchestrators' threads: a page may hold checkpoints with large payloads.
    pub threads: ThreadServiceClient<Ch>,
    pub reservations: ReservationServiceClient<Ch>,
    /// Commit links: a FindCommits reply holds up to 3 MiB of links.
    pub commits: CommitServiceClient<Ch>,
    pub channel: Channel,
}

/// How long to wait, by use: hooks must return quickly; people can wait a little.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub request: Option<Duration>,
}

impl Timeouts {
    pub const HOOK: Self =
        Self { connect: Duration::from_millis(400), request: Some(Duration::from_millis(2500)) };
    pub const CLI: Self = Self { connect: Duration::from_secs(3), request: Some(Duration::from_secs(30)) };
    /// Health probes (`baton status`, `baton doctor`): a hub that does not answer in 3 s is
    /// reported as such rather than waited on.
    pub const PROBE: Self = Self { connect: Duration::from_secs(3), request: Some(Duration::from_secs(3)) };
    /// `baton mcp`'s tools: a model waits on them, so a hub that does not answer is
    /// reported quickly (reads fall back to the cached brief, writes are queued).
    pub const MCP: Self =
        Self { connect: Duration::from_millis(800), request: Some(Duration::from_secs(10)) };
    /// Streams (watch) have no overall deadline.
    pub const STREAM: Self = Self { connect: Duration::from_secs(3), request: None };
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{0:?} is not a valid server URL (expected e.g. http://127.0.0.1:7437)")]
    BadUrl(String),
    #[error("cannot read the CA certificate {path}: {reason} (check --ca-cert, BATON_CA_CERT or ca_cert in the config file)", path = .0.display(), reason = .1)]
    BadCa(std::path::PathBuf, String),
    #[error("the token is not valid in an HTTP header (check BATON_TOKEN or the config file)")]
    BadToken,
    #[error(
        "cannot reach the Baton hub at {server}: {reason} (is baton-server running? set BATON_SERVER or --server)"
    )]
    Unreachable { server: String, reason: String },
}

pub async fn connect(settings: &Settings, timeouts: Timeouts) -> Result<Hub, ConnectError> {
    let mut endpoint = Endpoint::from_shared(settings.server.clone())
        .map_err(|_| ConnectError::BadUrl(settings.server.clone()))?
        .connect_timeout(timeouts.connect)
        .tcp_nodelay(true);
    if let Some(t) = timeouts.request {
        endpoint = endpoint.timeout(t);
    }
    if settings.server.starts_with("https://") {
        let mut tls = ClientTlsConfig::new().with_native_roots();
        if let Some(ca) = &settings.ca_cert {
            let pem = std::fs::read(ca).map_err(|e| ConnectError::BadCa(ca.clone(), e.to_string()))?;
            tls = tls.ca_certificate(Certificate::from_pem(pem));
        }
        endpoint = endpoint.tls_config(tls).map_err(|e| ConnectError::Unreachable {
            server: settings.server.clone(),
            reason: format!("TLS setup failed: {e}"),
        })?;
    }
    let channel = endpoint.connect().await.map_err(|e| {
        let mut reason = root_cause(&e);
        if reason.contains("InvalidContentType") {
            // A TLS client's hello answered by a plain server (or not Baton at all).
            reason = format!(
                "it does not answer TLS ({reason}); a hub started without --tls-cert is reached over {}",
                settings.server.replacen("https://", "http://", 1)
            );
        }
        ConnectError::Unreachable { server: settings.server.clone(), reason }
    })?;
    let token = match &settings.token {
        Some(t) => Some(format!("Bearer {t}").parse().map_err(|_| ConnectError::BadToken)?),
        None => None,
    };
    if token.is_some() && plain_http_off_loopback(&settings.server) {
        warn_plain_http_once(&settings.server);
    }
    let auth = Auth(token);
    let ch = || InterceptedService::new(channel.clone(), auth.clone());
    Ok(Hub {
        sessions: SessionServiceClient::new(ch()),
        // Chunk downloads: up to `blob::GET_BATCH` chunks of at most 1 MiB each per reply.
        checkpoints: CheckpointServiceClient::new(ch())
            .max_decoding_message_size(crate::hub::blob::MAX_REPLY),
        memory: MemoryServiceClient::new(ch()),
        brief: BriefServiceClient::new(ch()),
        events: EventServiceClient::new(ch()),
        search: SearchServiceClient::new(ch()),
        threads: ThreadServiceClient::new(ch()).max_decoding_message_size(64 * 1024 * 1024),
        reservations: ReservationServiceClient::new(ch()),
        commits: CommitServiceClient::new(ch()).max_decoding_message_size(16 * 1024 * 1024),
        channel,
    })
}

/// Whether a URL is plain `http://` to a host other than this machine: a token sent there
/// travels in the clear.
pub fn plain_http_off_loopback(server: &str) -> bool {
    let Some(rest) = server.strip_prefix("http://") else { return false };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    !loopback
}

fn warn_plain_http_once(server: &str) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        eprintln!(
            "baton: warning: sending the access token over plain http to {} (not this machine): anyone on the \
             network path can read it; use https:// (the server's --tls-cert)",
            crate::safe::line(server)
        );
    });
}

/// The innermost error's message: "connection refused", "invalid peer certificate: UnknownIssuer".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Whether a failed call is worth retrying later (the hub or the network is down) rather
/// than a refusal of the request itself.
pub fn is_transient(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Cancelled
            | Code::Unknown
            | Code::ResourceExhausted
    )
}

/// A refused call as an error for a command (its message is `explain`'s sentence).
#[expect(clippy::needless_pass_by_value, reason = "shaped for `map_err(remote::fail)`")]
pub fn fail(status: Status) -> anyhow::Error {
    anyhow::anyhow!(explain(&status))
}

/// Whether a failed call was answered by something that is not a gRPC server (a web server,
/// another service on the port): the HTTP/2 exchange itself failed.
fn not_grpc(status: &Status) -> bool {
    let mut text = status.message().to_ascii_lowercase();
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        // The Debug form names HTTP/2's error codes (`GoAway(…, FRAME_SIZE_ERROR, …)`).
        text.push_str(&format!("{e} {e:?}").to_ascii_lowercase());
        source = e.source();
    }
    [
        "h2 protocol error",
        "grpc-status header missing",
        "http2 error",
        "invalid content-type",
        "frame with invalid size",
        "frame_size_error",
        "protocol_error",
    ]
    .iter()
    .any(|p| text.contains(p))
}

/// A human sentence for a refused call.
pub fn explain(status: &Status) -> String {
    if not_grpc(status) {
        return format!(
            "the server does not answer as a Baton hub ({}): check --server, BATON_SERVER or the config file (http:// for a plain hub, https:// for one with --tls-cert)",
            status.message()
        );
    }
    if status.message() == "transport error"
        && let Some(source) = std::error::Error::source(status)
    {
        return format!(
            "the connection to the hub failed ({}): is a Baton hub running at that address (--server, BATON_SERVER)?",
            root_cause(source)
        );
    }
    match status.code() {
        // Said once: the hub's own message may already say where the token comes from.
        Code::Unauthenticated if status.message().contains("BATON_TOKEN") => {
            format!("the hub refused the token: {}", status.message())
        }
        Code::Unauthenticated => {
            format!("the hub refused the token: {} (check BATON_TOKEN or the config file)", status.message())
        }
        Code::PermissionDenied if status.message().starts_with("token ") => status.message().to_owned(),
        Code::PermissionDenied => format!("the token may not do this: {}", status.message()),
        // A REJECT write: the current state travels as `baton.v1.RejectedWrite` in the
        // standard details (google.rpc.Status).
        Code::Aborted => match baton_proto::details::rejected_write(status).and_then(|r| r.conflict) {
            Some(c) => {
                let by = c
                    .current_author
                    .as_ref()
                    .filter(|a| !a.token.is_empty() || !a.host.is_empty())
                    .map(|a| {
                        format!(", written by {}", crate::safe::line(&format!("{}@{}", a.token, a.host)))
                    })
                    .unwrap_or_default();
                format!(
                    "{}: {} is now at revision {}{by}",
                    status.message(),
                    crate::safe::line(&c.record),
                    c.current_revision
                )
            }
            None => format!("{:?}: {}", status.code(), status.message()),
        },
        _ => format!("{:?}: {}", status.code(), status.message()),
    }
}

#[cfg(test)]
mod plain_http_tests {
    use super::plain_http_off_loopback;

    #[test]
    fn tokens_over_plain_http_off_this_machine_are_flagged() {
        for off in ["http://baton.acme.internal:7437", "http://10.0.0.5:7437", "http://[2001:db8::1]:7437/"] {
            assert!(plain_http_off_loopback(off), "{off}");
        }
        for fine in [
            "http://127.0.0.1:7437",
            "http://localhost:7437",
            "http://[::1]:7437",
            "https://baton.acme.internal",
        ] {
            assert!(!plain_http_off_loopback(fine), "{fine}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a refused token is told says each thing once.
    #[test]
    fn token_refusals_say_each_thing_once() {
        let unknown = explain(&Status::unauthenticated(
            "unknown access token: check BATON_TOKEN, or ask an admin for a new one",
        ));
        assert_eq!(unknown.matches("BATON_TOKEN").count(), 1, "{unknown}");
        let scoped = explain(&Status::permission_denied("token \"ci\" is a reader token and cannot write"));
        assert_eq!(scoped.matches("token").count(), 2, "{scoped}");
        let bare = explain(&Status::unauthenticated("expired"));
        assert!(bare.contains("check BATON_TOKEN"), "{bare}");
    }
}
