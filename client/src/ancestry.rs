//! The processes above this one. A hook records its agent's process among them, and
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
