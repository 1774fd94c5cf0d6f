//! A hostile hub or teammate names the conversation and its files: what is restored is
//! written only inside the agent's own folders.

use std::path::Path;

use baton_proto::v1::BlobRef;

use super::{claude, codex, gemini};

#[test]
fn restore_refuses_names_that_are_not_one_plain_component() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = home.path().join("repo");
    for id in ["../../work/repo/planted", "/tmp/abs", "..", "a/b"] {
        let blob = BlobRef { agent_session_id: id.into(), ..Default::default() };
        assert!(claude::AGENT.restore_transcript(b"x", &blob, &cwd, home.path()).is_err(), "{id}");
    }
    let mut written = Vec::new();
    for entry in std::fs::read_dir(home.path()).into_iter().flatten().flatten() {
        written.push(entry.path());
    }
    assert!(written.is_empty(), "{written:?}");
}

/// A hostile hub names the conversation: Codex rollouts and Gemini chats are written only
/// under the agent's own folder, named by one plain component, or not at all.
#[test]
fn rollouts_and_chats_are_written_only_inside_the_agents_folders() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = home.path().join("work/repo");
    for id in ["../../.bashrc", "/etc/passwd", "..", "a/b", "-rf", ""] {
        let blob = BlobRef { agent_session_id: id.into(), ..Default::default() };
        assert!(codex::AGENT.restore_transcript(b"{}\n", &blob, &cwd, home.path()).is_err(), "{id}");
        assert!(gemini::AGENT.restore_transcript(b"{}\n", &blob, &cwd, home.path()).is_err(), "{id}");
    }
    assert!(std::fs::read_dir(home.path()).into_iter().flatten().next().is_none(), "nothing written");
    let blob = BlobRef {
        agent_session_id: "019a0000-0000-7000-8000-000000000001".into(),
        cwd: "/old/repo".into(),
        ..Default::default()
    };
    let rollout = codex::AGENT
        .restore_transcript(b"{\"cwd\":\"/old/repo\"}\n", &blob, &cwd, home.path())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(rollout.starts_with(home.path().join(".codex/sessions")), "{}", rollout.display());
    assert_eq!(
        std::fs::read_to_string(&rollout).unwrap_or_default(),
        format!("{{\"cwd\":\"{}\"}}\n", cwd.display())
    );
    // Again: over the same file (Codex's index points at it), not a second one.
    assert_eq!(
        codex::AGENT.restore_transcript(b"{}\n", &blob, &cwd, home.path()).unwrap_or_else(|e| panic!("{e}")),
        rollout
    );
    let chat_blob =
        BlobRef { agent_session_id: "8c66f21c-0f6c-4470-ac65-887cafd0ed91".into(), ..Default::default() };
    let chat = gemini::AGENT
        .restore_transcript(
            br#"{"sessionId":"8c66f21c-0f6c-4470-ac65-887cafd0ed91","startTime":"2026-11-25T13:30:52.974Z"}"#,
            &chat_blob,
            &cwd,
            home.path(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(chat, home.path().join(".gemini/tmp/repo/chats/session-2026-11-25T13-30-8c66f21c.jsonl"));
    assert_eq!(gemini::chat(home.path(), &chat_blob.agent_session_id), Some(chat));
}

#[test]
fn task_files_are_written_only_inside_their_folder() {
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let blob = |id: &str| BlobRef { agent_session_id: id.into(), ..Default::default() };
    for (id, files) in [
        ("ok-id", r#"{"../../../.bashrc": "x"}"#),
        ("ok-id", r#"{"1.json/../../x": "x"}"#),
        ("ok-id", r#"{".json": "x"}"#),
        ("ok-id", r#"{"1.json": 7}"#),
        ("ok-id", r#"["1.json"]"#),
        ("../escape", r#"{"1.json": "x"}"#),
    ] {
        assert!(
            claude::AGENT.restore_side_files(files.as_bytes(), &blob(id), home.path()).is_err(),
            "{id} {files}"
        );
    }
    assert!(std::fs::read_dir(home.path()).into_iter().flatten().next().is_none(), "nothing written");
    let dir = claude::AGENT
        .restore_side_files(br#"{"1.json": "{}", "12.json": "{}"}"#, &blob("ok-id"), home.path())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dir, home.path().join(".claude/tasks/ok-id"));
    assert!(dir.join("12.json").exists());
    let bundled = claude::AGENT
        .bundle_side_files(home.path(), "ok-id")
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_default();
    let back: serde_json::Value = serde_json::from_slice(&bundled).unwrap_or_default();
    assert_eq!(back["12.json"], "{}");
}

#[test]
fn project_dir_names() {
    assert_eq!(
        claude::project_dir(Path::new("/Users/esd/projects/cc-session")),
        "-Users-esd-projects-cc-session"
    );
    assert_eq!(claude::project_dir(Path::new("/a/b.c_d")), "-a-b-c-d");
}

/// Every agent in the list is whole: found by its name and kind (and on the command line),
/// its hooks install and uninstall cleanly and name events Baton handles, its outputs are
/// what its hooks may print, and what it says it can do (carry transcripts and side files,
/// write summaries) it does.
#[test]
fn every_agent_in_the_list_is_whole() {
    use clap::ValueEnum as _;

    use super::{Agent, Event, install};
    let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cwd = home.path().join("repo");
    assert_eq!(Agent::names(|_| true), ["claude", "codex", "gemini", "cursor"]);
    for &agent in Agent::ALL {
        let name = agent.name();
        assert_eq!(Agent::from_name(name), Some(agent));
        assert_eq!(Agent::from_kind(agent.kind() as i32), Some(agent), "{name}: one agent per kind");
        assert_eq!(Agent::from_str(name, false).ok(), Some(agent), "{name} on the command line");
        assert!(!agent.hooks().is_empty(), "{name}");
        for hook in agent.hooks() {
            assert!(
                Event::parse(hook.event).is_some(),
                "{name}: {} is not an event Baton handles",
                hook.event
            );
        }
        let mut doc = serde_json::json!({});
        let (added, _) = install::apply(&mut doc, agent, "baton", false, Some("hooks.on"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(added, agent.hooks().len(), "{name}");
        assert_eq!(install::installed_in(agent, &doc).len(), agent.hooks().len(), "{name}: {doc}");
        install::apply(&mut doc, agent, "baton", true, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(install::installed_in(agent, &doc).is_empty(), "{name}: {doc}");
        assert!(agent.brief_output("the \"brief\"").contains(r#"the \"brief\""#), "{name}");
        let quiet = agent.quiet_output();
        assert!(quiet.is_empty() || serde_json::from_str::<serde_json::Value>(quiet).is_ok(), "{name}");

        let blob = BlobRef { agent_session_id: format!("{name}-conv-1"), ..Default::default() };
        // Its first line names the conversation, as Gemini's chats do.
        let data = format!("{{\"sessionId\":\"{}\"}}\n", blob.agent_session_id);
        let restored = agent.restore_transcript(data.as_bytes(), &blob, &cwd, home.path());
        assert_eq!(restored.is_ok(), agent.carries_transcripts(), "{name}: {restored:?}");
        if let Ok(file) = restored {
            assert!(
                file.starts_with(home.path()) || std::env::var_os("CLAUDE_CONFIG_DIR").is_some(),
                "{name}"
            );
            assert!(
                agent.conversation_here(home.path(), &blob.agent_session_id),
                "{name}: restored, so here"
            );
        }
        let side = agent.restore_side_files(b"{}", &blob, home.path());
        assert_eq!(side.is_ok(), agent.side_files_role().is_some(), "{name}: {side:?}");
        match agent.summarizer() {
            Ok(summarizer) => {
                let args = summarizer.args("ASK", home.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(args.iter().any(|a| a == "ASK"), "{name}: {args:?}");
            }
            Err(why) => assert!(!why.is_empty(), "{name}"),
        }
    }
}
