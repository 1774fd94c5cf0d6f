//! Crash consistency over many cycles: writers under load, SIGKILL at a random moment,
//! restart on the same database, then: every acknowledged write is there, revisions are
//! gapless, the event log replays to the stored state, no checkpoint fails its digest.
//! BATON_CRASH_CYCLES sets the number of cycles (default 6 per backend).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_proto::v1::{
    CheckpointKind, CheckpointState, CreateCheckpointRequest, ListCheckpointsRequest, ListMemoryRequest,
};
use baton_tests::{Backend, Server, both};

use crate::{all_events, assert_gapless, project, put_note, start_session, write};

/// A pseudo-random delay in [min, max) ms, different every call.
fn jitter(min: u64, max: u64) -> Duration {
    let r = u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap());
    Duration::from_millis(min + r % (max - min))
}

async fn sigkill_cycles(backend: Backend) {
    let cycles: usize = std::env::var("BATON_CRASH_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(6);
    let mut server = Server::start(backend).await.unwrap();
    let p = project();
    let mut c = server.clients().await;
    let session = start_session(&mut c, &p).await;
    // Acknowledged: (key → value) for notes; ids for checkpoints.
    let notes = Arc::new(Mutex::new(HashMap::<String, String>::new()));
    let checkpoints = Arc::new(Mutex::new(Vec::<String>::new()));
    for cycle in 0..cycles {
        let c = server.clients().await;
        let writers: Vec<_> = (0..6)
            .map(|w| {
                let (mut c, p, sid) = (c.clone(), p.clone(), session.id.clone());
                let (notes, checkpoints) = (notes.clone(), checkpoints.clone());
                tokio::spawn(async move {
                    for i in 0.. {
                        if w == 0 {
                            let r = c
                                .checkpoints
                                .create_checkpoint(CreateCheckpointRequest {
                                    session_id: sid.clone(),
                                    kind: CheckpointKind::Auto as i32,
                                    state: Some(CheckpointState {
                                        phase: format!("{cycle}/{i}"),
                                        summary: "x".repeat((i * 97) % 4000),
                                        ..Default::default()
                                    }),
                                    write: write(),
                                    ..Default::default()
                                })
                                .await;
                            match r {
                                Ok(r) => {
                                    checkpoints.lock().unwrap().push(r.into_inner().checkpoint.unwrap().id);
                                }
                                Err(_) => return,
                            }
                        } else {
                            // Own keys, plus a key every writer overwrites.
                            let key =
                                if i % 5 == 0 { "shared".to_owned() } else { format!("c{cycle}-w{w}-{i}") };
                            let value = format!("{cycle}/{w}/{i}");
                            match put_note(&mut c, &p, &key, &value, write()).await {
                                Ok(_) => {
                                    notes.lock().unwrap().insert(key, value);
                                }
                                Err(_) => return,
                            }
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(jitter(150, 900)).await;
        server.kill9();
        for w in writers {
            let _ = w.await;
        }
        server.restart().unwrap();
        let mut c = server.clients().await;

        let stored: HashMap<String, String> = crate::all_memory(
            &mut c,
            ListMemoryRequest { project: p.clone(), include_evicted: true, ..Default::default() },
        )
        .await
        .into_iter()
        .map(|e| (e.key, e.content))
        .collect();
        for (key, value) in notes.lock().unwrap().iter().filter(|(k, _)| k.as_str() != "shared") {
            assert_eq!(stored.get(key), Some(value), "cycle {cycle}: acknowledged note {key} lost");
        }
        // The shared key holds some writer's value (the last committed one: see the replay).
        assert!(stored.get("shared").is_some_and(|v| v.contains('/')) || !stored.contains_key("shared"));

        let events = all_events(&mut c, &p).await;
        assert_gapless(&events);
        // Replaying the log reproduces the stored notes.
        assert_eq!(
            crate::replay_notes(&events),
            stored,
            "cycle {cycle}: the log does not replay to the stored notes"
        );

        let listed = c
            .checkpoints
            .list_checkpoints(ListCheckpointsRequest {
                session_id: session.id.clone(),
                include_state: false,
                page_size: 1000,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        for id in checkpoints.lock().unwrap().iter() {
            let found = listed.checkpoints.iter().find(|x| &x.id == id);
            let found = found.unwrap_or_else(|| panic!("cycle {cycle}: acknowledged checkpoint {id} lost"));
            assert!(!found.corrupt, "cycle {cycle}: checkpoint {id} fails its digest");
        }
        assert!(listed.checkpoints.iter().all(|x| !x.corrupt), "cycle {cycle}: a corrupt checkpoint");
    }
    let acked = notes.lock().unwrap().len() + checkpoints.lock().unwrap().len();
    assert!(acked > cycles * 10, "load too light: {acked} acknowledged writes in {cycles} cycles");
}
both!(sigkill_cycles);
