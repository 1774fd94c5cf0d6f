//! What of a record is searchable, as one text per record (its "body"): a memory entry's
//! key, content and rationale (evicted entries too); a checkpoint's state — goal and
//! summary, tasks with their status, decisions with their rationale, open questions,
//! blockers, errors, files, the last prompt and answer; a session's goal and summary.
//! The body is what a hit's snippet is cut from; its words are what the engines index.

use baton_proto::v1::CheckpointState;

use super::tokens;

/// A body is cut to this many bytes (at a character boundary) before it is indexed.
pub const MAX_BODY_BYTES: usize = 128 * 1024;

/// What kind of record a search document is (its number is stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    Memory = 1,
    Checkpoint = 2,
    Session = 3,
}

impl Kind {
    pub fn from_i64(n: i64) -> Option<Self> {
        match n {
            1 => Some(Self::Memory),
            2 => Some(Self::Checkpoint),
            3 => Some(Self::Session),
            _ => None,
        }
    }
}

/// A memory entry's body.
pub fn memory(key: &str, content: &str, rationale: &str) -> String {
    lines([key, content, rationale].into_iter())
}

/// A session's body.
pub fn session(goal: &str, summary: &str) -> String {
    lines([goal, summary].into_iter())
}

/// A checkpoint's body, from its state.
pub fn checkpoint(state: &CheckpointState) -> String {
    let mut parts: Vec<String> = vec![state.goal.clone(), state.summary.clone()];
    parts.extend(state.active_tasks.iter().map(|t| format!("{} ({})", t.content, t.status)));
    for d in &state.decisions {
        parts.push(d.decision.clone());
        parts.push(d.rationale.clone());
    }
    for list in [&state.open_questions, &state.blockers, &state.errors] {
        parts.extend(list.iter().cloned());
    }
    for (label, files) in [
        ("created", &state.files_created),
        ("modified", &state.files_modified),
        ("deleted", &state.files_deleted),
    ] {
        parts.extend(files.iter().map(|f| format!("{label} {f}")));
    }
    parts.push(state.last_prompt.clone());
    parts.push(state.last_answer.clone());
    lines(parts.iter().map(String::as_str))
}

/// The non-empty parts, one per line, cut to `MAX_BODY_BYTES`.
fn lines<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for part in parts.map(str::trim).filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(part);
        if out.len() >= MAX_BODY_BYTES {
            break;
        }
    }
    if out.len() > MAX_BODY_BYTES {
        let mut end = MAX_BODY_BYTES;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

/// A body's indexed words.
pub fn words(body: &str) -> Vec<String> {
    tokens::doc_words(body)
}

#[cfg(test)]
mod tests {
    use baton_proto::v1::{Decision, Task};

    use super::*;

    #[test]
    fn a_checkpoint_body_holds_its_state() {
        let state = CheckpointState {
            goal: "ship search".into(),
            active_tasks: vec![Task {
                content: "write the parser".into(),
                status: "in_progress".into(),
                ..Default::default()
            }],
            decisions: vec![Decision {
                decision: "FTS5 on SQLite".into(),
                rationale: "bundled".into(),
                ..Default::default()
            }],
            files_modified: vec!["server/src/auth.rs".into()],
            errors: vec!["migration 12 failed".into()],
            last_prompt: "add search".into(),
            ..Default::default()
        };
        let body = checkpoint(&state);
        for part in [
            "ship search",
            "write the parser (in_progress)",
            "FTS5 on SQLite",
            "bundled",
            "modified server/src/auth.rs",
            "migration 12 failed",
            "add search",
        ] {
            assert!(body.contains(part), "{part} in {body}");
        }
    }

    #[test]
    fn bodies_are_cut_at_a_character_boundary() {
        let body = memory("", &"é".repeat(MAX_BODY_BYTES), "");
        assert!(body.len() <= MAX_BODY_BYTES && body.chars().all(|c| c == 'é'));
    }
}
