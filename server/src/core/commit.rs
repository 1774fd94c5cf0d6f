//! Commit links (`CommitService`): what a valid link is, and how a recorded link meets the
//! stored ones of its commit. Pure: the service reads the stored links under the project's
//! lock, `plan` decides, the store applies.

use std::collections::HashMap;

use baton_proto::v1::{CommitMadeBy, CommitSeenBy};

use super::validate::{Invalid, invalid};

/// Links in one RecordCommits.
pub const MAX_LINKS: usize = 100;
/// Fingerprints stored for one link.
pub const MAX_LINES: usize = 5000;
/// Paths kept for one link.
pub const MAX_FILES: usize = 1000;
/// A link's prompt and task, at most (clipped by the client, refused beyond).
pub const MAX_PROMPT: usize = 4000;
pub const MAX_TASK: usize = 1000;
/// A commit's subject, at most.
pub const MAX_SUBJECT: usize = 1000;
/// What one FindCommits asks about, at most.
pub const MAX_FIND_IDS: usize = 10_000;
pub const MAX_FIND_LINES: usize = 50_000;
/// Links in one FindCommits reply, at most.
pub const MAX_FOUND: usize = 2000;

/// A commit or patch id: 40 (SHA-1) or 64 (SHA-256) hex digits, made lowercase.
pub fn object_id(field: &str, value: &str) -> Result<String, Invalid> {
    hex(field, value, &[40, 64], "a full object name: 40 or 64 hex digits")
}

/// A line fingerprint: 16 hex digits, made lowercase.
pub fn fingerprint(field: &str, value: &str) -> Result<String, Invalid> {
    hex(field, value, &[16], "16 hex digits (the CommitService comment says how to make one)")
}

fn hex(field: &str, value: &str, lengths: &[usize], what: &str) -> Result<String, Invalid> {
    if !lengths.contains(&value.len()) || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
        let shown: String = value.chars().take(70).collect();
        return Err(invalid(field, format!("{shown:?} is not {what}")));
    }
    Ok(value.to_ascii_lowercase())
}

/// A link as stored: one row per (commit, session).
#[derive(Debug, Clone, PartialEq, Eq, Default, sqlx::FromRow)]
pub struct Link {
    pub commit_id: String,
    pub session_id: String,
    pub checkpoint_id: String,
    pub patch_id: String,
    /// `CommitMadeBy` as a number.
    pub made_by: i64,
    /// `CommitSeenBy` as a number.
    pub seen_by: i64,
    /// 0 or 1.
    pub ambiguous: i64,
    pub branch: String,
    pub subject: String,
    pub committed_us: i64,
    /// A JSON array of paths.
    pub files: String,
    pub prompt: String,
    pub task: String,
    pub lines: i64,
    /// 0 or 1.
    pub lines_truncated: i64,
    pub created_us: i64,
    pub revision: i64,
    /// Encoded `Actor` of the write that stored it.
    pub author: Vec<u8>,
}

impl Link {
    pub fn by_agent(&self) -> bool {
        self.made_by == CommitMadeBy::Agent as i64
    }

    /// The paths, as stored.
    pub fn file_list(&self) -> Vec<String> {
        serde_json::from_str(&self.files).unwrap_or_default()
    }

    /// Whether two rows say the same (the write's own columns aside).
    fn same_facts(&self, other: &Self) -> bool {
        let strip = |l: &Self| Self { created_us: 0, revision: 0, author: Vec::new(), ..l.clone() };
        strip(self) == strip(other)
    }
}

/// A link a caller records, with the fingerprints of the lines its commit added.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub link: Link,
    pub fingerprints: Vec<String>,
}

/// What a RecordCommits does.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Rows to write, new or changed, with the fingerprints to add for each (those of a
    /// link that had none).
    pub put: Vec<(Link, Vec<String>)>,
    /// Links to drop (commit, session), with their fingerprints: a person's ambiguous
    /// links of a commit an agent's call is now known to have made.
    pub remove: Vec<(String, String)>,
    /// Each recorded link as it stands after the write, in the request's order.
    pub result: Vec<Link>,
}

/// Meets each recorded link with the stored links of its commit: a new one is added; a
/// stored one gains what it lacked (a checkpoint, a patch id, a branch, files, prompt, task,
/// fingerprints) and becomes the agent's when an agent's call made it, which also drops
/// the other sessions' ambiguous links of that commit (and keeps out those recorded after).
/// A link that would change nothing is left alone.
pub fn plan(stored: &[Link], recorded: Vec<Recorded>) -> Plan {
    let mut now: HashMap<(String, String), Link> =
        stored.iter().map(|l| ((l.commit_id.clone(), l.session_id.clone()), l.clone())).collect();
    let mut fresh_lines: HashMap<(String, String), Vec<String>> = HashMap::new();
    let mut changed: Vec<(String, String)> = Vec::new();
    let mut removed: Vec<(String, String)> = Vec::new();
    let mut order = Vec::new();
    for Recorded { link, fingerprints } in recorded {
        let key = (link.commit_id.clone(), link.session_id.clone());
        let claimed = now.iter().any(|(k, l)| k.0 == key.0 && k.1 != key.1 && l.by_agent());
        if claimed && link.ambiguous == 1 && !link.by_agent() && !now.contains_key(&key) {
            // Another session's call made it: this one was only live beside it.
            continue;
        }
        order.push(key.clone());
        let merged = match now.get(&key) {
            None => {
                fresh_lines.insert(key.clone(), fingerprints);
                link
            }
            Some(old) => {
                let mut m = old.clone();
                fill(&mut m.checkpoint_id, &link.checkpoint_id);
                fill(&mut m.patch_id, &link.patch_id);
                fill(&mut m.branch, &link.branch);
                fill(&mut m.subject, &link.subject);
                fill(&mut m.prompt, &link.prompt);
                fill(&mut m.task, &link.task);
                if m.file_list().is_empty() {
                    m.files.clone_from(&link.files);
                }
                if m.committed_us == 0 {
                    m.committed_us = link.committed_us;
                }
                if m.lines == 0 && link.lines > 0 {
                    m.lines = link.lines;
                    m.lines_truncated = link.lines_truncated;
                    fresh_lines.insert(key.clone(), fingerprints);
                }
                if link.by_agent() && !m.by_agent() {
                    m.made_by = link.made_by;
                    m.seen_by = link.seen_by;
                    m.ambiguous = 0;
                }
                if m.same_facts(old) {
                    // Unchanged: in the reply as stored (`order` holds it), not written.
                    continue;
                }
                m
            }
        };
        let by_agent = merged.by_agent();
        now.insert(key.clone(), merged);
        if !changed.contains(&key) {
            changed.push(key.clone());
        }
        if by_agent {
            // The agent's call made it: the sessions that were only live beside it did not.
            let others: Vec<(String, String)> = now
                .iter()
                .filter(|(k, l)| k.0 == key.0 && k.1 != key.1 && l.ambiguous == 1 && !l.by_agent())
                .map(|(k, _)| k.clone())
                .collect();
            for other in others {
                now.remove(&other);
                changed.retain(|k| *k != other);
                fresh_lines.remove(&other);
                if stored.iter().any(|l| l.commit_id == other.0 && l.session_id == other.1) {
                    removed.push(other);
                }
            }
        }
    }
    let put = changed
        .iter()
        .filter_map(|k| now.get(k).map(|l| (l.clone(), fresh_lines.remove(k).unwrap_or_default())))
        .collect();
    let result = order.iter().filter_map(|k| now.get(k).cloned()).collect();
    removed.sort();
    removed.dedup();
    Plan { put, remove: removed, result }
}

fn fill(stored: &mut String, new: &str) {
    if stored.is_empty() && !new.is_empty() {
        new.clone_into(stored);
    }
}

/// Whether a seen-by value is one a client may send.
pub fn seen_by(value: i32) -> bool {
    CommitSeenBy::try_from(value).is_ok_and(|s| s != CommitSeenBy::Unspecified)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(commit: &str, session: &str, made_by: CommitMadeBy, ambiguous: bool) -> Link {
        Link {
            commit_id: commit.repeat(40),
            session_id: session.to_owned(),
            made_by: made_by as i64,
            seen_by: CommitSeenBy::BetweenHooks as i64,
            ambiguous: i64::from(ambiguous),
            files: "[]".into(),
            ..Link::default()
        }
    }

    fn rec(link: Link, lines: &[&str]) -> Recorded {
        let mut link = link;
        link.lines = i64::try_from(lines.len()).unwrap_or_default();
        Recorded { link, fingerprints: lines.iter().map(|s| (*s).to_owned()).collect() }
    }

    #[test]
    fn ids_are_full_hex_names_made_lowercase() {
        assert_eq!(object_id("c", &"AB".repeat(20)).ok(), Some("ab".repeat(20)));
        assert!(object_id("c", &"a".repeat(64)).is_ok());
        assert!(object_id("c", "abc123").is_err());
        assert!(object_id("c", &"g".repeat(40)).is_err());
        assert!(fingerprint("f", "0123456789abcdef").is_ok());
        assert!(fingerprint("f", "0123456789abcde").is_err());
    }

    #[test]
    fn a_new_link_is_put_with_its_lines() {
        let p = plan(&[], vec![rec(link("a", "s1", CommitMadeBy::Agent, false), &["f1", "f2"])]);
        assert_eq!(p.put.len(), 1);
        assert_eq!(p.put[0].1, vec!["f1", "f2"]);
        assert!(p.remove.is_empty());
        assert_eq!(p.result.len(), 1);
    }

    #[test]
    fn the_same_link_again_changes_nothing() {
        let stored = link("a", "s1", CommitMadeBy::Agent, false);
        let p =
            plan(std::slice::from_ref(&stored), vec![rec(link("a", "s1", CommitMadeBy::Person, false), &[])]);
        assert!(p.put.is_empty() && p.remove.is_empty());
        assert_eq!(p.result, vec![stored]);
    }

    #[test]
    fn a_stored_link_gains_what_it_lacked_and_the_agents_claim() {
        let stored = link("a", "s1", CommitMadeBy::Person, true);
        let mut again = link("a", "s1", CommitMadeBy::Agent, false);
        again.checkpoint_id = "cp".into();
        again.seen_by = CommitSeenBy::ToolCall as i64;
        let p = plan(&[stored], vec![rec(again, &["f1"])]);
        let (put, lines) = &p.put[0];
        assert!(put.by_agent() && put.ambiguous == 0);
        assert_eq!(put.checkpoint_id, "cp");
        assert_eq!(put.seen_by, CommitSeenBy::ToolCall as i64);
        assert_eq!(lines, &vec!["f1".to_owned()]);
    }

    #[test]
    fn an_agents_claim_drops_the_other_sessions_ambiguous_links() {
        let stored =
            [link("a", "s1", CommitMadeBy::Person, true), link("a", "s2", CommitMadeBy::Person, true)];
        let p = plan(&stored, vec![rec(link("a", "s1", CommitMadeBy::Agent, false), &[])]);
        assert_eq!(p.remove, vec![("a".repeat(40), "s2".to_owned())]);
        assert_eq!(p.put.len(), 1);
        // A person's link that is not ambiguous (the only live session) stays.
        let stored = [link("b", "s1", CommitMadeBy::Person, false)];
        let p = plan(&stored, vec![rec(link("b", "s2", CommitMadeBy::Agent, false), &[])]);
        assert!(p.remove.is_empty());
    }

    #[test]
    fn an_ambiguous_link_after_the_agents_claim_is_kept_out() {
        let stored = [link("a", "s1", CommitMadeBy::Agent, false)];
        let p = plan(&stored, vec![rec(link("a", "s2", CommitMadeBy::Person, true), &["x"])]);
        assert!(p.put.is_empty() && p.result.is_empty());
    }

    #[test]
    fn an_ambiguous_link_recorded_after_the_agents_claim_in_one_request_is_dropped() {
        let p = plan(
            &[],
            vec![
                rec(link("a", "s2", CommitMadeBy::Person, true), &["x"]),
                rec(link("a", "s1", CommitMadeBy::Agent, false), &["x"]),
            ],
        );
        assert_eq!(p.put.len(), 1);
        assert_eq!(p.put[0].0.session_id, "s1");
        assert!(p.remove.is_empty(), "nothing stored to remove");
        assert_eq!(p.result.len(), 1);
    }
}
