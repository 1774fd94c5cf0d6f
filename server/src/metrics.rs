//! Prometheus metrics on their own port (`--metrics-listen`), by `metrics` and
//! `metrics-exporter-prometheus`: requests by RPC and status with latencies (a tower layer
//! reading each response's grpc-status), writes and conflicts (recorded after commit),
//! active watchers, sessions by status and the database pool (sampled).

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body::Frame;
use tonic::body::Body;

use crate::store::Store;

/// Installs the recorder and serves `/metrics` on `addr`.
pub fn install(addr: SocketAddr) -> anyhow::Result<()> {
    let (recorder, exporter) = metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full("baton_request_duration_seconds".into()),
            &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0],
        )?
        .build()
        .map_err(|e| anyhow::anyhow!("cannot serve metrics on {addr}: {e}"))?;
    metrics::set_global_recorder(recorder).map_err(|e| anyhow::anyhow!("metrics recorder: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = exporter.await {
            tracing::error!(error = ?e, "the metrics listener stopped");
        }
    });
    describe();
    tracing::info!(%addr, "serving Prometheus metrics at /metrics");
    Ok(())
}

fn describe() {
    metrics::describe_counter!("baton_requests_total", "gRPC requests by RPC and status code");
    metrics::describe_histogram!(
        "baton_request_duration_seconds",
        metrics::Unit::Seconds,
        "time to a unary RPC's reply, by RPC"
    );
    metrics::describe_counter!("baton_writes_total", "committed writes (one per revision) by event kind");
    metrics::describe_counter!("baton_conflicts_total", "writes that met a concurrent write, by outcome");
    metrics::describe_gauge!("baton_active_watchers", "open Watch streams on this instance");
    metrics::describe_gauge!("baton_sessions", "sessions by status (all projects)");
    metrics::describe_gauge!("baton_db_pool_connections", "database pool connections (state = open or idle)");
}

/// Records a committed write's events (kind names) and conflicts (outcome names).
pub fn record_commit(kinds: &[(i32, Option<i32>)]) {
    for &(kind, outcome) in kinds {
        let kind = baton_proto::v1::EventKind::try_from(kind).map_or("unknown", |k| k.as_str_name());
        metrics::counter!("baton_writes_total", "kind" => label(kind, "EVENT_KIND_")).increment(1);
        if let Some(outcome) = outcome {
            record_conflict(outcome);
        }
    }
}

pub fn record_conflict(outcome: i32) {
    let outcome = baton_proto::v1::WriteOutcome::try_from(outcome).map_or("unknown", |o| o.as_str_name());
    metrics::counter!("baton_conflicts_total", "outcome" => label(outcome, "WRITE_OUTCOME_")).increment(1);
}

/// "EVENT_KIND_MEMORY_CHANGED" → "memory_changed".
fn label(name: &str, prefix: &str) -> String {
    name.trim_start_matches(prefix).to_ascii_lowercase()
}

pub fn set_active_watchers(n: usize) {
    metrics::gauge!("baton_active_watchers").set(n as f64);
}

/// Samples sessions by status and the pool every `every` until shutdown.
pub async fn sample<S: Store>(store: S, every: Duration, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    loop {
        let sampled = store.metrics().await;
        match sampled.sessions {
            Ok(counts) => {
                for crate::store::model::StatusCount { status, count: n } in counts {
                    let status = baton_proto::v1::SessionStatus::try_from(status)
                        .map_or("unknown", |s| s.as_str_name());
                    metrics::gauge!("baton_sessions", "status" => label(status, "SESSION_STATUS_"))
                        .set(n as f64);
                }
            }
            Err(e) => tracing::debug!(error = %e, "cannot sample session counts"),
        }
        let (open, idle) = (sampled.connections, sampled.idle_connections);
        metrics::gauge!("baton_db_pool_connections", "state" => "open").set(f64::from(open));
        metrics::gauge!("baton_db_pool_connections", "state" => "idle").set(idle as f64);
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Counts requests by RPC and grpc-status and times unary replies.
#[derive(Clone, Copy)]
pub struct MetricsLayer;

impl<S> tower::Layer<S> for MetricsLayer {
    type Service = Measured<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Measured { inner }
    }
}

#[derive(Clone)]
pub struct Measured<S> {
    inner: S,
}

impl<S> tower::Service<http::Request<Body>> for Measured<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let rpc = request.uri().path().rsplit('/').next().unwrap_or_default().to_owned();
        let started = Instant::now();
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await?;
            let took = started.elapsed();
            // Trailers-only replies (errors) carry the status in the headers.
            if let Some(code) = grpc_status(response.headers()) {
                record_request(&rpc, code, Some(took));
                return Ok(response);
            }
            let (parts, body) = response.into_parts();
            let streaming = rpc == "Watch";
            let body = Observed { inner: body, rpc, took: (!streaming).then_some(took), done: false };
            Ok(http::Response::from_parts(parts, Body::new(body)))
        })
    }
}

fn grpc_status(headers: &http::HeaderMap) -> Option<i32> {
    headers.get("grpc-status")?.to_str().ok()?.parse().ok()
}

fn record_request(rpc: &str, code: i32, took: Option<Duration>) {
    let code = tonic::Code::from_i32(code);
    metrics::counter!("baton_requests_total", "rpc" => rpc.to_owned(), "code" => format!("{code:?}"))
        .increment(1);
    if let Some(took) = took {
        metrics::histogram!("baton_request_duration_seconds", "rpc" => rpc.to_owned())
            .record(took.as_secs_f64());
    }
}

/// A response body that records the request when its trailers (the grpc-status) pass.
struct Observed {
    inner: Body,
    rpc: String,
    took: Option<Duration>,
    done: bool,
}

impl http_body::Body for Observed {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(trailers) = frame.trailers_ref()
            && !self.done
        {
            self.done = true;
            let code = grpc_status(trailers).unwrap_or(tonic::Code::Unknown as i32);
            record_request(&self.rpc, code, self.took);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Observed {
    /// A stream the client left (a watcher going away) ends without trailers.
    fn drop(&mut self) {
        if !self.done {
            record_request(&self.rpc, tonic::Code::Cancelled as i32, None);
        }
    }
}
