//! Reservations: a grant's latency in a project that holds 1,000 live reservations (the
//! server's default cap), next to a small write at the raw storage floor. Each grant is
//! released before the next, so the project stays at its cap.

use std::sync::Arc;
use std::time::Duration;

use baton_proto::v1::{AgentKind, ReleaseRequest, ReserveRequest, StartSessionRequest, WriteOptions};
use baton_tests::{Backend, Clients};

use crate::Row;
use crate::floor::Floor;
use crate::stats::{ms, sequential};

fn write() -> WriteOptions {
    WriteOptions { request_id: uuid::Uuid::now_v7().to_string(), ..Default::default() }
}

async fn session(c: &Clients, project: &str) -> String {
    let mut sessions = c.sessions.clone();
    let request = StartSessionRequest {
        project: project.into(),
        agent: AgentKind::Custom as i32,
        host: "bench".into(),
        write: Some(write()),
        ..Default::default()
    };
    sessions.start_session(request).await.unwrap().into_inner().session.unwrap().id
}

pub async fn grant(backend: Backend, c: &Clients, floor: &Floor, n: usize) -> Row {
    let project = "bench/reservations";
    let holder = session(c, project).await;
    let mut r = c.reservations.clone();
    for batch in 0..10 {
        let paths =
            (batch * 100..(batch * 100 + 100).min(999)).map(|i| format!("planted/{i}/lib.rs")).collect();
        let ask = ReserveRequest {
            project: project.into(),
            session_id: holder.clone(),
            paths,
            write: Some(write()),
            ..Default::default()
        };
        assert!(r.reserve(ask).await.unwrap().into_inner().granted);
    }
    let asker = Arc::new(session(c, project).await);
    let one = |i: usize| {
        let (mut r, asker) = (c.reservations.clone(), asker.clone());
        async move {
            let ask = ReserveRequest {
                project: project.into(),
                session_id: (*asker).clone(),
                paths: vec![format!("new/{i}.rs")],
                write: Some(write()),
                ..Default::default()
            };
            let started = std::time::Instant::now();
            assert!(r.reserve(ask).await.unwrap().into_inner().granted);
            let took = started.elapsed();
            let release = ReleaseRequest {
                project: project.into(),
                session_id: (*asker).clone(),
                write: Some(write()),
                ..Default::default()
            };
            r.release(release).await.unwrap();
            took
        }
    };
    // Warm-up: each pool connection prepares its statements on first use.
    for i in 0..20 {
        one(i).await;
    }
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        took.push(one(1000 + i).await);
    }
    took.sort();
    let p = |q: f64| took[((took.len() as f64 - 1.0) * q).round() as usize];
    let at_floor = sequential(n, |_| floor.write(project, b"a small write")).await;
    let target = Duration::from_millis(5);
    Row {
        scenario: format!("a reservation's grant, 1,000 live in the project ({n} grants, each released)"),
        baton: format!("p50 {} · p99 {}", ms(p(0.5)), ms(p(0.99))),
        floor: format!("small write p50 {} · p99 {}", ms(at_floor.p50()), ms(at_floor.p99())),
        ratio: format!("{:.1}× (p99)", p(0.99).as_secs_f64() / at_floor.p99().as_secs_f64().max(1e-9)),
        target: if backend == Backend::Sqlite { "p99 ≤ 5 ms".into() } else { String::new() },
        met: (backend == Backend::Sqlite).then(|| p(0.99) <= target),
    }
}
