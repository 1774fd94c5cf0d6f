//! Power cuts (issue 47): the server's database (SQLite's files, Postgres's cluster) and the
//! client's folders on lazyfs, the test file system that forgets what was not synced. A cycle
//! writes through the real binaries, then cuts the power — every process using the mount
//! killed at once and everything not synced dropped — and starts again on what is left.
//! `BATON_POWER_CYCLES` sets the number of cycles (default 100 per backend).

mod client;
mod server;

use std::path::Path;

use baton_tests::lazyfs::fuse::{LazyFs, Mounted};

/// Cycles per run.
fn cycles() -> usize {
    std::env::var("BATON_POWER_CYCLES").ok().and_then(|n| n.parse().ok()).unwrap_or(100)
}

/// Says every hundredth cycle passed (a long run by hand shows how far it got).
fn progress(what: &str, cycle: usize) {
    if cycle > 0 && cycle.is_multiple_of(100) {
        eprintln!("powerloss: {what}: {cycle} cycles passed");
    }
}

/// A pseudo-random number below `n`, different every call.
fn below(n: u64) -> u64 {
    u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap_or_default()) % n
}

/// `fs` mounted at `dir`, or (outside CI, where FUSE cannot mount) `None` after saying why.
fn mount(dir: &Path, fs: LazyFs) -> Option<Mounted> {
    match Mounted::with(dir, fs) {
        Ok(m) => Some(m),
        Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("powerloss: skipped: cannot mount FUSE here ({e}); CI=true requires it");
            None
        }
        Err(e) => panic!("cannot mount FUSE: {e} (needs /dev/fuse and root)"),
    }
}
