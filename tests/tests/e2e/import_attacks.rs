//! The second attack pass on `baton-server import` (issue 39, point 3): an archive, often
//! from someone else's laptop, is trusted no more than a client. Every record is checked as
//! the RPC that writes it checks its request, stored bytes decompress no further than their
//! recorded size, a session's head is one of its own project's checkpoints, and a refused
//! archive writes nothing: what the database held before is exactly what it holds after.

use std::path::Path;

use base64::Engine as _;
use baton_proto::v1::{CheckpointKind, CheckpointState, CreateCheckpointRequest, ListSessionsRequest};
use baton_tests::{Backend, Clients, Server, both};
use serde_json::Value;

use crate::{project, put_note, start_session, write};

fn read_lines(path: &Path) -> Vec<Value> {
    let text = String::from_utf8(zstd::decode_all(std::fs::read(path).unwrap().as_slice()).unwrap()).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn write_lines(path: &Path, lines: &[Value]) {
    let text = lines.iter().map(Value::to_string).collect::<Vec<_>>().join("\n");
    std::fs::write(path, zstd::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
}

/// Everything the server stores, as its export says it (the header's time left out).
fn contents(server: &Server, dir: &Path) -> String {
    let out = dir.join("contents.baton");
    let (ok, _, err) = server.admin_command(&["export", "--output", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    read_lines(&out)[1..].iter().map(Value::to_string).collect::<Vec<_>>().join("\n")
}

/// The archive's lines with the first line of `kind` in `project` changed by `change`.
fn tampered(lines: &[Value], project: &str, kind: &str, change: impl FnOnce(&mut Value)) -> Vec<Value> {
    let mut out = lines.to_vec();
    let mut current = String::new();
    let mut change = Some(change);
    for line in &mut out {
        if line["type"] == "project" {
            line["key"].as_str().unwrap().clone_into(&mut current);
        } else if line["type"] == kind
            && current == project
            && let Some(change) = change.take()
        {
            change(line);
        }
    }
    assert!(change.is_none(), "no {kind} line in {project}");
    out
}

/// Stored bytes behind a zstd skippable frame of 2 MiB: they decompress to the same content.
fn padded(stored: &str) -> String {
    use base64::engine::general_purpose::STANDARD;
    let mut bytes = 0x184D_2A50_u32.to_le_bytes().to_vec();
    bytes.extend_from_slice(&(2u32 << 20).to_le_bytes());
    bytes.resize(8 + (2 << 20), 0);
    bytes.extend(STANDARD.decode(stored).unwrap());
    STANDARD.encode(bytes)
}

/// The lines of `project`'s section, its project line first.
fn section(lines: &[Value], project: &str) -> Vec<Value> {
    let start = lines.iter().position(|l| l["type"] == "project" && l["key"] == project).unwrap();
    let end =
        lines[start + 1..].iter().position(|l| l["type"] == "project").map_or(lines.len(), |e| start + 1 + e);
    lines[start..end].to_vec()
}

/// The archive with `project`'s session line moved after its checkpoint line.
fn session_after_its_checkpoint(lines: &[Value], project: &str) -> Vec<Value> {
    let mut out = lines.to_vec();
    let start = out.iter().position(|l| l["type"] == "project" && l["key"] == project).unwrap();
    let session = start + out[start..].iter().position(|l| l["type"] == "session").unwrap();
    let checkpoint = start + out[start..].iter().position(|l| l["type"] == "checkpoint").unwrap();
    let moved = out.remove(session);
    out.insert(checkpoint, moved);
    out
}

/// A session with a compressed checkpoint (its head) and a note.
async fn fill(c: &mut Clients, p: &str) -> (String, String) {
    let session = start_session(c, p).await;
    let request = CreateCheckpointRequest {
        session_id: session.id.clone(),
        kind: CheckpointKind::Manual as i32,
        reason: "at work".into(),
        state: Some(CheckpointState { phase: "the plan, at length ".repeat(100), ..Default::default() }),
        write: write(),
        ..Default::default()
    };
    let checkpoint = c.checkpoints.create_checkpoint(request).await.unwrap().into_inner().checkpoint.unwrap();
    put_note(c, p, "style", "tabs, never spaces", write()).await.unwrap();
    (session.id, checkpoint.id)
}

async fn sessions_in(c: &mut Clients, p: &str) -> usize {
    let request = ListSessionsRequest { project: p.into(), ..Default::default() };
    c.sessions.list_sessions(request).await.unwrap().into_inner().sessions.len()
}

async fn an_archive_is_trusted_no_more_than_a_client(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let source = Server::start(backend).await.unwrap();
    let mut s = source.clients().await;
    let (a, b) = (project(), project());
    fill(&mut s, &a).await;
    fill(&mut s, &b).await;
    let good = dir.path().join("good.baton");
    let (ok, _, err) = source.admin_command(&["export", "--output", good.to_str().unwrap()]);
    assert!(ok, "{err}");
    let lines = read_lines(&good);

    // The team's server, with a project of its own.
    let team = Server::start(backend).await.unwrap();
    let mut t = team.clients().await;
    let victim = project();
    let (_, victims_checkpoint) = fill(&mut t, &victim).await;
    let before = contents(&team, dir.path());

    // Each archive is refused with what was wrong; project `a`, valid and before the bad
    // line, is not written either.
    let bomb = base64::engine::general_purpose::STANDARD
        .encode(zstd::bulk::compress(&vec![0u8; 64 << 20], 3).unwrap());
    let bad = dir.path().join("bad.baton");
    let cases: Vec<(&str, Vec<Value>)> = vec![
        ("unknown category", tampered(&lines, &b, "memory", |m| m["category"] = "nonsense".into())),
        ("branch", tampered(&lines, &b, "memory", |m| m["branch"] = "main\nrm -rf".into())),
        ("NUL", tampered(&lines, &b, "memory", |m| m["content"] = "a\u{0}b".into())),
        ("control characters", tampered(&lines, &b, "session", |m| m["branch"] = "\u{1b}[31mred".into())),
        ("not a valid uuid", tampered(&lines, &b, "memory", |m| m["id"] = "../../x".into())),
        ("is required", tampered(&lines, &b, "memory", |m| m["id"] = "".into())),
        ("not a valid uuid", tampered(&lines, &b, "memory", |m| m["id"] = "7".repeat(10_240).into())),
        (
            "lower-case",
            tampered(&lines, &b, "session", |m| m["id"] = m["id"].as_str().unwrap().to_uppercase().into()),
        ),
        ("the limit is", tampered(&lines, &b, "memory", |m| m["content"] = "x".repeat(20_000).into())),
        (
            "more than its recorded size",
            tampered(&lines, &b, "checkpoint", |m| m["state"] = bomb.clone().into()),
        ),
        ("checkpoint limit", tampered(&lines, &b, "checkpoint", |m| m["size_bytes"] = 400_000_000.into())),
        (
            "head checkpoint",
            tampered(&lines, &b, "session", |m| m["head_checkpoint_id"] = victims_checkpoint.clone().into()),
        ),
        (
            "in neither the archive nor this database",
            tampered(&lines, &b, "checkpoint", |m| m["parent_id"] = uuid::Uuid::now_v7().to_string().into()),
        ),
        (
            "stored bytes",
            tampered(&lines, &b, "checkpoint", |m| m["state"] = padded(m["state"].as_str().unwrap()).into()),
        ),
        ("comes before its session", session_after_its_checkpoint(&lines, &b)),
        ("again", [lines.as_slice(), section(&lines, &b).as_slice()].concat()),
    ];
    for (expected, archive) in cases {
        write_lines(&bad, &archive);
        let (ok, out, err) = team.admin_command(&["import", "--input", bad.to_str().unwrap()]);
        assert!(!ok && err.contains(expected), "{expected}: {out} {err}");
        assert!(err.contains("line "), "names the line: {err}");
        assert_eq!(contents(&team, dir.path()), before, "{expected}: the refused archive wrote");
    }

    // A dry run says what would be written, and writes nothing.
    let (ok, dry, err) = team.admin_command(&["import", "--input", good.to_str().unwrap(), "--dry-run"]);
    assert!(ok, "{err}");
    assert!(dry.contains(&format!("{a}: would import 4, already present 0")), "{dry}");
    assert!(dry.contains("nothing was written"), "{dry}");
    assert_eq!(contents(&team, dir.path()), before);

    // One project of the archive, then the rest from stdin: the counts are the dry run's.
    let (ok, _, err) =
        team.admin_command(&["import", "--input", good.to_str().unwrap(), "--project", "no/such"]);
    assert!(!ok && err.contains("holds no project"), "{err}");
    let (ok, out, err) = team.admin_command(&["import", "--input", good.to_str().unwrap(), "--project", &b]);
    assert!(ok, "{err}");
    assert!(out.contains(&format!("{b}: imported 4")) && !out.contains(&a), "{out}");
    assert_eq!((sessions_in(&mut t, &a).await, sessions_in(&mut t, &b).await), (0, 1));
    let (ok, out, err) =
        team.admin_command_with_input(&["import", "--input", "-"], &std::fs::read(&good).unwrap());
    assert!(ok, "{err}");
    let expected = dry.lines().find(|l| l.starts_with(&a)).unwrap().replace("would import", "imported");
    assert!(out.contains(&expected), "{out} vs {expected}");
    assert!(out.contains(&format!("{b}: imported 0, already present 4")), "{out}");
    assert_eq!(sessions_in(&mut t, &a).await, 1);
}
both!(an_archive_is_trusted_no_more_than_a_client);

/// Item logs in an archive are checked as AppendItems checks them, and in order: an item
/// comes after its log's line, in seq order, each key once; a refused archive writes nothing.
async fn an_archive_cannot_bend_item_logs(backend: Backend) {
    use baton_proto::v1::{AppendItemsRequest, NewItem};
    let dir = tempfile::tempdir().unwrap();
    let source = Server::start(backend).await.unwrap();
    let mut s = source.clients().await;
    let a = project();
    let items = ["one", "two"].map(|v| NewItem {
        key: format!("k-{v}"),
        content_type: String::new(),
        value: v.as_bytes().to_vec(),
    });
    let request = AppendItemsRequest {
        project: a.clone(),
        key: "conv".into(),
        items: items.to_vec(),
        summary_json: Some("{}".into()),
        write: write(),
    };
    s.items.append_items(request).await.unwrap();
    let good = dir.path().join("good.baton");
    let (ok, _, err) = source.admin_command(&["export", "--output", good.to_str().unwrap()]);
    assert!(ok, "{err}");
    let lines = read_lines(&good);
    let team = Server::start(backend).await.unwrap();
    let before = contents(&team, dir.path());
    let bad = dir.path().join("bad.baton");
    let log_line = lines.iter().position(|l| l["type"] == "item_log").unwrap();
    let mut item_first = lines.clone();
    let log = item_first.remove(log_line);
    item_first.push(log);
    let mut reordered = lines.clone();
    reordered.swap(log_line + 1, log_line + 2);
    let cases: Vec<(&str, Vec<Value>)> = vec![
        ("control characters", tampered(&lines, &a, "item_log", |l| l["key"] = "conv\nrm -rf".into())),
        ("not JSON", tampered(&lines, &a, "item_log", |l| l["summary"] = "{".into())),
        ("not an encoded Actor", tampered(&lines, &a, "item_log", |l| l["author"] = "AAAA/w==".into())),
        ("they start at 1", tampered(&lines, &a, "item", |i| i["seq"] = 0.into())),
        ("content_type", tampered(&lines, &a, "item", |i| i["content_type"] = "tëxt".into())),
        ("as the server stores", tampered(&lines, &a, "item", |i| i["item_key"] = "".into())),
        ("before its log", item_first),
        ("out of order", reordered),
        ("twice", tampered(&lines, &a, "item", |i| i["item_key"] = "k-two".into())),
    ];
    for (expected, archive) in cases {
        write_lines(&bad, &archive);
        let (ok, out, err) = team.admin_command(&["import", "--input", bad.to_str().unwrap()]);
        assert!(!ok && err.contains(expected), "{expected}: {out} {err}");
        assert!(err.contains("line "), "names the line: {err}");
        assert_eq!(contents(&team, dir.path()), before, "{expected}: the refused archive wrote");
    }
    let (ok, out, err) = team.admin_command(&["import", "--input", good.to_str().unwrap()]);
    assert!(ok && out.contains(&format!("{a}: imported 3, already present 0")), "{out} {err}");
}
both!(an_archive_cannot_bend_item_logs);
