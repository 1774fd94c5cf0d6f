//! The Python the cross-language test runs: a virtual environment of its own under
//! `target/`, made once (test binaries running in parallel wait on a file lock) with the
//! pinned packages of `tests/python/requirements.txt`, so `cargo test` needs nothing
//! installed by hand beyond Python itself. `BATON_TEST_PYTHON` names another interpreter
//! (which must have those packages).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use sha2::{Digest, Sha256};

/// The workspace's `target/` directory (the test executable is in target/<profile>/deps).
pub fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    exe.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "target"))
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"), Path::to_path_buf)
}

pub fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let out = command.output().with_context(|| format!("{what}: cannot start {command:?}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The interpreter with the test's packages, making the environment if needed.
pub fn python() -> anyhow::Result<PathBuf> {
    if let Some(python) = std::env::var_os("BATON_TEST_PYTHON") {
        return Ok(PathBuf::from(python));
    }
    environment("python-venv", &Path::new(env!("CARGO_MANIFEST_DIR")).join("python/requirements.txt"))
}

/// The interpreter of the environment `target/<name>`, with the pinned packages of
/// `requirements`, made (or made again, when the file changed) if needed.
pub fn environment(name: &str, requirements: &Path) -> anyhow::Result<PathBuf> {
    let pinned =
        std::fs::read(requirements).with_context(|| format!("reading {}", requirements.display()))?;
    let target = target_dir();
    std::fs::create_dir_all(&target)?;
    let venv = target.join(name);
    let python = venv.join("bin/python");
    // A new requirements file makes a new environment.
    let ready = venv.join(format!(".baton-ready-{}", &hex::encode(Sha256::digest(&pinned))[..16]));
    let lock = std::fs::File::create(target.join(format!("{name}.lock")))?;
    lock.lock()?;
    if ready.exists() && python.exists() {
        return Ok(python);
    }
    let _ = std::fs::remove_dir_all(&venv);
    let system = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
    run(
        Command::new(&system).args(["-m", "venv"]).arg(&venv),
        "making the test's Python environment (python3 -m venv; on Debian: apt-get install python3-venv)",
    )?;
    run(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(requirements),
        "installing the test's Python packages",
    )?;
    std::fs::write(&ready, b"")?;
    Ok(python)
}
