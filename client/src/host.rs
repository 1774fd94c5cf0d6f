//! What the client asks of the machine it runs on: the commands on PATH and the processes
//! above this one. A hook records its agent's process among them, and
//! `baton mcp` (started by the same agent process) finds its conversation by its parent.

/// How many levels up a hook looks: the agent may run it through a shell or two.
const LEVELS: usize = 4;

/// This process's ancestors, nearest first (init excluded).
pub fn pids() -> Vec<u32> {
    let mut out = Vec::new();
    #[cfg(unix)]
    {
        let mut pid = std::os::unix::process::parent_id();
        while pid > 1 && out.len() < LEVELS {
            out.push(pid);
            match parent_of(pid) {
                Some(parent) => pid = parent,
                None => break,
            }
        }
    }
    out
}

/// The parent of `pid` from `/proc` (Linux); elsewhere only the direct parent is known.
#[cfg(target_os = "linux")]
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: comm may hold spaces and parentheses, so from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(all(unix, not(target_os = "linux")))]
fn parent_of(_pid: u32) -> Option<u32> {
    None
}

/// Whether an executable `command` is on PATH.
pub fn on_path(command: &str) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(command)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn starts_with_the_parent() {
        let pids = super::pids();
        #[cfg(unix)]
        assert_eq!(pids.first().copied(), Some(std::os::unix::process::parent_id()));
        assert!(pids.len() <= super::LEVELS);
    }
}
