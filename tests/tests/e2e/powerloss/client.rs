//! The client through power cuts: its home (the offline queue, the conversations' records
//! and journals, markers, the cached brief, its config) and the agents' settings files
//! `init` writes, all on the mount. Each cycle runs the client as a user and the hooks would:
//! a warmup with the hub up (the brief cached), then with it down `init` and `init
//! --uninstall` over the user's own settings, hooks of a conversation, notes added, then
//! `baton sync` with the hub up, and cuts the power at a random moment. In some cycles the
//! hub is not down but takes connections and never answers, or is deaf (it gets the writes,
//! its answers are lost): the cut then finds the conversation's start waiting, in flight.
//! A conversation spans two cycles, the second resuming it. After every cut: the client
//! starts; every file Baton wrote is whole; the user's own settings are intact (`--uninstall`
//! keeps them); and, once synced, nothing is left queued or refused (a conversation whose
//! start was lost would have its later writes refused), every note the client said it queued
//! is on the hub, written exactly once, and no note twice.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_proto::v1::{EventKind, event};
use baton_tests::lazyfs::fuse::LazyFs;
use baton_tests::{Backend, ClientEnv, Server, git_repo};
use serde_json::json;

const PROJECT: &str = "github.com/power/client";
/// The user's own Claude Code settings, there before Baton.
const USER_SETTINGS: &str = r#"{"model": "opus", "permissions": {"allow": ["Bash(ls)"]}}"#;

/// What a cycle's commands were told; the one running now (to stop it with the power).
#[derive(Default)]
struct Said {
    /// Note key → content, for every `memory add` that said it queued the note.
    queued: Mutex<HashMap<String, String>>,
    running: AtomicU32,
    stop: AtomicBool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_power_cycles() {
    let mnt = tempfile::tempdir().unwrap();
    let Some(mut mounted) = super::mount(mnt.path(), LazyFs::default()) else { return };
    let hub = Server::start(Backend::Sqlite).await.unwrap();
    let repo = git_repo(&format!("https://{PROJECT}.git"));
    let home = tempfile::tempdir_in(mnt.path()).unwrap();
    std::fs::create_dir(home.path().join(".claude")).unwrap();
    let settings = home.path().join(".claude/settings.json");
    std::fs::write(&settings, USER_SETTINGS).unwrap();
    for synced in [settings.as_path(), &home.path().join(".claude"), home.path(), mnt.path()] {
        std::fs::File::open(synced).unwrap().sync_all().unwrap();
    }
    let (black_hole, deaf) = (black_hole(), deaf(&hub.url()));
    // Writes the cuts left queued or in flight, all told.
    let mut carried = 0;
    let said = Arc::new(Said::default());
    let cycles = super::cycles();
    for cycle in 0..cycles {
        // Down (connections refused), or a black hole or deaf: then a hook waits for its
        // budget and the cut finds it in flight (a conversation's start, its first cycle).
        let (down, cut_within) = match cycle % 4 {
            1 => (deaf.clone(), 4000),
            3 => (black_hole.clone(), 4000),
            _ => (DOWN.to_owned(), 1500),
        };
        let driver = {
            let (said, dir, hub_url) = (said.clone(), repo.path().to_owned(), hub.url());
            let home = home.path().to_owned();
            std::thread::spawn(move || run_cycle(cycle, &home, &dir, [&down, &hub_url], &said))
        };
        tokio::time::sleep(Duration::from_millis(50 + super::below(cut_within))).await;
        said.stop.store(true, Ordering::SeqCst);
        let pid = said.running.load(Ordering::SeqCst);
        if pid != 0 {
            let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        driver.join().unwrap();
        said.stop.store(false, Ordering::SeqCst);
        mounted = mounted.cut_power().expect("the power cut");

        check_files(cycle, home.path(), &settings);
        carried += queue_files(home.path(), "pending").len();
        let status = command(&hub.url(), home.path(), repo.path(), &["status"]).output().unwrap();
        assert!(status.status.success(), "cycle {cycle}: the client does not start: {status:?}");
        let sync = command(&hub.url(), home.path(), repo.path(), &["sync"]).output().unwrap();
        assert!(sync.status.success(), "cycle {cycle}: sync failed: {sync:?}");
        for (folder, what) in [("pending", "left queued"), ("dead", "refused by the hub")] {
            let left = queue_files(home.path(), folder);
            assert!(left.is_empty(), "cycle {cycle}: after the sync, writes {what}: {left:?}");
        }
        let queued = said.queued.lock().unwrap().clone();
        check_hub(cycle, &hub, &queued).await;
        super::progress("client", cycle + 1);
    }
    assert!(said.queued.lock().unwrap().len() > cycles, "too few notes queued in {cycles} cycles");
    assert!(carried > cycles, "too few writes queued or in flight at the cuts: {carried} in {cycles} cycles");
    drop(home);
    mounted.unmount().unwrap();
}

/// A hub that cannot be reached: nothing listens there.
const DOWN: &str = "http://127.0.0.1:1";

/// The URL of a hub that takes connections and never answers (each is held until its client
/// closes it).
fn black_hole() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            std::thread::spawn(move || std::io::copy(&mut conn, &mut std::io::sink()));
        }
    });
    url
}

/// The URL of a hub that gets what clients send to `hub` and whose answers are lost.
fn deaf(hub: &str) -> String {
    let to = hub.trim_start_matches("http://").to_owned();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let Ok(mut upstream) = std::net::TcpStream::connect(&to) else { continue };
            let Ok(mut answers) = upstream.try_clone() else { continue };
            std::thread::spawn(move || std::io::copy(&mut answers, &mut std::io::sink()));
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut conn, &mut upstream);
                upstream.shutdown(std::net::Shutdown::Both)
            });
        }
    });
    url
}

/// The entries in the client's queue `folder` ("pending" or "dead"), none when it has none.
fn queue_files(home: &Path, folder: &str) -> Vec<String> {
    match std::fs::read_dir(home.join(".baton/data/queue").join(folder)) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| !name.ends_with(".baton-tmp"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("the queue's {folder} folder: {e}"),
    }
}

/// `baton args…` with `home` as its home, talking to `hub`.
fn command(hub: &str, home: &Path, dir: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = ClientEnv::command_at(home, hub, dir, args);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// One cycle's commands, until told to stop: what a user and an agent's hooks do with the hub
/// `down`, then a sync with it `up`.
fn run_cycle(cycle: usize, home: &Path, dir: &Path, [down, up]: [&str; 2], said: &Said) {
    // Cycles 1 and 2 are one conversation, 3 and 4 the next: the second resumes it.
    let conversation = format!("0c1e0000-0000-4000-8000-{:012}", cycle.div_ceil(2));
    let source = if cycle.is_multiple_of(2) { "resume" } else { "startup" };
    let hook = |event: &str, extra: serde_json::Value| {
        let mut v = json!({"session_id": conversation, "cwd": dir, "hook_event_name": event});
        if let (Some(obj), serde_json::Value::Object(more)) = (v.as_object_mut(), extra) {
            obj.extend(more);
        }
        v.to_string()
    };
    let call =
        json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a"}});
    // (arguments, stdin, with the hub up)
    let mut steps: Vec<(Vec<String>, String, bool)> = vec![
        // The brief cached while the hub is up, for the SessionStart without it.
        (vec!["warmup".into()], String::new(), true),
        (vec!["init".into(), "claude".into()], String::new(), false),
        (vec!["init".into(), "codex".into(), "--trust".into()], String::new(), false),
        (vec!["init".into(), "gemini".into()], String::new(), false),
        (
            vec!["hook".into(), "claude".into(), "SessionStart".into()],
            hook("SessionStart", json!({"source": source})),
            false,
        ),
    ];
    for i in 0..6 {
        steps.push((
            vec!["hook".into(), "claude".into(), "PostToolUse".into()],
            hook("PostToolUse", call.clone()),
            false,
        ));
        steps.push((
            ["memory", "add", "note", &format!("note {cycle}/{i}"), "--key", &format!("k{cycle}-{i}")]
                .map(String::from)
                .to_vec(),
            String::new(),
            false,
        ));
    }
    steps.push((vec!["hook".into(), "claude".into(), "Stop".into()], hook("Stop", json!({})), false));
    if cycle.is_multiple_of(3) {
        steps.push((vec!["init".into(), "claude".into(), "--uninstall".into()], String::new(), false));
    }
    steps.push((vec!["sync".into()], String::new(), true));
    for (args, stdin, online) in steps {
        if said.stop.load(Ordering::SeqCst) {
            return;
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let hub = if online { up } else { down };
        let Ok(mut child) = command(hub, home, dir, &args).spawn() else { return };
        said.running.store(child.id(), Ordering::SeqCst);
        if let Some(mut input) = child.stdin.take() {
            let _ = std::io::Write::write_all(&mut input, stdin.as_bytes());
        }
        let Ok(out) = child.wait_with_output() else { return };
        said.running.store(0, Ordering::SeqCst);
        let stdout = String::from_utf8_lossy(&out.stdout);
        if out.status.success() && args.starts_with(&["memory", "add"]) && stdout.contains("queued") {
            said.queued.lock().unwrap().insert(args[5].to_owned(), args[3].to_owned());
        }
    }
}

/// Every file Baton writes is whole after the cut, and the user's settings are theirs.
fn check_files(cycle: usize, home: &Path, settings: &Path) {
    let mut stack = vec![home.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path: PathBuf = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.to_string_lossy();
            // A temporary file whose name another process's folder sync kept is never read;
            // caches (briefs, reservation views, remotes) are written unsynced, and their
            // readers take what they cannot parse as no cache (the status and sync below run
            // over them).
            let cache = ["briefs", "reservations", "remotes"].iter().any(|c| dir.ends_with(c));
            if name.ends_with(".baton-tmp") || cache {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if name.ends_with(".json") && !name.ends_with(".baton-backup") {
                assert!(
                    serde_json::from_str::<serde_json::Value>(&text).is_ok(),
                    "cycle {cycle}: {name} is not whole JSON: {text:?}"
                );
            } else if name.ends_with(".toml") {
                assert!(
                    text.parse::<toml::Table>().is_ok(),
                    "cycle {cycle}: {name} is not whole TOML: {text:?}"
                );
            }
        }
    }
    let user: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(settings).unwrap()).unwrap();
    assert_eq!(user["model"], "opus", "cycle {cycle}: the user's settings lost: {user}");
    // `--uninstall` leaves the user's own file (a backup that came back empty would have
    // said Baton made it).
    let out = command(DOWN, home, home, &["init", "claude", "--uninstall"]).output().unwrap();
    assert!(out.status.success(), "cycle {cycle}: {out:?}");
    let user: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(settings).unwrap()).unwrap();
    assert_eq!(user["model"], "opus", "cycle {cycle}: --uninstall after the cut took the user's settings");
}

/// Every note the client said it queued is on the hub, written once.
async fn check_hub(cycle: usize, hub: &Server, queued: &HashMap<String, String>) {
    let mut c = hub.clients().await;
    let events = crate::all_events(&mut c, PROJECT).await;
    crate::assert_gapless(&events);
    let mut writes: HashMap<&str, Vec<&str>> = HashMap::new();
    for e in events.iter().filter(|e| e.kind == EventKind::MemoryChanged as i32) {
        if let Some(event::Value::Memory(m)) = &e.value
            && let Some(entry) = m.entries.first()
        {
            writes.entry(m.key.as_str()).or_default().push(entry.content.as_str());
        }
    }
    for (key, content) in queued {
        assert_eq!(
            writes.get(key.as_str()),
            Some(&vec![content.as_str()]),
            "cycle {cycle}: note {key} was said queued: it must be on the hub, written once"
        );
    }
    // Sent from the journal of a process the cut stopped, or again after an answer the cut
    // lost: still once.
    for (key, contents) in &writes {
        assert_eq!(contents.len(), 1, "cycle {cycle}: note {key} written more than once: {contents:?}");
    }
}
