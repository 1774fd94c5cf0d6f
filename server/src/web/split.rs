//! One port for gRPC and the web view: a request whose content-type is gRPC goes to the gRPC
//! services, behind their own layers (size limits read every body as gRPC frames, metrics
//! label by RPC path); any other request goes to the web view, behind its own checks (the
//! Host header, CSRF). A page cannot send `application/grpc`: a browser allows that
//! content-type on a cross-origin request only after a preflight the web view refuses.

use std::convert::Infallible;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Request, Response};
use tonic::body::Body;
use tower::{Service, ServiceExt};

/// Sends gRPC to `grpc` and everything else to `web`.
#[derive(Clone)]
pub struct Split<G> {
    grpc: G,
    web: axum::Router,
}

impl<G> Split<G> {
    pub fn new(grpc: G, web: axum::Router) -> Self {
        Self { grpc, web }
    }
}

/// Whether a request is gRPC (`application/grpc`, `application/grpc+proto`, …).
pub fn is_grpc<B>(request: &Request<B>) -> bool {
    request.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v == "application/grpc" || v.starts_with("application/grpc+") || v.starts_with("application/grpc;")
    })
}

impl<G> Service<Request<Body>> for Split<G>
where
    G: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + Send + 'static,
    G::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Each call readies its own clone of the branch it takes.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if is_grpc(&request) {
            let grpc = self.grpc.clone();
            Box::pin(grpc.oneshot(request))
        } else {
            let web = self.web.clone();
            Box::pin(async move {
                let response = web.oneshot(request).await?;
                Ok(response.map(Body::new))
            })
        }
    }
}
