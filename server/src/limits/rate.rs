//! Request rate limits per access token, by `tower_governor` (a GCRA limiter keyed by the
//! token). Requests without a token are not limited here: on an open hub there is no token
//! to tell callers apart (it listens on loopback by default), and once tokens exist a
//! request without one is refused by authentication before it costs anything.

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use governor::middleware::NoOpMiddleware;
use tonic::Status;
use tonic::body::Body;
use tower_governor::GovernorError;
use tower_governor::governor::{GovernorConfig, GovernorConfigBuilder};
use tower_governor::key_extractor::KeyExtractor;

/// Keys a request by (a hash of) its `authorization` header: one bucket per token.
#[derive(Clone)]
pub struct TokenKey(RandomState);

impl KeyExtractor for TokenKey {
    type Key = u64;

    fn extract<T>(&self, request: &http::Request<T>) -> Result<u64, GovernorError> {
        let header =
            request.headers().get(http::header::AUTHORIZATION).map(|v| v.as_bytes()).unwrap_or_default();
        Ok(self.0.hash_one(header))
    }
}

type Config = GovernorConfig<TokenKey, NoOpMiddleware>;
type Limited<S> = tower_governor::governor::Governor<TokenKey, NoOpMiddleware, S, Body>;

#[derive(Clone)]
pub struct RateLimitLayer {
    layer: tower_governor::GovernorLayer<TokenKey, NoOpMiddleware, Body>,
}

impl RateLimitLayer {
    /// `per_second` sustained requests per token, bursts up to `burst`. Spawns a task that
    /// forgets idle tokens' buckets every minute, so memory stays bounded.
    pub fn new(per_second: u32, burst: u32) -> Option<Self> {
        let per_second = per_second.max(1);
        let config: Arc<Config> = Arc::new(
            GovernorConfigBuilder::default()
                .key_extractor(TokenKey(RandomState::new()))
                .period(Duration::from_secs(1) / per_second)
                .burst_size(burst.max(1))
                .finish()?,
        );
        let limiter = config.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(60));
            loop {
                every.tick().await;
                limiter.limiter().retain_recent();
            }
        });
        let layer = tower_governor::GovernorLayer::new(config).error_handler(move |e| {
            let message = match e {
                GovernorError::TooManyRequests { wait_time, .. } => format!(
                    "rate limit exceeded: this token may send {per_second} requests/s (bursts of {burst}; \
                     --rate-limit, --rate-burst); retry in {wait_time} s or slow down"
                ),
                other => format!("rate limiter: {other}"),
            };
            Status::resource_exhausted(message).into_http()
        });
        Some(Self { layer })
    }
}

impl<S: Clone> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimit { limited: self.layer.layer(inner.clone()), plain: inner }
    }
}

/// Token-bearing requests go through the limiter; the rest straight to the service.
#[derive(Clone)]
pub struct RateLimit<S> {
    limited: Limited<S>,
    plain: S,
}

impl<S> tower::Service<http::Request<Body>> for RateLimit<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        match self.plain.poll_ready(cx) {
            Poll::Ready(Ok(())) => self.limited.poll_ready(cx),
            other => other,
        }
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if request.headers().contains_key(http::header::AUTHORIZATION) {
            Box::pin(self.limited.call(request))
        } else {
            Box::pin(self.plain.call(request))
        }
    }
}
