//! The client binary against no server: a clear message, a failing exit code.

use std::process::Command;

#[test]
fn status_without_a_server_says_what_to_do() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .env("BATON_HOME", home.path())
        .args(["status", "--server", "http://127.0.0.1:1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the Baton hub") && err.contains("BATON_SERVER"), "{err}");
}

#[test]
fn help_works() {
    let out = Command::new(env!("CARGO_BIN_EXE_baton")).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("status"));
}
