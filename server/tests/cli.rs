//! The binary's command line (the end-to-end behaviour is tested in the `tests` crate).

use std::process::Command;

fn server() -> Command {
    Command::new(env!("CARGO_BIN_EXE_baton-server"))
}

#[test]
fn help_lists_the_flags() {
    let out = server().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["--listen", "--database-url", "--log-level", "BATON_DATABASE_URL", "--idle-after"] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn refuses_an_open_non_loopback_listen() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("b.db").display());
    let out = server().args(["--listen", "0.0.0.0:0", "--database-url", &url]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to listen on 0.0.0.0:") && err.contains("--allow-open-network"), "{err}");
}

#[test]
fn rejects_an_unknown_database_url() {
    let out = server().args(["--listen", "127.0.0.1:0", "--database-url", "mysql://x/y"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sqlite://PATH or postgres://"), "{err}");
}
