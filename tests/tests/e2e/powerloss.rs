//! Power cuts (issue 47, in progress): the server's SQLite database on the lazyfs mount;
//! writes acknowledged through the API, then SIGKILL and everything not synced dropped, then
//! a restart on what is left: every acknowledged note is there.

use baton_tests::lazyfs::fuse::Mounted;
use baton_tests::{Backend, Server};

use crate::{put_note, write};

/// Cycles run (`BATON_POWER_CYCLES` to run more).
fn cycles() -> usize {
    std::env::var("BATON_POWER_CYCLES").ok().and_then(|n| n.parse().ok()).unwrap_or(10)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_every_acknowledged_write_through_power_cuts() {
    let mnt = tempfile::tempdir().unwrap();
    let mut mounted = match Mounted::new(mnt.path()) {
        Ok(m) => m,
        Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("powerloss: skipped: cannot mount FUSE here ({e})");
            return;
        }
        Err(e) => panic!("cannot mount FUSE: {e}"),
    };
    let url = format!("sqlite://{}/baton.db", mnt.path().display());
    let project = "github.com/power/cuts";
    let mut acked: Vec<(String, String)> = Vec::new();
    for cycle in 0..cycles() {
        let mut server =
            Server::start_on(Backend::Sqlite, &url, &[]).expect("the server starts on what is left");
        let mut c = server.clients().await;
        let request = baton_proto::v1::ListMemoryRequest {
            project: project.into(),
            category: "note".into(),
            ..Default::default()
        };
        let stored: std::collections::HashMap<String, String> =
            crate::all_memory(&mut c, request).await.into_iter().map(|e| (e.key, e.content)).collect();
        for (key, value) in &acked {
            assert_eq!(
                stored.get(key),
                Some(value),
                "cycle {cycle}: note {key} was acknowledged and is gone"
            );
        }
        for i in 0..20 {
            let (key, value) = (format!("k{cycle}-{i}"), format!("value {cycle}/{i}"));
            if put_note(&mut c, project, &key, &value, write()).await.is_ok() {
                acked.push((key, value));
            }
        }
        server.kill9();
        let fs = mounted.unmount().expect("unmount once the server is gone");
        fs.model().crash();
        mounted = Mounted::with(mnt.path(), fs).expect("remount");
    }
    mounted.unmount().unwrap();
}
