//! The Python package (`client/python`, `baton-client`): built as a release would be (sdist
//! and wheel), the sdist checked to carry the repository's `proto/`, the wheel installed
//! into a clean virtual environment, then the package's own tests, LangGraph's conformance
//! suite and the Claude Agent SDK's among them, run from the installed wheel against the real
//! server on SQLite and on a throwaway Postgres; then the bench against the frameworks' own
//! stores, quick.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a test: a failure is a panic with its message")]
use std::path::{Path, PathBuf};
use std::process::Command;

use baton_tests::python::{environment, run};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Every file under `dir`, by its path relative to `dir`, with its bytes.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(at) = todo.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.push((path.strip_prefix(dir).unwrap().to_path_buf(), bytes));
            }
        }
    }
    out.sort();
    out
}

fn the_one(dir: &Path, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    assert_eq!(found.len(), 1, "one {suffix} in {}: {found:?}", dir.display());
    found.into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_package_builds_installs_and_passes_its_tests() {
    let root = root();
    let package = root.join("client/python");
    let python = environment("python-client-venv", &package.join("requirements-ci.txt")).unwrap();
    let work = tempfile::tempdir().unwrap();
    let dist = work.path().join("dist");

    // The sdist and the wheel, built offline with the pinned build tools.
    run(
        Command::new(&python).args(["-m", "build", "--no-isolation", "--outdir"]).arg(&dist).arg(&package),
        "building the sdist and the wheel",
    )
    .unwrap();
    let sdist = the_one(&dist, ".tar.gz");
    let wheel = the_one(&dist, ".whl");

    // The sdist carries its own copy of proto/, the same as the repository's.
    let unpacked = work.path().join("sdist");
    std::fs::create_dir_all(&unpacked).unwrap();
    run(Command::new("tar").arg("-xzf").arg(&sdist).arg("-C").arg(&unpacked), "unpacking the sdist").unwrap();
    let top = std::fs::read_dir(&unpacked).unwrap().next().unwrap().unwrap().path();
    let carried = files(&top.join("proto"));
    let ours: Vec<(PathBuf, Vec<u8>)> = files(&root.join("proto"))
        .into_iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "proto"))
        .collect();
    assert!(!ours.is_empty());
    assert_eq!(carried, ours, "the sdist's proto/ differs from the repository's");

    // A clean environment: the wheel and what it asks for, nothing else.
    let clean = work.path().join("clean");
    run(Command::new("python3").args(["-m", "venv"]).arg(&clean), "making a clean environment").unwrap();
    let clean_python = clean.join("bin/python");
    run(
        Command::new(&clean_python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
            .arg(&wheel),
        "installing the wheel into a clean environment",
    )
    .unwrap();
    run(
        Command::new(&clean_python).args([
            "-c",
            "import baton_client, baton_client.pb as pb; from baton_client import Client, AsyncClient; \
             assert pb.thread_pb2.PutThreadCheckpointRequest(key='k').key == 'k'; print(baton_client.__version__)",
        ]),
        "importing the installed package",
    )
    .unwrap();

    // The package's tests from the installed wheel (not the source tree), on both backends.
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--force-reinstall",
            ])
            .arg(&wheel),
        "installing the wheel into the test environment",
    )
    .unwrap();
    let postgres = baton_tests::postgres::fresh_database().await.unwrap();
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"])
        .arg(package.join("tests"))
        .current_dir(work.path())
        .env("BATON_SERVER_BIN", baton_tests::binary("baton-server"))
        .env("BATON_TEST_POSTGRES_URL", &postgres)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "pytest failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // LangGraph's conformance suite ran on both backends, async and sync; the Claude Agent
    // SDK's on both backends, a project or a key prefix per store.
    for (suite, runs) in
        [("langgraph-checkpoint-conformance", 4), ("claude-agent-sdk session store conformance", 4)]
    {
        let report = stdout.lines().filter(|l| l.starts_with(suite)).collect::<Vec<_>>();
        assert_eq!(report.len(), runs, "{suite}: {stdout}");
        println!("{}", report.join("\n"));
    }

    quick_bench(&python, &package, work.path());
}

/// The bench against the frameworks' own stores, quick, so that it cannot rot: its figures
/// are taken by hand (docs/performance.md), not here, on a shared machine.
fn quick_bench(python: &Path, package: &Path, work: &Path) {
    let admin = baton_tests::postgres::admin_url().unwrap();
    let out = Command::new(python)
        .arg(package.join("bench/framework_stores.py"))
        .args(["--quick", "--no-pg-stats", "--postgres-url", &admin, "--server-bin"])
        .arg(baton_tests::binary("baton-server"))
        .current_dir(work)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the bench failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Baton/PostgresSaver") && !stdout.contains("skipped:"), "{stdout}");
    println!("{stdout}");
}
