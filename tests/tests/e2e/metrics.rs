//! Prometheus metrics on their own port: requests by RPC and status, latencies, writes,
//! conflicts, active watchers, sessions by status, the database pool.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use baton_proto::v1::{ConflictPolicy, WatchCursor, WatchRequest};
use baton_tests::{Backend, Server};

use crate::{based, project, put_note, start_session, write};

pub fn scrape(port: u16) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    // The gRPC port speaks HTTP/2 only and may reset an HTTP/1.1 request: that reads as "".
    let _ = stream.read_to_string(&mut out);
    out
}

/// The value of the sample whose line starts with `series`.
pub fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_metrics_on_their_own_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let server = Server::start_with(Backend::Sqlite, &["--metrics-listen", &listen]).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    start_session(&mut c, &p).await;
    for i in 0..3 {
        put_note(&mut c, &p, &format!("k{i}"), "v", write()).await.unwrap();
    }
    put_note(&mut c, &p, "k0", "late", based(0, ConflictPolicy::Overwrite)).await.unwrap();
    assert!(put_note(&mut c, &p, "", "", write()).await.is_err());
    let mut events = c.events.clone();
    let _stream = events
        .watch(WatchRequest {
            cursors: vec![WatchCursor { project: p.clone(), after_revision: 0 }],
            kinds: vec![],
        })
        .await
        .unwrap();

    // Sessions and the pool are sampled every 2 s.
    let deadline = Instant::now() + Duration::from_secs(15);
    let text = loop {
        let text = scrape(port);
        if value(&text, "baton_sessions{status=\"active\"}") == Some(1.0) {
            break text;
        }
        assert!(Instant::now() < deadline, "no session gauge:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert_eq!(value(&text, "baton_requests_total{rpc=\"PutMemory\",code=\"Ok\"}"), Some(4.0), "{text}");
    assert_eq!(
        value(&text, "baton_requests_total{rpc=\"PutMemory\",code=\"InvalidArgument\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(value(&text, "baton_requests_total{rpc=\"StartSession\",code=\"Ok\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "baton_request_duration_seconds_count{rpc=\"PutMemory\"}"), Some(5.0), "{text}");
    assert!(text.contains("baton_request_duration_seconds_bucket{rpc=\"PutMemory\",le=\"0.005\"}"), "{text}");
    assert_eq!(value(&text, "baton_writes_total{kind=\"memory_changed\"}"), Some(4.0), "{text}");
    assert_eq!(value(&text, "baton_writes_total{kind=\"session_started\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "baton_conflicts_total{outcome=\"overwritten\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "baton_active_watchers"), Some(1.0), "{text}");
    assert!(value(&text, "baton_db_pool_connections{state=\"open\"}").is_some_and(|n| n >= 1.0), "{text}");

    // Not on the gRPC port.
    let grpc = scrape(server.addr.port());
    assert!(!grpc.contains("baton_requests_total"), "{grpc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_metrics_port_stops_the_server_with_the_reason() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(baton_tests::binary("baton-server"))
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", &listen, "--database-url"])
        .arg(format!("sqlite://{}", dir.path().join("x.db").display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot serve metrics") && err.contains(&listen), "{err}");
}
