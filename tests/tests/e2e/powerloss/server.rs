//! The server through power cuts: writers put notes (their own keys and one they all
//! overwrite) and create checkpoints with payloads, watchers stream the project's events,
//! and every reply and event is recorded; then the power is cut. After every restart: the
//! server starts; every acknowledged note and checkpoint is there, each checkpoint read back
//! whole and passing its digest; revisions are gapless and the log replays to the stored
//! notes; every event a watcher was sent is in the log, unchanged. Each cycle's check reads
//! what that cycle added (its notes are on a branch of their own, its events follow the last
//! check's) and an earlier cycle's notes and stretch of the log, picked at random; every
//! hundredth reads everything. The others stay short however long the run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_proto::v1::{
    CheckpointKind, CheckpointState, CreateCheckpointRequest, Event, GetCheckpointRequest, ListEventsRequest,
    ListMemoryRequest, PutMemoryRequest, WatchCursor, WatchRequest,
};
use baton_tests::lazyfs::fuse::LazyFs;
use baton_tests::postgres::Cluster;
use baton_tests::{Backend, Clients, Server, both};
use tokio_stream::StreamExt as _;

use super::below;
use crate::{note_request, put_note, start_session, write};

const PROJECT: &str = "github.com/power/cuts";

/// What the server acknowledged and what the watchers were sent.
#[derive(Default)]
struct Acked {
    notes: HashMap<String, String>,
    /// The notes acknowledged since the last check.
    fresh_notes: Vec<String>,
    /// Checkpoint id → its payload.
    checkpoints: HashMap<String, Vec<u8>>,
    /// The checkpoints acknowledged since the last check.
    fresh: Vec<String>,
    /// The highest revision acknowledged, of any write and of the shared note's.
    revision: i64,
    shared_revision: i64,
    /// Sent to watchers since the last check.
    watched: Vec<Event>,
}

/// What the checks read: the log (revision `i` at `i - 1`) and the notes it replays to.
#[derive(Default)]
struct Seen {
    log: Vec<Event>,
    replayed: HashMap<String, String>,
    /// The keys of the notes each cycle had acknowledged (its branch's).
    notes_of: Vec<Vec<String>>,
    /// Events the watchers were sent, all told.
    watched: usize,
}

async fn power_cycles(backend: Backend) {
    let (mnt, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Postgres syncs a new relation file, never the folder naming it: it relies on the
    // journal of ext4 or XFS keeping the name with the file (`LazyFs::journaled`).
    let fs = if backend == Backend::Postgres { LazyFs::journaled() } else { LazyFs::default() };
    let Some(mut mounted) = super::mount(mnt.path(), fs) else { return };
    let mut cluster = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(
            Cluster::create_durable_in(mnt.path(), &logs.path().join("postgres.log")).expect("a cluster"),
        ),
    };
    let url = match &cluster {
        // In folders the server makes: their names must outlive the first cut too.
        None => format!("sqlite://{}/data/baton/baton.db", mnt.path().display()),
        Some(cluster) => cluster.fresh_database().await.unwrap(),
    };
    let acked = Arc::new(Mutex::new(Acked::default()));
    let mut seen = Seen::default();
    let mut session = None;
    let cycles = super::cycles();
    for cycle in 0..=cycles {
        let mut server = Server::start_on(backend, &url, &[])
            .unwrap_or_else(|e| panic!("cycle {cycle}: the server does not start on what is left: {e:#}"));
        let mut c = server.clients().await;
        // Nothing else runs while it checks.
        let mut so_far = std::mem::take(&mut *acked.lock().unwrap());
        let head = check(&mut c, cycle, &mut so_far, &mut seen, cycle == cycles).await;
        *acked.lock().unwrap() = so_far;
        super::progress(&format!("{backend:?}"), cycle);
        if cycle == cycles {
            break;
        }
        let sid = match &session {
            Some(id) => String::clone(id),
            None => session.insert(start_session(&mut c, PROJECT).await.id).clone(),
        };
        let watchers: Vec<_> = (0..2).map(|_| tokio::spawn(watch(c.clone(), head, acked.clone()))).collect();
        let writers: Vec<_> =
            (0..4).map(|w| tokio::spawn(writer(c.clone(), w, cycle, sid.clone(), acked.clone()))).collect();
        tokio::time::sleep(Duration::from_millis(100 + below(300))).await;

        server.kill9();
        if let Some(cluster) = &mut cluster {
            cluster.stop(false);
        }
        for task in writers.into_iter().chain(watchers) {
            task.await.unwrap();
        }
        mounted = mounted.cut_power().expect("the power cut");
        if let Some(cluster) = &mut cluster {
            cluster.start().unwrap_or_else(|e| panic!("cycle {cycle}: Postgres does not start: {e:#}"));
        }
    }
    let acked = acked.lock().unwrap();
    let (notes, checkpoints) = (acked.notes.len(), acked.checkpoints.len());
    assert!(
        notes > cycles * 4 && checkpoints > cycles,
        "load too light: {notes} notes and {checkpoints} checkpoints acknowledged in {cycles} cycles"
    );
    assert!(seen.watched > cycles, "watchers too idle: {} events in {cycles} cycles", seen.watched);
    drop(cluster);
    mounted.unmount().unwrap();
}
both!(power_cycles);

/// Writes until the server is gone; writer 0 creates checkpoints, the others put notes.
async fn writer(mut c: Clients, w: usize, cycle: usize, sid: String, acked: Arc<Mutex<Acked>>) {
    for i in 0.. {
        if w == 0 {
            let payload: Vec<u8> = (0..below(20_000)).map(|b| (b % 251) as u8).collect();
            let request = CreateCheckpointRequest {
                session_id: sid.clone(),
                kind: CheckpointKind::Auto as i32,
                state: Some(CheckpointState { phase: format!("{cycle}/{i}"), ..Default::default() }),
                payload: payload.clone(),
                payload_content_type: "application/octet-stream".into(),
                write: write(),
                ..Default::default()
            };
            let Ok(r) = c.checkpoints.create_checkpoint(request).await else { return };
            let r = r.into_inner();
            let id = r.checkpoint.map(|c| c.id).unwrap_or_default();
            let mut acked = acked.lock().unwrap();
            acked.revision = acked.revision.max(r.result.map_or(0, |r| r.revision));
            acked.fresh.push(id.clone());
            acked.checkpoints.insert(id, payload);
        } else {
            // The shared note project-wide, the cycle's own on its branch.
            let (key, branch) = match i % 5 {
                0 => ("shared".to_owned(), String::new()),
                _ => (format!("c{cycle}-w{w}-{i}"), branch_of(cycle)),
            };
            let value = format!("{cycle}/{w}/{i}");
            let request = PutMemoryRequest { branch, ..note_request(PROJECT, &key, &value, write()) };
            let Ok(r) = c.memory.put_memory(request).await else { return };
            let revision = r.into_inner().result.map_or(0, |r| r.revision);
            let mut acked = acked.lock().unwrap();
            acked.revision = acked.revision.max(revision);
            if key == "shared" {
                acked.shared_revision = acked.shared_revision.max(revision);
            } else {
                acked.fresh_notes.push(key.clone());
            }
            acked.notes.insert(key, value);
        }
    }
}

/// Records every event streamed after `head` until the server is gone.
async fn watch(mut c: Clients, head: i64, acked: Arc<Mutex<Acked>>) {
    let request = WatchRequest {
        cursors: vec![WatchCursor { project: PROJECT.into(), after_revision: head }],
        kinds: vec![],
    };
    let Ok(stream) = c.events.watch(request).await else { return };
    let mut stream = stream.into_inner();
    while let Some(Ok(e)) = stream.next().await {
        acked.lock().unwrap().watched.push(e);
    }
}

/// The branch a cycle's own notes are on.
fn branch_of(cycle: usize) -> String {
    format!("c{cycle}")
}

/// Checks the restarted server against what was acknowledged and what earlier checks read;
/// returns the project's head revision. Every hundredth cycle and the last (`last`) read the
/// whole log and every note, the others what the cycle just cut added and an earlier cycle's
/// notes and stretch of the log. Checkpoints are read back whole: those of the last cycle and
/// a sample of the others (`last`: every one).
async fn check(c: &mut Clients, cycle: usize, acked: &mut Acked, seen: &mut Seen, last: bool) -> i64 {
    let full = last || cycle.is_multiple_of(100);
    // The log: what earlier checks read is there unchanged (the whole of it, or its last
    // event), and the rest follows without a gap.
    let known = seen.log.len();
    let from = if full { 0 } else { known.saturating_sub(1) };
    let events = crate::events_after(c, PROJECT, from as i64).await;
    for (i, before) in seen.log[from..].iter().enumerate() {
        assert_eq!(
            events.get(i),
            Some(before),
            "cycle {cycle}: revision {} was in the log before the cut, now lost or changed",
            before.revision
        );
    }
    let new = &events[known - from..];
    for (i, e) in new.iter().enumerate() {
        assert_eq!(e.revision, (known + i + 1) as i64, "cycle {cycle}: a gap in the log");
    }
    let added = crate::replay_notes(new);
    seen.replayed.extend(added.clone());
    seen.log.extend_from_slice(new);
    let head = known as i64 + new.len() as i64;
    assert!(
        head >= acked.revision,
        "cycle {cycle}: revision {} was acknowledged, the log ends at {head}",
        acked.revision
    );
    seen.watched += acked.watched.len();
    for sent in acked.watched.drain(..) {
        let logged = usize::try_from(sent.revision - 1).ok().and_then(|i| seen.log.get(i));
        assert_eq!(
            logged,
            Some(&sent),
            "cycle {cycle}: a watcher was sent revision {} and the log lost or changed it",
            sent.revision
        );
    }

    // The notes: every branch, or the project-wide ones and the last cycle's branch.
    let branches = match cycle.checked_sub(1) {
        _ if full => vec![None],
        Some(cut) => vec![Some(String::new()), Some(branch_of(cut))],
        None => vec![Some(String::new())],
    };
    let mut stored = HashMap::new();
    let mut shared = 0;
    for branch in branches {
        let request = ListMemoryRequest {
            project: PROJECT.into(),
            branch,
            include_evicted: true,
            ..Default::default()
        };
        for e in crate::all_memory(c, request).await {
            if e.key == "shared" {
                shared = e.record_revision;
            }
            stored.insert(e.key, e.content);
        }
    }
    // The note every writer overwrites holds the last acknowledged value or a later one.
    assert!(
        shared >= acked.shared_revision,
        "cycle {cycle}: the shared note went back to revision {shared}; {} was acknowledged",
        acked.shared_revision
    );
    let fresh = std::mem::take(&mut acked.fresh_notes);
    let keys: Vec<&String> = if full { acked.notes.keys().collect() } else { fresh.iter().collect() };
    for key in keys.into_iter().filter(|k| k.as_str() != "shared") {
        assert_eq!(stored.get(key), acked.notes.get(key), "cycle {cycle}: acknowledged note {key} lost");
    }
    if cycle > 0 {
        seen.notes_of.push(fresh);
    }
    if acked.notes.contains_key("shared") {
        assert!(stored.contains_key("shared"), "cycle {cycle}: the shared note lost");
    }
    // The log replays to the stored notes: all of them, or those read and those the new
    // events wrote.
    if full {
        assert_eq!(seen.replayed, stored, "cycle {cycle}: the log does not replay to the stored notes");
    } else {
        for (key, value) in &stored {
            assert_eq!(
                seen.replayed.get(key),
                Some(value),
                "cycle {cycle}: note {key} is not what the log says"
            );
        }
        for (key, value) in &added {
            assert_eq!(
                stored.get(key),
                Some(value),
                "cycle {cycle}: the log wrote note {key}, it is not stored"
            );
        }
    }

    if !full {
        spot_check(c, cycle, acked, seen).await;
    }

    let mut read_back = std::mem::take(&mut acked.fresh);
    if last {
        read_back = acked.checkpoints.keys().cloned().collect();
    } else if !acked.checkpoints.is_empty() {
        let ids: Vec<&String> = acked.checkpoints.keys().collect();
        read_back.extend((0..10).map(|_| ids[below(ids.len() as u64) as usize].clone()));
    }
    for id in &read_back {
        let payload = &acked.checkpoints[id];
        let got = c
            .checkpoints
            .get_checkpoint(GetCheckpointRequest { checkpoint_id: id.clone(), include_payload: true })
            .await
            .unwrap_or_else(|e| panic!("cycle {cycle}: acknowledged checkpoint {id}: {e}"))
            .into_inner()
            .checkpoint
            .unwrap_or_default();
        assert!(!got.corrupt, "cycle {cycle}: checkpoint {id} fails its digest");
        assert_eq!(&got.payload, payload, "cycle {cycle}: checkpoint {id}'s payload changed");
    }
    head
}

/// An earlier cycle's notes and a stretch of the log, picked at random, are as earlier checks
/// read them: a cut that loses older data is seen within a cycle, not at the next full check.
async fn spot_check(c: &mut Clients, cycle: usize, acked: &Acked, seen: &Seen) {
    if seen.notes_of.len() > 1 {
        let earlier = below(seen.notes_of.len() as u64 - 1) as usize;
        let request = ListMemoryRequest {
            project: PROJECT.into(),
            branch: Some(branch_of(earlier)),
            include_evicted: true,
            ..Default::default()
        };
        let stored: HashMap<String, String> =
            crate::all_memory(c, request).await.into_iter().map(|e| (e.key, e.content)).collect();
        for key in &seen.notes_of[earlier] {
            assert_eq!(
                stored.get(key),
                acked.notes.get(key),
                "cycle {cycle}: cycle {earlier}'s note {key} lost"
            );
        }
        for (key, value) in &stored {
            assert_eq!(
                seen.replayed.get(key),
                Some(value),
                "cycle {cycle}: cycle {earlier}'s note {key} changed"
            );
        }
    }
    if seen.log.len() > 1 {
        let from = below(seen.log.len() as u64 - 1) as usize;
        let page = c
            .events
            .list_events(ListEventsRequest {
                project: PROJECT.into(),
                after_revision: from as i64,
                limit: 200,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .events;
        // A page may stop short of its limit (its byte budget), never at nothing.
        let n = page.len().min(seen.log.len() - from);
        assert!(n > 0, "cycle {cycle}: the log after revision {from} lost its events");
        assert_eq!(
            page[..n],
            seen.log[from..from + n],
            "cycle {cycle}: the log after revision {from} lost or changed events it had"
        );
    }
}

/// `baton-server export` onto the mount, then the power cut: the archive is whole and
/// imports; an export over it that fails leaves it as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_survives_a_power_cut() {
    let mnt = tempfile::tempdir().unwrap();
    let Some(mut mounted) = super::mount(mnt.path(), LazyFs::default()) else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    for i in 0..20 {
        put_note(&mut c, PROJECT, &format!("k{i}"), &format!("v{i}"), write()).await.unwrap();
    }
    let archive = mnt.path().join("baton.archive").display().to_string();
    let (ok, _, err) = server.admin_command(&["export", "--output", &archive]);
    assert!(ok, "{err}");
    mounted = mounted.cut_power().expect("the power cut");
    let kept = std::fs::read(&archive).expect("the archive after the cut");
    // A failed export (no such project) leaves the archive there as it was, and nothing else.
    let (ok, _, _) =
        server.admin_command(&["export", "--output", &archive, "--project", "github.com/no/such"]);
    assert!(!ok);
    assert_eq!(std::fs::read(&archive).unwrap(), kept, "a failed export changed the archive");
    let names: Vec<String> = std::fs::read_dir(mnt.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["baton.archive"], "only the archive, no temporary file");
    mounted = mounted.cut_power().expect("the power cut");
    // An export to something that is not a file is written to, not replaced.
    let (ok, _, err) = server.admin_command(&["export", "--output", "/dev/null"]);
    assert!(ok && std::fs::metadata("/dev/null").is_ok_and(|m| !m.is_file()), "{err}");

    let team = Server::start(Backend::Sqlite).await.unwrap();
    let (ok, out, err) = team.admin_command(&["import", "--input", &archive]);
    assert!(ok, "the archive after the cut does not import: {err}");
    assert!(out.contains("imported 40, already present 0"), "{out}");
    mounted.unmount().unwrap();
}
