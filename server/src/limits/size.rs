//! Request size limits per message kind, checked on the gRPC frame header before the
//! message is read into memory or decoded: an oversized request costs five bytes of
//! buffering and gets `RESOURCE_EXHAUSTED` naming the limit and the flag that sets it.

use std::sync::Arc;
use std::task::{Context, Poll};

use baton_proto::details::{self, Detail, reason};
use bytes::{Buf, Bytes};
use futures::StreamExt as _;
use futures::future::BoxFuture;
use http_body::Frame;
use http_body_util::{BodyExt as _, BodyStream, StreamBody};
use tonic::body::Body;
use tonic::{Code, Status};

/// The largest request each RPC accepts, in bytes of its encoded message.
#[derive(Debug, Clone)]
pub struct SizeLimits {
    /// (full gRPC path, limit, what sets it), checked in order; the first match wins.
    by_path: Vec<(&'static str, usize, &'static str)>,
    default: usize,
}

impl SizeLimits {
    /// `checkpoint`: a whole CreateCheckpoint (state, payload and blob references);
    /// `chunks`: one PutChunks call; `memory`: one PutMemory; `other`: every other request.
    pub fn new(checkpoint: usize, chunks: usize, memory: usize, other: usize) -> Self {
        Self {
            by_path: vec![
                ("/baton.v1.CheckpointService/CreateCheckpoint", checkpoint, "--max-checkpoint-bytes"),
                ("/baton.v1.CheckpointService/PutChunks", chunks, "the chunk upload limit"),
                ("/baton.v1.MemoryService/PutMemory", memory, "--max-memory-request-bytes"),
                ("/baton.v1.ThreadService/PutThreadCheckpoint", checkpoint, "--max-checkpoint-bytes"),
                ("/baton.v1.ThreadService/PutThreadWrites", checkpoint, "--max-checkpoint-bytes"),
                ("/baton.v1.ItemLogService/AppendItems", checkpoint, "--max-checkpoint-bytes"),
                ("/baton.v1.CommitService/RecordCommits", checkpoint, "--max-checkpoint-bytes"),
                ("/baton.v1.CommitService/FindCommits", checkpoint, "--max-checkpoint-bytes"),
            ],
            default: other,
        }
    }

    fn for_path(&self, path: &str) -> (usize, &'static str) {
        self.by_path
            .iter()
            .find(|(p, ..)| *p == path)
            .map_or((self.default, "--max-request-bytes"), |(_, limit, flag)| (*limit, *flag))
    }

    /// The largest limit of any kind: tonic's own decoding cap, as a backstop.
    pub fn largest(&self) -> usize {
        self.by_path.iter().map(|(_, l, _)| *l).chain([self.default]).max().unwrap_or(self.default)
    }
}

#[derive(Clone)]
pub struct SizeLimitLayer(pub Arc<SizeLimits>);

impl<S> tower::Layer<S> for SizeLimitLayer {
    type Service = SizeLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        SizeLimit { inner, limits: self.0.clone() }
    }
}

#[derive(Clone)]
pub struct SizeLimit<S> {
    inner: S,
    limits: Arc<SizeLimits>,
}

impl<S> tower::Service<http::Request<Body>> for SizeLimit<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        // The clone is the one that was not polled ready: swap so `inner` is the ready one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (limit, flag) = self.limits.for_path(request.uri().path());
        let rpc: String =
            request.uri().path().rsplit('/').next().unwrap_or_default().chars().take(128).collect();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let (head, declared, rest) = read_frame_header(body).await;
            if let Some(len) = declared
                && len > limit
            {
                tracing::info!(rpc, bytes = len, limit, "request over the size limit");
                let message = format!(
                    "{rpc} request of {len} bytes is over this server's limit of {limit} bytes ({flag}); \
                     send less per call"
                );
                let quota = Detail::Quota { subject: format!("request:{rpc}"), description: message.clone() };
                return Ok(details::status(
                    Code::ResourceExhausted,
                    message,
                    reason::REQUEST_TOO_LARGE,
                    vec![quota],
                )
                .into_http());
            }
            let body = Body::new(StreamBody::new(futures::stream::iter(head).chain(BodyStream::new(rest))));
            inner.call(http::Request::from_parts(parts, body)).await
        })
    }
}

/// Reads body frames until the 5-byte gRPC message header (compression flag, u32
/// big-endian length) is in: returns the frames read, the declared length (None when the
/// body ended or failed first: the service then reports it) and the rest of the body.
async fn read_frame_header(mut body: Body) -> (Vec<Result<Frame<Bytes>, Status>>, Option<usize>, Body) {
    let mut head = Vec::new();
    let mut prefix = Vec::with_capacity(5);
    while prefix.len() < 5 {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    let mut chunk = data.clone();
                    while prefix.len() < 5 && chunk.has_remaining() {
                        prefix.push(chunk.get_u8());
                    }
                }
                head.push(Ok(frame));
            }
            Some(Err(e)) => {
                head.push(Err(e));
                return (head, None, body);
            }
            None => return (head, None, body),
        }
    }
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]);
    (head, usize::try_from(len).ok(), body)
}
