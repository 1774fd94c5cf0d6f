//! `baton-server export` / `import`: a laptop's SQLite history moved into a team server's
//! Postgres, ids kept, revisions renumbered, everything still verifying; importing twice
//! changes nothing; a bad archive is refused with the reason.

use baton_proto::v1::{
    BlobRef, CheckpointKind, Chunk, CommitLink, CommitMadeBy, CommitSeenBy, CreateCheckpointRequest,
    FindCommitsRequest, GetBriefRequest, GetCheckpointRequest, GetChunksRequest, GetSessionRequest,
    ListCheckpointsRequest, ListMemoryRequest, MemoryItem, MemoryOp, NewCommitLink, PutChunksRequest,
    PutMemoryRequest, RecordCommitsRequest,
};
use baton_tests::{Backend, Clients, Server};
use sha2::Digest as _;

use crate::checkpoints::checkpoint;
use crate::{all_events, assert_gapless, project, put_note, start_session, write};

async fn memory_ids(c: &mut Clients, p: &str) -> Vec<String> {
    let mut ids: Vec<String> = c
        .memory
        .list_memory(ListMemoryRequest { project: p.into(), include_evicted: true, ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .entries
        .into_iter()
        .map(|e| e.id)
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn laptop_history_moves_to_the_team_server() {
    let laptop = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = laptop.clients().await;
    let p = project();
    let s1 = start_session(&mut c, &p).await;
    let c1 = checkpoint(&mut c, &s1.id, None, "one").await.checkpoint.unwrap();
    let c2 = checkpoint(&mut c, &s1.id, None, "two").await.checkpoint.unwrap();
    let fork = checkpoint(&mut c, &s1.id, Some(c1.id.clone()), "fork").await.checkpoint.unwrap();
    let s2 = start_session(&mut c, &p).await;
    let data = b"{\"transcript\":true}\n".to_vec();
    let digest = hex::encode(sha2::Sha256::digest(&data));
    c.checkpoints
        .put_chunks(PutChunksRequest {
            project: p.clone(),
            chunks: vec![Chunk { digest: digest.clone(), data: data.clone() }],
        })
        .await
        .unwrap();
    let with_transcript = c
        .checkpoints
        .create_checkpoint(CreateCheckpointRequest {
            session_id: s2.id.clone(),
            kind: CheckpointKind::SessionEnd as i32,
            reason: "end".into(),
            blobs: vec![BlobRef {
                role: "transcript".into(),
                digest: digest.clone(),
                size_bytes: data.len() as i64,
                chunks: vec![digest.clone()],
                ..Default::default()
            }],
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .checkpoint
        .unwrap();
    c.memory
        .put_memory(PutMemoryRequest {
            project: p.clone(),
            category: "decision".into(),
            op: MemoryOp::Append as i32,
            items: vec![
                MemoryItem { content: "sqlx for both backends".into(), rationale: "one code path".into() },
                MemoryItem { content: "zstd archives".into(), rationale: String::new() },
            ],
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap();
    put_note(&mut c, &p, "deploy", "fly.io", write()).await.unwrap();
    let laptop_memory = memory_ids(&mut c, &p).await;
    // A commit link of s1, with its lines' fingerprints.
    let commit = "c0ffee".repeat(6) + "c0ff";
    let link = CommitLink {
        commit_id: commit.clone(),
        session_id: s1.id.clone(),
        checkpoint_id: c1.id.clone(),
        made_by: CommitMadeBy::Agent as i32,
        seen_by: CommitSeenBy::ToolCall as i32,
        subject: "Add the parser".into(),
        files: vec!["src/parser.rs".into()],
        prompt: "write the parser".into(),
        ..Default::default()
    };
    let fingerprints = vec!["0123456789abcdef".to_owned(), "fedcba9876543210".to_owned()];
    let new =
        NewCommitLink { link: Some(link), line_fingerprints: fingerprints.clone(), lines_truncated: false };
    let request = RecordCommitsRequest { project: p.clone(), links: vec![new], write: write() };
    c.commits.record_commits(request).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("laptop.baton");
    let archive_arg = archive.display().to_string();
    let (ok, _, err) = laptop.admin_command(&["export", "--output", &archive_arg]);
    assert!(ok, "{err}");
    assert!(err.contains(&format!("exported {p}")), "{err}");

    // The team server already has some history in this project.
    let team = Server::start(Backend::Postgres).await.unwrap();
    let mut t = team.clients().await;
    put_note(&mut t, &p, "oncall", "alice", write()).await.unwrap();
    let (ok, out, err) = team.admin_command(&["import", "--input", &archive_arg]);
    assert!(ok, "{err}");
    // 2 sessions, 4 checkpoints, 3 memory entries, 1 record (the note; appends have none), 1 chunk,
    // 1 commit link.
    assert!(out.contains(&format!("{p}: imported 12, already present 0")), "{out}");
    let request =
        FindCommitsRequest { project: p.clone(), line_fingerprints: fingerprints, ..Default::default() };
    let found = t.commits.find_commits(request).await.unwrap().into_inner();
    let got = found.links[0].link.clone().unwrap();
    assert_eq!(
        (got.commit_id.as_str(), got.session_id.as_str(), got.lines),
        (commit.as_str(), s1.id.as_str(), 2)
    );
    assert_eq!(
        (got.prompt.as_str(), got.files.as_slice()),
        ("write the parser", &["src/parser.rs".to_owned()][..])
    );
    assert_eq!(found.fingerprints.len(), 2, "the fingerprints came along");

    // Same ids, same content; checkpoints verify (digests intact) in the same tree.
    for s in [&s1, &s2] {
        let got = t
            .sessions
            .get_session(GetSessionRequest { session_id: s.id.clone() })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got.session.unwrap().goal, s.goal);
    }
    for id in [&c1.id, &c2.id, &fork.id, &with_transcript.id] {
        t.checkpoints
            .get_checkpoint(GetCheckpointRequest { checkpoint_id: id.clone(), include_payload: true })
            .await
            .unwrap();
    }
    let tree = t
        .checkpoints
        .list_checkpoints(ListCheckpointsRequest {
            session_id: s1.id.clone(),
            include_state: false,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let shape: Vec<(&str, &str)> =
        tree.checkpoints.iter().map(|c| (c.id.as_str(), c.parent_id.as_str())).collect();
    assert_eq!(
        shape,
        [(c1.id.as_str(), ""), (c2.id.as_str(), c1.id.as_str()), (fork.id.as_str(), c1.id.as_str())]
    );
    assert_eq!(tree.head_checkpoint_id, fork.id);
    let chunks = t
        .checkpoints
        .get_chunks(GetChunksRequest { project: p.clone(), digests: vec![digest.clone()] })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(chunks.chunks[0].data, data);
    let team_memory = memory_ids(&mut t, &p).await;
    for id in &laptop_memory {
        assert!(team_memory.contains(id), "memory {id} missing");
    }
    assert_eq!(team_memory.len(), laptop_memory.len() + 1);
    let brief = t
        .brief
        .get_brief(GetBriefRequest { project: p.clone(), budget_chars: 4000, ..Default::default() })
        .await
        .unwrap();
    assert!(format!("{:?}", brief.into_inner()).contains("sqlx for both backends"));

    // Renumbered after the team's own revision, one event per record, gapless.
    let events = all_events(&mut t, &p).await;
    assert_gapless(&events);
    assert_eq!(events.len(), 1 + 2 + 4 + 3 + 1);
    assert!(events[1..].iter().all(|e| e.revision > 1));

    // Again: nothing new.
    let (ok, out, err) = team.admin_command(&["import", "--input", &archive_arg]);
    assert!(ok, "{err}");
    assert!(out.contains("imported 0, already present 12"), "{out}");
    assert_eq!(all_events(&mut t, &p).await.len(), events.len());

    // Not an archive.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"hello").unwrap();
    let (ok, _, err) = team.admin_command(&["import", "--input", &junk.display().to_string()]);
    assert!(!ok && (err.contains("zstd") || err.contains("archive")), "{err}");
    let plain = dir.path().join("plain.zst");
    let mut enc = zstd::Encoder::new(std::fs::File::create(&plain).unwrap(), 3).unwrap();
    std::io::Write::write_all(&mut enc, b"{\"type\":\"project\",\"key\":\"x\",\"memory_caps\":\"{}\"}\n")
        .unwrap();
    enc.finish().unwrap();
    let (ok, _, err) = team.admin_command(&["import", "--input", &plain.display().to_string()]);
    assert!(!ok && err.contains("not a Baton export"), "{err}");
    let (ok, _, err) =
        laptop.admin_command(&["export", "--output", &archive_arg, "--project", "github.com/no/such"]);
    assert!(!ok && err.contains("no project"), "{err}");
}

/// Checkpoints of several MiB each leave in pages that end on their bytes, not their count:
/// every one arrives, in order, and still verifies. (Nine of 7.5 MB pass the 64 MiB page;
/// the bytes are noise, as checkpoints are stored compressed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_checkpoints_export_in_byte_pages() {
    let laptop = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = laptop.clients().await;
    let p = project();
    let s = start_session(&mut c, &p).await;
    let noise = |seed: u64| {
        let mut x = seed | 1;
        (0..7_500_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect::<Vec<u8>>()
    };
    let mut ids = Vec::new();
    for n in 0..10u64 {
        let created = c
            .checkpoints
            .create_checkpoint(CreateCheckpointRequest {
                session_id: s.id.clone(),
                kind: CheckpointKind::Manual as i32,
                reason: format!("large {n}"),
                payload: noise(n),
                payload_content_type: "application/octet-stream".into(),
                write: write(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        ids.push(created.checkpoint.unwrap().id);
    }
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("large.baton").display().to_string();
    let (ok, _, err) = laptop.admin_command(&["export", "--output", &archive]);
    assert!(ok, "{err}");

    let team = Server::start(Backend::Sqlite).await.unwrap();
    let (ok, out, err) = team.admin_command(&["import", "--input", &archive]);
    assert!(ok, "{err}");
    // 1 session and 10 checkpoints.
    assert!(out.contains(&format!("{p}: imported 11, already present 0")), "{out}");
    let mut t = team.clients().await.checkpoints.max_decoding_message_size(16 * 1024 * 1024);
    for (n, id) in ids.iter().enumerate() {
        let got = t
            .get_checkpoint(GetCheckpointRequest { checkpoint_id: id.clone(), include_payload: true })
            .await
            .unwrap()
            .into_inner()
            .checkpoint
            .unwrap();
        assert!(got.payload == noise(n as u64), "checkpoint {n} differs");
    }
}
