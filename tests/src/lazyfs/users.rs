//! The processes using a mount (their working directory, root or an open file is on it, or
//! their environment names it), and
//! ending them: a power cut stops every program at once, and the mount cannot go while one
//! holds it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The ids of the other processes whose working directory, root or an open file is under
/// `dir`, or whose environment names it.
pub fn using(dir: &Path) -> Vec<u32> {
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else { return Vec::new() };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me && uses(*pid, dir))
        .collect()
}

fn uses(pid: u32, dir: &Path) -> bool {
    let base = PathBuf::from(format!("/proc/{pid}"));
    let under = |link: PathBuf| std::fs::read_link(link).is_ok_and(|p| p.starts_with(dir));
    if under(base.join("cwd")) || under(base.join("root")) {
        return true;
    }
    // A program whose environment names the mount (its HOME there) may open a file on it at
    // any moment, between this look and the unmount: it goes too.
    let named = dir.as_os_str().as_encoded_bytes();
    if std::fs::read(base.join("environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var.windows(named.len()).any(|w| w == named)))
    {
        return true;
    }
    std::fs::read_dir(base.join("fd")).is_ok_and(|fds| fds.flatten().any(|fd| under(fd.path())))
}

/// SIGKILLs every process using `dir` until none is left (a child that was killed becomes a
/// zombie, which holds nothing). Fails when some still do after 30 s.
pub fn kill_all(dir: &Path) -> std::io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pids = using(dir);
        if pids.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(std::io::Error::other(format!("processes {pids:?} still use {}", dir.display())));
        }
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .args(pids.iter().map(u32::to_string))
            .stderr(std::process::Stdio::null())
            .status();
        // A process on its way out may already hide its files while it still holds them.
        while pids.iter().any(|pid| !ended(*pid)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Whether a process is gone or a zombie (which holds nothing).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}
