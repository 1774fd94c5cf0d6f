//! A write on SQLite touches the database and its log only. SQLite writes a savepoint's
//! journal past 64 KiB to a new file in its temporary folder, and every write has a
//! savepoint: the writer's connection keeps that journal in memory
//! (`server/src/store/sqlite/mod.rs`). The test points SQLite's temporary folder at one of
//! its own and checks that no file was made there: making one (even one removed at once)
//! changes the folder's modification time.

use std::time::{Duration, SystemTime};

use baton_tests::{Backend, Server};

use crate::{project, put_note, write};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_writes_make_no_temporary_files() {
    let mut server = Server::start(Backend::Sqlite).await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    server.env = vec![("SQLITE_TMPDIR".into(), folder.path().display().to_string())];
    server.restart().unwrap();
    let mut c = server.clients().await;
    let p = project();
    let words = "retry policy for the flaky auth tests ".repeat(20);
    // Enough notes that every table and index a note touches has pages from before the
    // next write's savepoint (only those go to its journal).
    for i in 0..300 {
        put_note(&mut c, &p, &format!("setup-{i}"), &words, write()).await.unwrap();
    }
    let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    std::fs::File::open(folder.path()).unwrap().set_modified(long_ago).unwrap();
    for i in 0..50 {
        put_note(&mut c, &p, &format!("note-{i}"), &words, write()).await.unwrap();
    }
    let modified = std::fs::metadata(folder.path()).unwrap().modified().unwrap();
    assert_eq!(modified, long_ago, "a write made a file in SQLite's temporary folder");
}
