//! The web view in a real browser: `tests/web` (pytest + a pinned Playwright for Python)
//! drives Debian's Chromium at /usr/bin/chromium against the real server, the whole suite on
//! SQLite and its live, scope, revocation and security cases on a throwaway Postgres too.
//! Playwright never downloads a browser here. Screenshots of each page land in
//! `target/web-screenshots/`. axe-core (pinned, from the npm registry, checked against its
//! sha256) audits each page's accessibility.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a test: a failure is a panic with its message")]
use std::path::{Path, PathBuf};
use std::process::Command;

use baton_tests::python::{environment, run, target_dir};
use sha2::{Digest, Sha256};

const CHROMIUM: &str = "/usr/bin/chromium";
const AXE_VERSION: &str = "4.14.1";
const AXE_SHA256: &str = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// axe-core's `axe.min.js`, fetched once from the npm registry into `target/` and checked.
fn axe() -> PathBuf {
    let dir = target_dir().join(format!("axe-core-{AXE_VERSION}"));
    let file = dir.join("package/axe.min.js");
    let good = |f: &Path| std::fs::read(f).is_ok_and(|b| hex::encode(Sha256::digest(b)) == AXE_SHA256);
    if !good(&file) {
        std::fs::create_dir_all(&dir).unwrap();
        run(
            Command::new("npm")
                .args(["pack", "--silent", &format!("axe-core@{AXE_VERSION}")])
                .current_dir(&dir),
            "fetching axe-core from the npm registry",
        )
        .unwrap();
        let tarball = dir.join(format!("axe-core-{AXE_VERSION}.tgz"));
        run(Command::new("tar").arg("-xzf").arg(&tarball).arg("-C").arg(&dir), "unpacking axe-core").unwrap();
        assert!(good(&file), "axe-core {AXE_VERSION}'s axe.min.js does not have the pinned sha256");
    }
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_view_in_a_real_browser() {
    if !Path::new(CHROMIUM).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{CHROMIUM} is missing: .ci/run installs it (apt-get install chromium)"
        );
        eprintln!("skipped: {CHROMIUM} is missing (apt-get install chromium)");
        return;
    }
    let suite = root().join("tests/web");
    let python = environment("web-venv", &suite.join("requirements.txt")).unwrap();
    let version =
        |cmd: &mut Command| String::from_utf8_lossy(&cmd.output().unwrap().stdout).trim().to_owned();
    println!("{}", version(Command::new(CHROMIUM).arg("--version")));
    println!(
        "playwright {}",
        version(
            Command::new(&python)
                .args(["-c", "from playwright._repo_version import version; print(version)"])
        )
    );
    let postgres = baton_tests::postgres::fresh_database().await.unwrap();
    let shots = target_dir().join("web-screenshots");
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "--basetemp"])
        .arg(work.path().join("pytest"))
        .arg(&suite)
        .current_dir(&suite)
        .env("BATON_SERVER_BIN", baton_tests::binary("baton-server"))
        .env("BATON_BIN", baton_tests::binary("baton"))
        .env("BATON_PLANT", baton_tests::binary("baton-plant"))
        .env("BATON_TEST_POSTGRES_URL", &postgres)
        .env("BATON_WEB_SCREENSHOTS", &shots)
        .env("BATON_AXE_JS", axe())
        .env("BATON_CHROMIUM", CHROMIUM)
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser suite failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{stdout}");
}
