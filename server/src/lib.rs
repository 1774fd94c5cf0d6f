//! Baton's session hub: a gRPC server that stores sessions, checkpoints and project memory
//! for AI coding agents, on SQLite or Postgres.
//!
//! Layout: `api` (one file per gRPC service) → `service` (one use case per file) → `core`
//! (pure rules), `store` below (one transaction per write); `events` delivers the change log
//! to watchers; `jobs` runs the liveness reaper, retention and start-up backfills.

pub mod api;
pub mod archive;
pub mod auth;
pub mod cli;
pub mod config;
pub mod core;
pub mod disk;
pub mod error;
pub mod events;
pub mod jobs;
pub mod limits;
pub mod metrics;
pub mod service;
pub mod store;
pub mod web;

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use baton_proto::v1::admin_service_server::AdminServiceServer;
use baton_proto::v1::brief_service_server::BriefServiceServer;
use baton_proto::v1::checkpoint_service_server::CheckpointServiceServer;
use baton_proto::v1::commit_service_server::CommitServiceServer;
use baton_proto::v1::event_service_server::EventServiceServer;
use baton_proto::v1::item_log_service_server::ItemLogServiceServer;
use baton_proto::v1::memory_service_server::MemoryServiceServer;
use baton_proto::v1::reservation_service_server::ReservationServiceServer;
use baton_proto::v1::search_service_server::SearchServiceServer;
use baton_proto::v1::session_service_server::SessionServiceServer;
use baton_proto::v1::thread_service_server::ThreadServiceServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::Server;

use crate::api::{Api, Limits};
use crate::config::{Config, redacted_url};
use crate::events::{Hub, Instances, Wakers};
use crate::store::{Backend, Expiry, PgStore, SqliteStore, Store};

/// Runs the server on `listener` until `shutdown` completes, then drains: in-flight
/// requests finish, watch streams end cleanly, the database pool closes.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let url = config.resolved_database_url()?;
    let wakers = Wakers::default();
    match Backend::of(&url) {
        Some(Backend::Sqlite) => {
            let store = SqliteStore::connect(&url, wakers.clone())
                .await
                .with_context(|| format!("opening SQLite database {}", redacted_url(&url)))?;
            tracing::info!(database = %redacted_url(&url), "SQLite database ready (WAL, synchronous=FULL)");
            serve(config, store, wakers, listener, shutdown).await
        }
        Some(Backend::Postgres) => {
            // Other instances on the database hear of this one's commits, and it of theirs,
            // until the server has stopped (`stop` dropped).
            let (stop, stopped) = watch::channel(false);
            let options = url.parse().with_context(|| format!("reading {}", redacted_url(&url)))?;
            let instances = Instances::start(&options, wakers.clone(), stopped);
            let store = PgStore::connect(&url, instances)
                .await
                .with_context(|| format!("connecting to Postgres {}", redacted_url(&url)))?;
            tracing::info!(database = %redacted_url(&url), "Postgres database ready");
            let served = serve(config, store, wakers, listener, shutdown).await;
            drop(stop);
            served
        }
        None => anyhow::bail!(
            "--database-url {} is not understood: use sqlite://PATH or postgres://USER:PASS@HOST/DB",
            redacted_url(&url)
        ),
    }
}

/// Creates the bootstrap admin token if asked and none exists; refuses an open hub on a
/// non-loopback address unless told it is fine.
async fn prepare_access<S: Store>(
    config: &Config,
    store: &S,
    addr: std::net::SocketAddr,
) -> anyhow::Result<()> {
    if let Some(secret) = &config.bootstrap_admin_token
        && !crate::store::any_tokens(store).await?
    {
        if secret.len() < 16 {
            anyhow::bail!("BATON_BOOTSTRAP_ADMIN_TOKEN is too short: use at least 16 random characters");
        }
        let hash = core::access::hash_secret(secret);
        service::tokens::create(store, "bootstrap-admin".into(), "admin".into(), None, hash).await?;
        tracing::info!("created the first admin token (bootstrap-admin) from BATON_BOOTSTRAP_ADMIN_TOKEN");
    }
    let open = !crate::store::any_tokens(store).await?;
    if open && !addr.ip().is_loopback() && !config.allow_open_network {
        anyhow::bail!(
            "refusing to listen on {addr}: this server has no access tokens, so anyone who can reach it could read \
             and write everything. Create a token first (`baton-server token create --name NAME --role admin`), \
             listen on loopback (the default {}), or pass --allow-open-network if the network is trusted.",
            config::DEFAULT_LISTEN
        );
    }
    if open {
        tracing::warn!("no access tokens exist: the hub is open to anyone who can reach {addr}");
    }
    Ok(())
}

async fn serve<S: Store>(
    config: Config,
    store: S,
    wakers: Wakers,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let prepared = async {
        // Rows an older version wrote, made whole before serving.
        crate::jobs::backfill::state_digests(&store).await?;
        prepare_access(&config, &store, listener.local_addr()?).await
    };
    if let Err(e) = prepared.await {
        // Close the pool first: its connection threads would keep the process alive.
        store.close().await;
        return Err(e);
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let sampler = match start_metrics(&config, &store, &stop_rx) {
        Ok(sampler) => sampler,
        Err(e) => {
            store.close().await;
            return Err(e);
        }
    };
    let api = build_api(&config, &store, wakers, &stop_rx);
    let (reaper, retention) = spawn_jobs(&config, &store, &stop_rx);
    let sizes = size_limits(&config);
    let max_message = sizes.largest();
    let addr = listener.local_addr()?;
    // `addr` last: the test harness reads the port from the end of this line.
    tracing::info!(tls = config.tls_cert.is_some(), %addr, "baton-server listening");

    // Stop watchers first so that the graceful drain is not held open by live streams.
    let shutdown = async move {
        shutdown.await;
        tracing::info!("shutting down: finishing in-flight requests");
        let _ = stop_tx.send(true);
    };
    let tracker = limits::conn::Tracker::new(limits::conn::ConnLimits {
        max_total: config.max_connections.max(1),
        max_per_address: config.max_connections_per_address.max(1),
        preface_timeout: unless_zero(config.handshake_timeout),
        idle_timeout: unless_zero(config.idle_timeout),
    });
    let grpc = grpc_routes(&api, max_message).await?;
    // Outermost first: metrics see every reply, including the limits' refusals. These wrap
    // gRPC only: they read bodies as gRPC frames and label requests by RPC.
    let grpc = tower::ServiceBuilder::new()
        .option_layer(config.metrics_listen.map(|_| metrics::MetricsLayer))
        .layer(limits::SizeLimitLayer(Arc::new(sizes)))
        .service(grpc);
    let keepalive = unless_zero(config.http2_keepalive);
    // Open streams count on every connection, gRPC or web.
    let mut server = Server::builder()
        .http2_keepalive_interval(keepalive)
        .http2_keepalive_timeout(keepalive)
        .accept_http1(!config.no_web)
        .layer(limits::conn::StreamCountLayer(tracker.clone()));
    let tls = tls_config(&config)?;
    let secure = tls.is_some();
    if let Some(mut tls) = tls {
        if let Some(deadline) = unless_zero(config.handshake_timeout) {
            tls = tls.timeout(deadline);
        }
        server = server.tls_config(tls).context("configuring TLS")?;
    }
    // Connection caps and deadlines (limits::conn); TCP_NODELAY, or a multi-segment reply
    // (a brief) waits on the client's delayed ACK on every call.
    let incoming = tracker.incoming(listener);
    let served = if config.no_web {
        server.serve_with_incoming_shutdown(grpc, incoming, shutdown).await
    } else {
        let hosts = web::guard::Hosts::new(&config.web_hosts);
        let info = web::Info {
            backend: match Backend::of(&config.resolved_database_url()?) {
                Some(Backend::Postgres) => "Postgres",
                _ => "SQLite",
            },
            retention_interval: config.retention_interval,
            started: std::time::Instant::now(),
        };
        let pages = web::router(web::Web::new(api, config.web_session_ttl, secure, info), hosts);
        tracing::info!("web view on: open http{}://{addr}/ in a browser", if secure { "s" } else { "" });
        server.serve_with_incoming_shutdown(web::Split::new(grpc, pages), incoming, shutdown).await
    };
    served.context("serving gRPC")?;
    for job in std::iter::once(reaper).chain(sampler).chain(retention) {
        let _ = job.await;
    }
    store.close().await;
    tracing::info!("stopped; database closed cleanly");
    Ok(())
}

/// The gRPC services, each with its decoding cap.
async fn grpc_routes<S: Store>(api: &Api<S>, max_message: usize) -> anyhow::Result<tonic::service::Routes> {
    let mut routes = tonic::service::Routes::builder();
    add_standard_services(&mut routes).await?;
    routes
        .add_service(SessionServiceServer::new(api.clone()).max_decoding_message_size(max_message))
        .add_service(CheckpointServiceServer::new(api.clone()).max_decoding_message_size(max_message))
        .add_service(MemoryServiceServer::new(api.clone()).max_decoding_message_size(max_message))
        .add_service(BriefServiceServer::new(api.clone()).max_decoding_message_size(max_message))
        .add_service(EventServiceServer::new(api.clone()).max_decoding_message_size(max_message))
        .add_service(SearchServiceServer::new(api.clone()).max_decoding_message_size(max_message))
        .add_service(ThreadServiceServer::new(api.clone()).max_decoding_message_size(max_message))
        .add_service(ItemLogServiceServer::new(api.clone()).max_decoding_message_size(max_message))
        .add_service(ReservationServiceServer::new(api.clone()).max_decoding_message_size(max_message))
        .add_service(CommitServiceServer::new(api.clone()).max_decoding_message_size(max_message))
        .add_service(AdminServiceServer::new(api.clone()).max_decoding_message_size(max_message));
    Ok(routes.routes().prepare())
}

/// The metrics listener and its sampler, if --metrics-listen is set.
fn start_metrics<S: Store>(
    config: &Config,
    store: &S,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<Option<Job>> {
    let Some(addr) = config.metrics_listen else { return Ok(None) };
    metrics::install(addr)?;
    let every = std::time::Duration::from_secs(2);
    Ok(Some(tokio::spawn(metrics::sample(store.clone(), every, stop.clone()))))
}

/// The API and what it holds: the watch hub, limits, rate limits, access.
fn build_api<S: Store>(config: &Config, store: &S, wakers: Wakers, stop: &watch::Receiver<bool>) -> Api<S> {
    let hub = Hub::new(store.clone(), wakers, config.watch_poll, stop.clone());
    let retention = jobs::retention::Policy::of(config);
    let limits = Limits {
        max_checkpoint_bytes: config.max_checkpoint_bytes,
        max_watch_projects: config.max_watch_projects.max(1),
        retention,
        search_time_limit: config.search_time_limit.max(std::time::Duration::from_millis(1)),
        max_reservations: usize::try_from(config.max_reservations).unwrap_or(usize::MAX),
    };
    let rates = Arc::new(limits::rate::RateLimits::new(
        config.rate_limit,
        config.rate_burst,
        config.auth_failure_rate,
        config.auth_failure_burst,
    ));
    tokio::spawn(limits::rate::prune_every_minute(rates.clone(), stop.clone()));
    Api {
        store: store.clone(),
        hub,
        limits: Arc::new(limits),
        shutdown: stop.clone(),
        auth: auth::Auth::new(store.clone(), rates),
        memory_cache: service::memory_cache::MemoryCache::default(),
        watch_slots: limits::Slots::new(config.max_watches_per_token.max(1), &limits::WATCHES),
        search_slots: limits::Slots::new(config.max_searches_per_token.max(1), &limits::SEARCHES),
    }
}

type Job = tokio::task::JoinHandle<()>;

/// The liveness reaper and, unless turned off, retention.
fn spawn_jobs<S: Store>(config: &Config, store: &S, stop: &watch::Receiver<bool>) -> (Job, Option<Job>) {
    let idle_after_us = i64::try_from(config.idle_after.as_micros()).unwrap_or(i64::MAX);
    let expiry = Expiry { idle_after_us };
    let reaper = tokio::spawn(jobs::reaper::run(store.clone(), expiry, config.reaper_interval, stop.clone()));
    tokio::spawn(jobs::search::backfill(store.clone(), stop.clone()));
    let policy = jobs::retention::Policy::of(config);
    let retention = (!config.retention_interval.is_zero()).then(|| {
        tokio::spawn(jobs::retention::run(store.clone(), policy, config.retention_interval, stop.clone()))
    });
    (reaper, retention)
}

/// Health (every Baton service serving) and reflection, v1 and v1alpha (Python's
/// grpcio-reflection, older grpcurl and grpcui, Postman speak only v1alpha), added to
/// `routes`.
async fn add_standard_services(routes: &mut tonic::service::RoutesBuilder) -> anyhow::Result<()> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    for name in [
        "baton.v1.SessionService",
        "baton.v1.CheckpointService",
        "baton.v1.MemoryService",
        "baton.v1.BriefService",
        "baton.v1.EventService",
        "baton.v1.AdminService",
        "baton.v1.SearchService",
        "baton.v1.ThreadService",
        "baton.v1.ItemLogService",
    ] {
        health_reporter.set_service_status(name, tonic_health::ServingStatus::Serving).await;
    }
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(baton_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let v1alpha = reflection().build_v1alpha().context("building the reflection service (v1alpha)")?;
    let v1 = reflection().build_v1().context("building the reflection service")?;
    routes.add_service(health_service).add_service(v1).add_service(v1alpha);
    Ok(())
}

/// The request size limits, checked on each request's frame header before it is read:
/// RESOURCE_EXHAUSTED naming the limit. Tonic's own decoding cap is the largest of them, as
/// a backstop.
fn size_limits(config: &Config) -> limits::SizeLimits {
    limits::SizeLimits::new(
        // The checkpoint limit counts state and payload; allow for the envelope (blob refs…).
        config.max_checkpoint_bytes.saturating_add(2 * 1024 * 1024),
        api::MAX_CHUNKS_BYTES + 64 * 1024,
        config.max_memory_request_bytes,
        config.max_request_bytes,
    )
}

/// A duration flag where 0 means off.
fn unless_zero(d: std::time::Duration) -> Option<std::time::Duration> {
    (!d.is_zero()).then_some(d)
}

/// The TLS identity from --tls-cert/--tls-key, read now so a bad path fails at start-up.
fn tls_config(config: &Config) -> anyhow::Result<Option<tonic::transport::ServerTlsConfig>> {
    let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) else {
        return Ok(None);
    };
    let read = |path: &std::path::Path, what: &str| {
        std::fs::read(path).with_context(|| format!("cannot read the TLS {what} {}", path.display()))
    };
    let (cert_pem, key_pem) = (read(cert, "certificate")?, read(key, "key")?);
    if !String::from_utf8_lossy(&cert_pem).contains("-----BEGIN CERTIFICATE-----") {
        anyhow::bail!("--tls-cert {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", cert.display());
    }
    if !String::from_utf8_lossy(&key_pem).contains("PRIVATE KEY-----") {
        anyhow::bail!("--tls-key {} holds no PEM private key", key.display());
    }
    let identity = tonic::transport::Identity::from_pem(cert_pem, key_pem);
    Ok(Some(tonic::transport::ServerTlsConfig::new().identity(identity)))
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
