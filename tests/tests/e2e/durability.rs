//! Durability: every acknowledged write survives `kill -9` under load; SIGTERM drains
//! gracefully (watch streams end cleanly, the process exits 0, data intact).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_proto::v1::{
    CheckpointKind, CheckpointState, CreateCheckpointRequest, GetCheckpointRequest, ListMemoryRequest,
};
use baton_tests::{Backend, Server, both};
use futures::StreamExt;

use crate::watch::open;
use crate::{all_events, all_memory, assert_gapless, project, put_note, start_session, write};

async fn kill9_under_load_keeps_acknowledged_writes(backend: Backend) {
    let mut server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let session = start_session(&mut c, &p).await;
    let acked_notes = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let acked_checkpoints = Arc::new(Mutex::new(Vec::<String>::new()));
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let mut c = c.clone();
            let p = p.clone();
            let sid = session.id.clone();
            let notes = acked_notes.clone();
            let cps = acked_checkpoints.clone();
            tokio::spawn(async move {
                for i in 0.. {
                    if w % 4 == 0 {
                        let r = c
                            .checkpoints
                            .create_checkpoint(CreateCheckpointRequest {
                                session_id: sid.clone(),
                                kind: CheckpointKind::Auto as i32,
                                state: Some(CheckpointState {
                                    phase: format!("{w}/{i}"),
                                    summary: "s".repeat(i % 3000),
                                    ..Default::default()
                                }),
                                write: write(),
                                ..Default::default()
                            })
                            .await;
                        match r {
                            Ok(r) => cps.lock().unwrap().push(r.into_inner().checkpoint.unwrap().id),
                            Err(_) => return,
                        }
                    } else {
                        let key = format!("k{w}-{i}");
                        let value = format!("v{w}-{i}");
                        match put_note(&mut c, &p, &key, &value, write()).await {
                            Ok(_) => notes.lock().unwrap().push((key, value)),
                            Err(_) => return,
                        }
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.kill9();
    for w in writers {
        let _ = w.await;
    }
    let notes = acked_notes.lock().unwrap().clone();
    let cps = acked_checkpoints.lock().unwrap().clone();
    assert!(
        notes.len() > 20 && !cps.is_empty(),
        "load too light: {} notes, {} checkpoints",
        notes.len(),
        cps.len()
    );

    server.restart().unwrap();
    let mut c = server.clients().await;
    let stored = all_memory(&mut c, ListMemoryRequest { project: p.clone(), ..Default::default() }).await;
    let stored: std::collections::HashMap<String, String> =
        stored.into_iter().map(|e| (e.key, e.content)).collect();
    for (key, value) in &notes {
        assert_eq!(stored.get(key), Some(value), "acknowledged note {key} lost");
    }
    for id in &cps {
        c.checkpoints
            .get_checkpoint(GetCheckpointRequest { checkpoint_id: id.clone(), include_payload: true })
            .await
            .unwrap_or_else(|e| panic!("acknowledged checkpoint {id}: {e}"));
    }
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    // Writes keep working after the restart.
    put_note(&mut c, &p, "after", "restart", write()).await.unwrap();
}
both!(kill9_under_load_keeps_acknowledged_writes);

async fn sigterm_drains_gracefully(backend: Backend) {
    let mut server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    put_note(&mut c, &p, "k", "v", write()).await.unwrap();
    let mut stream = open(&mut c, &[(&p, 0)], vec![]).await;
    assert_eq!(stream.next().await.unwrap().unwrap().revision, 1);
    let status = server.signal_and_wait("TERM").unwrap();
    assert!(status.success(), "exit status {status:?}\n{}", server.log());
    // The watch stream ended cleanly (no error status).
    match tokio::time::timeout(Duration::from_secs(10), stream.next()).await.unwrap() {
        None => {}
        Some(Err(e)) => panic!("stream ended with an error: {e}"),
        Some(Ok(e)) => panic!("unexpected event {e:?}"),
    }
    assert!(server.log().contains("database closed cleanly"), "{}", server.log());
    server.restart().unwrap();
    let mut c = server.clients().await;
    assert_eq!(all_events(&mut c, &p).await.len(), 1);
    // SIGINT (Ctrl-C) drains the same way.
    let status = server.signal_and_wait("INT").unwrap();
    assert!(status.success(), "exit status {status:?}\n{}", server.log());
    assert!(server.log().contains("database closed cleanly"), "{}", server.log());
}
both!(sigterm_drains_gracefully);
