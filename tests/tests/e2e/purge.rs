//! Purge: a leaked value is overwritten in records, events, conflicts, checkpoints (digests
//! recomputed, so they still verify) and transcripts (even across a chunk boundary), with
//! one PURGED event that does not carry it.

use baton_proto::v1::{
    AgentKind, BlobRef, CheckpointKind, CheckpointState, Chunk, ConflictPolicy, CreateCheckpointRequest,
    EventKind, GetCheckpointRequest, GetChunksRequest, GetSessionRequest, ListConflictsRequest,
    ListMemoryRequest, MissingChunksRequest, PurgeRequest, PutChunksRequest, StartSessionRequest,
};
use baton_tests::{Backend, Server, both};
use prost::Message;
use sha2::Digest as _;
use tonic::Code;

use crate::{all_events, assert_gapless, based, code, project, put_note, write};

/// Not a pattern the redactor knows: the kind of value only a person can recognise.
const LEAK: &str = "corp-vault-passphrase-7d1f";

fn sha(data: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(data))
}

async fn purges_a_value_everywhere(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = crate::start(
        &mut c,
        StartSessionRequest {
            project: p.clone(),
            agent: AgentKind::Custom as i32,
            goal: format!("rotate {LEAK} before friday"),
            write: write(),
            ..Default::default()
        },
    )
    .await;
    // A note, then an overwrite from a stale base: the conflict records the old value.
    put_note(&mut c, &p, "db", &format!("the db password is {LEAK}"), write()).await.unwrap();
    put_note(&mut c, &p, "db", "moved to the vault", based(0, ConflictPolicy::Overwrite)).await.unwrap();
    put_note(&mut c, &p, "other", "unrelated", write()).await.unwrap();

    // A transcript in two chunks, the value straddling the boundary.
    let transcript = format!("{{\"prompt\":\"use {LEAK} to log in\"}}\n").into_bytes();
    let cut = transcript.windows(LEAK.len()).position(|w| w == LEAK.as_bytes()).unwrap() + 5;
    let parts = [transcript[..cut].to_vec(), transcript[cut..].to_vec()];
    let chunks: Vec<Chunk> = parts.iter().map(|d| Chunk { digest: sha(d), data: d.clone() }).collect();
    c.checkpoints.put_chunks(PutChunksRequest { project: p.clone(), chunks: chunks.clone() }).await.unwrap();
    let blob = BlobRef {
        role: "transcript".into(),
        digest: sha(&transcript),
        size_bytes: transcript.len() as i64,
        chunks: chunks.iter().map(|c| c.digest.clone()).collect(),
        content_type: "application/jsonl".into(),
        ..Default::default()
    };
    let mut ids = Vec::new();
    for size in [10, 5000] {
        // Small (stored plain) and large (stored compressed).
        let made = c
            .checkpoints
            .create_checkpoint(CreateCheckpointRequest {
                session_id: s.id.clone(),
                kind: CheckpointKind::Manual as i32,
                reason: format!("before using {LEAK}"),
                state: Some(CheckpointState {
                    open_questions: vec![format!("is {LEAK} rotated?"), "x".repeat(size)],
                    ..Default::default()
                }),
                payload: format!("{{\"secret\":\"{LEAK}\"}}").into_bytes(),
                payload_content_type: "application/json".into(),
                blobs: vec![blob.clone()],
                write: write(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        ids.push(made.checkpoint.unwrap().id);
    }
    // A commit link whose subject holds it.
    let commit = "ab".repeat(20);
    let link = baton_proto::v1::CommitLink {
        commit_id: commit.clone(),
        session_id: s.id.clone(),
        made_by: baton_proto::v1::CommitMadeBy::Agent as i32,
        seen_by: baton_proto::v1::CommitSeenBy::ToolCall as i32,
        subject: format!("Use {LEAK} for the vault"),
        ..Default::default()
    };
    let new = baton_proto::v1::NewCommitLink { link: Some(link), ..Default::default() };
    let request =
        baton_proto::v1::RecordCommitsRequest { project: p.clone(), links: vec![new], write: write() };
    c.commits.record_commits(request).await.unwrap();
    let before = all_events(&mut c, &p).await;

    // Bad input first.
    let (status, message) =
        code(c.admin.purge(PurgeRequest { project: p.clone(), value: "short".into(), dry_run: false }).await);
    assert_eq!(status, Code::InvalidArgument);
    assert!(message.contains("at least 8"), "{message}");
    let (status, _) = code(
        c.admin
            .purge(PurgeRequest {
                project: "github.com/nobody/none".into(),
                value: LEAK.into(),
                dry_run: false,
            })
            .await,
    );
    assert_eq!(status, Code::NotFound);

    // A dry run counts and changes nothing.
    let dry = c
        .admin
        .purge(PurgeRequest { project: p.clone(), value: LEAK.into(), dry_run: true })
        .await
        .unwrap()
        .into_inner();
    // The session, both checkpoints and the link; the session-started, note, overwrite and
    // link events.
    assert!(dry.records == 4 && dry.events == 4 && dry.conflicts == 1 && dry.chunks == 2, "{dry:?}");
    assert_eq!(dry.revision, 0);
    assert_eq!(all_events(&mut c, &p).await.len(), before.len());

    let done = c
        .admin
        .purge(PurgeRequest { project: p.clone(), value: LEAK.into(), dry_run: false })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (done.records, done.events, done.conflicts, done.chunks),
        (dry.records, dry.events, dry.conflicts, dry.chunks)
    );
    let mask = "*".repeat(LEAK.len());

    // Records.
    let session =
        c.sessions.get_session(GetSessionRequest { session_id: s.id.clone() }).await.unwrap().into_inner();
    assert_eq!(session.session.unwrap().goal, format!("rotate {mask} before friday"));
    let request = baton_proto::v1::FindCommitsRequest {
        project: p.clone(),
        commit_ids: vec![commit],
        ..Default::default()
    };
    let found = c.commits.find_commits(request).await.unwrap().into_inner();
    assert_eq!(found.links[0].link.as_ref().unwrap().subject, format!("Use {mask} for the vault"));
    let memory = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), include_evicted: true, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(format!("{memory:?}").contains("unrelated") && !format!("{memory:?}").contains(LEAK));
    // Conflicts.
    let conflicts = c
        .events
        .list_conflicts(ListConflictsRequest {
            project: p.clone(),
            after_revision: 0,
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(conflicts.conflicts.len(), 1);
    assert!(!format!("{conflicts:?}").contains(LEAK) && format!("{conflicts:?}").contains(&mask));

    // Checkpoints still verify (new digests), masked; the transcript too.
    for id in &ids {
        let got = c
            .checkpoints
            .get_checkpoint(GetCheckpointRequest { checkpoint_id: id.clone(), include_payload: true })
            .await
            .unwrap()
            .into_inner()
            .checkpoint
            .unwrap();
        assert_eq!(got.reason, format!("before using {mask}"));
        assert_eq!(got.state.unwrap().open_questions[0], format!("is {mask} rotated?"));
        assert_eq!(String::from_utf8(got.payload).unwrap(), format!("{{\"secret\":\"{mask}\"}}"));
        let blob = &got.blobs[0];
        let parts = c
            .checkpoints
            .get_chunks(GetChunksRequest { project: p.clone(), digests: blob.chunks.clone() })
            .await
            .unwrap()
            .into_inner()
            .chunks;
        let whole: Vec<u8> = parts.into_iter().flat_map(|c| c.data).collect();
        assert_eq!(
            String::from_utf8(whole.clone()).unwrap(),
            format!("{{\"prompt\":\"use {mask} to log in\"}}\n")
        );
        assert_eq!(blob.digest, sha(&whole));
    }
    let old = c
        .checkpoints
        .missing_chunks(MissingChunksRequest {
            project: p.clone(),
            digests: chunks.iter().map(|c| c.digest.clone()).collect(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(old.missing.len(), 2, "the old chunks are gone");

    // The log: nothing carries the value; one PURGED event without it; still gapless.
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    assert_eq!(events.len(), before.len() + 1);
    for e in &events {
        assert!(
            !String::from_utf8_lossy(&e.encode_to_vec()).contains(LEAK),
            "event {} still has it",
            e.revision
        );
    }
    let last = events.last().unwrap();
    assert_eq!((last.kind, last.revision), (EventKind::Purged as i32, done.revision));

    // From the command line, value on stdin; nothing left to change.
    let out = std::process::Command::new(baton_tests::binary("baton-server"))
        .args(["--database-url", &server.database_url, "purge", "--project", &p])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(format!("{LEAK}\n").as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("changed 0 records, 0 events"), "{stdout}");
    assert_eq!(all_events(&mut c, &p).await.len(), events.len(), "a purge that finds nothing writes nothing");
}
both!(purges_a_value_everywhere);
