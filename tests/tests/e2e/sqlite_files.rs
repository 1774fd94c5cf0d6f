//! The files a write on SQLite touches (`server/src/store/sqlite/mod.rs`): the database and
//! its write-ahead log only, and the log is copied into the database every 10,000 pages.
//!
//! SQLite writes a savepoint's journal past 64 KiB to a new file in its temporary folder,
//! and every write has a savepoint: the writer's connection keeps that journal in memory.
//! The first test points SQLite's temporary folder at one of its own and checks that no file
//! was made there: making one (even one removed at once) changes the folder's modification
//! time.

use std::time::{Duration, SystemTime};

use baton_tests::{Backend, Clients, Server};

use crate::{project, put_note, write};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_writes_make_no_temporary_files() {
    let mut server = Server::start(Backend::Sqlite).await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    server.env = vec![("SQLITE_TMPDIR".into(), folder.path().display().to_string())];
    server.restart().unwrap();
    let mut c = server.clients().await;
    let p = project();
    // Enough notes that every table and index a note touches has pages from before the
    // next write's savepoint (only those go to its journal).
    notes(&mut c, &p, "setup", 300).await;
    let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    std::fs::File::open(folder.path()).unwrap().set_modified(long_ago).unwrap();
    notes(&mut c, &p, "note", 50).await;
    let modified = std::fs::metadata(folder.path()).unwrap().modified().unwrap();
    assert_eq!(modified, long_ago, "a write made a file in SQLite's temporary folder");
}

/// At SQLite's default the log is copied into the database once it holds 1,000 pages (4
/// MB), and then written again from its start, so it stays about that size; Baton copies it
/// at 10,000.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_copies_its_log_every_10000_pages() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    notes(&mut c, &project(), "note", 400).await;
    let db = server.database_url.trim_start_matches("sqlite://");
    let log = std::fs::metadata(format!("{db}-wal")).unwrap().len();
    let page = 4096;
    assert!(log > 1_500 * page, "the log holds {} pages", log / page);
    assert!(log < 10_100 * page, "the log holds {} pages", log / page);
}

async fn notes(c: &mut Clients, project: &str, prefix: &str, n: usize) {
    let words = "retry policy for the flaky auth tests ".repeat(20);
    for i in 0..n {
        put_note(c, project, &format!("{prefix}-{i}"), &words, write()).await.unwrap();
    }
}

/// The database's files are private: a new data directory is 0700 and the database and its
/// log 0600; an existing database that others could read is tightened on start, and the
/// log says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_files_are_private_to_the_user() {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data").join("baton");
    let db = dir.join("baton.db");
    let url = format!("sqlite://{}", db.display());
    let mut server = Server::start_on(Backend::Sqlite, &url, &[]).unwrap();
    let mut c = server.clients().await;
    put_note(&mut c, &project(), "k", "v", write()).await.unwrap();
    let wal = dir.join("baton.db-wal");
    assert_eq!((mode(&dir), mode(&db), mode(&wal)), (0o700, 0o600, 0o600));
    assert!(!server.log().contains("tightened"), "{}", server.log());

    // An older server left them readable by everyone: tightened on the next start.
    server.signal_and_wait("TERM").unwrap();
    for file in [&db, &wal] {
        if file.exists() {
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    server.restart().unwrap();
    let _ = server.clients().await;
    assert_eq!(mode(&db), 0o600);
    assert!(server.log().contains("tightened to the owner only"), "{}", server.log());
}
