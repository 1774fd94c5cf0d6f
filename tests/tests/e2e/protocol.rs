//! Stock gRPC tooling works: health checks, server reflection, and a client generated from
//! `proto/` by another language's stock tools (Python's grpcio).

use std::process::Command;

use baton_tests::{Backend, Server, both};
use futures::StreamExt;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The services a server lists by reflection, asked in one protocol version (`v1`, or
/// `v1alpha`, which Python's grpcio-reflection, older grpcurl and grpcui, Postman speak):
/// the two versions' messages have the same shape in different modules.
macro_rules! list_services {
    ($version:ident, $channel:expr) => {{
        use tonic_reflection::pb::$version::ServerReflectionRequest;
        use tonic_reflection::pb::$version::server_reflection_client::ServerReflectionClient;
        use tonic_reflection::pb::$version::server_reflection_request::MessageRequest;
        use tonic_reflection::pb::$version::server_reflection_response::MessageResponse;
        let mut reflection = ServerReflectionClient::new($channel);
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut replies =
            reflection.server_reflection_info(futures::stream::iter([request])).await.unwrap().into_inner();
        let reply = replies.next().await.unwrap().unwrap();
        let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else {
            panic!("{reply:?}")
        };
        list.service.into_iter().map(|s| s.name).collect::<Vec<String>>()
    }};
}

async fn health_and_reflection(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let channel = server.channel().await;
    let mut health = HealthClient::new(channel.clone());
    for service in ["", "baton.v1.SessionService", "baton.v1.EventService"] {
        let r = health.check(HealthCheckRequest { service: service.into() }).await.unwrap().into_inner();
        assert_eq!(r.status, ServingStatus::Serving as i32, "{service}");
    }
    // The container health check: `baton-server healthcheck` against the listen address.
    let check = |addr: String| {
        Command::new(baton_tests::binary("baton-server"))
            .args(["--listen", &addr, "healthcheck"])
            .output()
            .unwrap()
    };
    let up = check(server.addr.to_string());
    assert!(up.status.success() && String::from_utf8_lossy(&up.stdout).contains("serving"), "{up:?}");
    let down = check("127.0.0.1:1".into());
    assert!(!down.status.success());
    let names = list_services!(v1, channel.clone());
    let names_v1alpha = list_services!(v1alpha, channel);
    for expected in [
        "baton.v1.SessionService",
        "baton.v1.CheckpointService",
        "baton.v1.MemoryService",
        "baton.v1.BriefService",
        "baton.v1.EventService",
        "grpc.health.v1.Health",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
        assert!(
            names_v1alpha.iter().any(|n| n == expected),
            "v1alpha: {expected} missing from {names_v1alpha:?}"
        );
    }
}

both!(health_and_reflection);

async fn python_client(backend: Backend) {
    // Made once under target/ with pinned packages (baton_tests::python).
    let python = baton_tests::python::python().unwrap();
    let server = Server::start(backend).await.unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = tempfile::tempdir().unwrap();
    let script = root.join("tests/python/smoke.py");
    let run = Command::new(&python)
        .arg(&script)
        .args([
            &server.addr.to_string(),
            &root.join("proto").display().to_string(),
            &out.path().display().to_string(),
        ])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "python client failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(String::from_utf8_lossy(&run.stdout).contains("python client ok"));
}
both!(python_client);

async fn client_status(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let out = Command::new(baton_tests::binary("baton"))
        .args(["status", "--server", &server.url()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("serving"));
}
both!(client_status);
