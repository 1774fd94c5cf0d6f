//! Connection limits, enforced on the TCP connections themselves (tonic's per-connection
//! concurrency limit and `max_connection_age` are neither of these):
//! - caps on open connections in total and per client address, checked at accept (a
//!   connection over a cap is closed at once, before it costs a task or a buffer);
//! - a deadline for the handshake: the first request must arrive within it, so a
//!   connection that never speaks, or only says hello (the HTTP/2 preface, a TLS hello), is
//!   closed (TLS also has its own handshake deadline, `ServerTlsConfig::timeout`);
//! - an idle timeout, where idle means no open stream: a quiet Watch keeps its connection,
//!   and HTTP/2 keepalive pings do not count as use.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::{Connected, TcpConnectInfo};

use super::rate::Origin;

#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    pub max_total: usize,
    pub max_per_address: usize,
    /// The first request must arrive within this after accept (`None`: no deadline).
    pub preface_timeout: Option<Duration>,
    /// A connection without an open stream for this long is closed (`None`: never).
    pub idle_timeout: Option<Duration>,
}

/// One connection's open streams, counted by `StreamCount` as requests come and go.
#[derive(Debug)]
struct ConnState {
    streams: AtomicUsize,
    /// Whether a request ever came: until then the handshake deadline holds.
    used: std::sync::atomic::AtomicBool,
    /// When the last stream ended (or the connection started).
    quiet_since: Mutex<Instant>,
}

/// Open connections, per address and by remote socket address.
#[derive(Default)]
struct Open {
    per_origin: HashMap<Origin, usize>,
    by_remote: HashMap<SocketAddr, Arc<ConnState>>,
}

/// The connections of one server.
#[derive(Clone)]
pub struct Tracker {
    limits: ConnLimits,
    total: Arc<AtomicUsize>,
    open: Arc<Mutex<Open>>,
}

impl Tracker {
    pub fn new(limits: ConnLimits) -> Self {
        Self { limits, total: Arc::default(), open: Arc::default() }
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a slot for a new connection, or says which cap it is over.
    fn admit(&self, remote: SocketAddr) -> Result<Arc<ConnState>, &'static str> {
        let origin = Origin::of(Some(remote.ip()));
        let mut open = self.open();
        if self.total.load(Ordering::SeqCst) >= self.limits.max_total {
            return Err("--max-connections");
        }
        let count = open.per_origin.entry(origin).or_default();
        if *count >= self.limits.max_per_address {
            return Err("--max-connections-per-address");
        }
        *count += 1;
        self.total.fetch_add(1, Ordering::SeqCst);
        let state = Arc::new(ConnState {
            streams: AtomicUsize::new(0),
            used: std::sync::atomic::AtomicBool::new(false),
            quiet_since: Mutex::new(Instant::now()),
        });
        open.by_remote.insert(remote, state.clone());
        Ok(state)
    }

    fn release(&self, remote: SocketAddr, state: &Arc<ConnState>) {
        let origin = Origin::of(Some(remote.ip()));
        let mut open = self.open();
        if let Some(count) = open.per_origin.get_mut(&origin) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.per_origin.remove(&origin);
            }
        }
        // Only its own entry: a new connection may already reuse the address.
        if open.by_remote.get(&remote).is_some_and(|s| Arc::ptr_eq(s, state)) {
            open.by_remote.remove(&remote);
        }
        self.total.fetch_sub(1, Ordering::SeqCst);
    }

    /// Open connections (stats and tests).
    pub fn connections(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }

    /// Accepts connections within the caps; the rest are closed as they arrive.
    pub fn incoming(self, listener: TcpListener) -> impl Stream<Item = std::io::Result<Limited>> + Send {
        futures::stream::unfold((self, listener), |(tracker, listener)| async move {
            loop {
                let (stream, remote) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of descriptors or the like: say so and keep serving.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                match tracker.admit(remote) {
                    Ok(state) => {
                        let _ = stream.set_nodelay(true);
                        let limited = Limited::new(stream, remote, state, tracker.clone());
                        return Some((Ok(limited), (tracker, listener)));
                    }
                    Err(flag) => {
                        tracing::debug!(%remote, limit = flag, "connection refused at accept");
                        drop(stream);
                    }
                }
            }
        })
    }

    /// Counts a request's stream on its connection until its response body is dropped.
    fn stream_started(&self, remote: Option<SocketAddr>) -> Option<StreamGuard> {
        let state = self.open().by_remote.get(&remote?)?.clone();
        state.streams.fetch_add(1, Ordering::SeqCst);
        state.used.store(true, Ordering::SeqCst);
        Some(StreamGuard(state))
    }
}

/// An open stream; ends when dropped.
struct StreamGuard(Arc<ConnState>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if self.0.streams.fetch_sub(1, Ordering::SeqCst) == 1 {
            *self.0.quiet_since.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        }
    }
}

/// A connection within the caps: released when dropped; closed (an error on read) when its
/// first request does not come in time or when it has been idle too long.
pub struct Limited {
    io: TcpStream,
    remote: SocketAddr,
    state: Arc<ConnState>,
    tracker: Tracker,
    /// Whether the handshake deadline has been met (the first request came).
    handshaken: bool,
    timer: Pin<Box<Sleep>>,
}

/// A timer that does not fire.
const NEVER: Duration = Duration::from_hours(365 * 24);

impl Limited {
    fn new(io: TcpStream, remote: SocketAddr, state: Arc<ConnState>, tracker: Tracker) -> Self {
        let timer = Box::pin(tokio::time::sleep(tracker.limits.preface_timeout.unwrap_or(NEVER)));
        let handshaken = tracker.limits.preface_timeout.is_none();
        Self { io, remote, state, tracker, handshaken, timer }
    }

    /// Checks the deadlines; `Err` closes the connection.
    fn check(&mut self, cx: &mut Context<'_>) -> std::io::Result<()> {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return Ok(());
            }
            if !self.handshaken {
                // A connection is not held by a preface (or a TLS hello) alone: its first
                // request must come within the deadline too.
                if !self.state.used.load(Ordering::SeqCst) {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "no HTTP/2 request before the handshake deadline (--handshake-timeout)",
                    ));
                }
                self.handshaken = true;
            }
            let Some(idle) = self.tracker.limits.idle_timeout else {
                // Handshake done and no idle timeout: the timer is not needed again.
                self.timer.as_mut().reset(Instant::now() + NEVER);
                return Ok(());
            };
            let quiet_since = *self.state.quiet_since.lock().unwrap_or_else(PoisonError::into_inner);
            let next = if self.state.streams.load(Ordering::SeqCst) > 0 {
                Instant::now() + idle
            } else if quiet_since + idle > Instant::now() {
                quiet_since + idle
            } else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no open stream for the idle timeout (--idle-timeout)",
                ));
            };
            self.timer.as_mut().reset(next);
        }
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        self.tracker.release(self.remote, &self.state);
    }
}

impl AsyncRead for Limited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if let Err(e) = self.check(cx) {
            tracing::debug!(remote = %self.remote, error = %e, "closing a connection");
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Limited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl Connected for Limited {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        TcpConnectInfo { local_addr: self.io.local_addr().ok(), remote_addr: Some(self.remote) }
    }
}

/// Counts each request as an open stream of its connection while its response body lives
/// (a Watch is open as long as its stream).
#[derive(Clone)]
pub struct StreamCountLayer(pub Tracker);

impl<S> tower::Layer<S> for StreamCountLayer {
    type Service = StreamCount<S>;
    fn layer(&self, inner: S) -> StreamCount<S> {
        StreamCount { inner, tracker: self.0.clone() }
    }
}

#[derive(Clone)]
pub struct StreamCount<S> {
    inner: S,
    tracker: Tracker,
}

pub(crate) fn remote_of<B>(request: &http::Request<B>) -> Option<SocketAddr> {
    let ext = request.extensions();
    ext.get::<TcpConnectInfo>().and_then(TcpConnectInfo::remote_addr).or_else(|| {
        ext.get::<tonic::transport::server::TlsConnectInfo<TcpConnectInfo>>()
            .and_then(|i| i.get_ref().remote_addr())
    })
}

impl<S> tower::Service<http::Request<tonic::body::Body>> for StreamCount<S>
where
    S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let guard = self.tracker.stream_started(remote_of(&request));
        let future = self.inner.call(request);
        Box::pin(async move {
            let response = future.await?;
            Ok(match guard {
                Some(guard) => response.map(|body| tonic::body::Body::new(Counted { body, _guard: guard })),
                None => response,
            })
        })
    }
}

/// A response body that keeps its stream counted until it is dropped.
struct Counted {
    body: tonic::body::Body,
    _guard: StreamGuard,
}

impl http_body::Body for Counted {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnLimits {
        ConnLimits {
            max_total: 3,
            max_per_address: 2,
            preface_timeout: Some(Duration::from_secs(1)),
            idle_timeout: None,
        }
    }

    #[test]
    fn caps_per_address_and_in_total() {
        let tracker = Tracker::new(limits());
        let a = |port| SocketAddr::from(([10, 0, 0, 1], port));
        let b = |port| SocketAddr::from(([10, 0, 0, 2], port));
        let first = tracker.admit(a(1)).unwrap_or_else(|e| panic!("{e}"));
        assert!(tracker.admit(a(2)).is_ok());
        assert_eq!(tracker.admit(a(3)).err(), Some("--max-connections-per-address"));
        // Another address is not blocked by the first one's cap.
        assert!(tracker.admit(b(1)).is_ok());
        assert_eq!(tracker.admit(b(2)).err(), Some("--max-connections"));
        tracker.release(a(1), &first);
        assert!(tracker.admit(b(2)).is_ok());
        assert_eq!(tracker.connections(), 3);
    }
}
