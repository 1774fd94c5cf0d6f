//! A checkpoint as the pages show it: its state by section, its payload by type and size
//! (pretty-printed when it is JSON), and how two checkpoints differ.

use baton_proto::v1::{Checkpoint, CheckpointKind, CheckpointState};

use super::render::{When, clip, size, visible};
use super::view::{actor_line, short};

/// Payload text shown at most (the rest is counted, not shown).
const MAX_PAYLOAD_SHOWN: usize = 256 * 1024;

pub fn kind_label(kind: i32) -> &'static str {
    match CheckpointKind::try_from(kind).unwrap_or_default() {
        CheckpointKind::Unspecified => "checkpoint",
        CheckpointKind::Manual => "manual",
        CheckpointKind::Auto => "auto",
        CheckpointKind::Task => "task",
        CheckpointKind::Time => "time",
        CheckpointKind::Risk => "risk",
        CheckpointKind::Recovery => "recovery",
        CheckpointKind::PreCompact => "pre-compact",
        CheckpointKind::SessionEnd => "session end",
    }
}

pub struct Payload {
    pub content_type: String,
    pub size: String,
    /// Pretty-printed JSON, or empty when the payload is not JSON.
    pub json: String,
    pub cut: bool,
}

pub struct CheckpointView {
    pub short: String,
    pub kind: &'static str,
    pub reason: String,
    pub created: When,
    pub size: String,
    pub digest: String,
    pub author: String,
    pub state: CheckpointState,
    pub payload: Option<Payload>,
}

impl CheckpointView {
    pub fn of(c: &Checkpoint) -> Self {
        let payload = (!c.payload.is_empty() || !c.payload_content_type.is_empty()).then(|| payload(c));
        Self {
            short: short(&c.id).to_owned(),
            kind: kind_label(c.kind),
            reason: clip(&c.reason, 500),
            created: When::of(c.created_at.as_ref()),
            size: size(c.size_bytes),
            digest: c.digest.clone(),
            author: actor_line(c.author.as_ref()),
            state: shown(c.state.clone().unwrap_or_default()),
            payload,
        }
    }
}

/// Items of one list a page shows at most, and characters of one item.
const MAX_ITEMS: usize = 200;
const MAX_ITEM: usize = 4096;

/// A state as a page shows it: every text clipped and made visible, every list bounded.
fn shown(mut s: CheckpointState) -> CheckpointState {
    let text = |t: &mut String| *t = clip(t, MAX_ITEM);
    let list = |l: &mut Vec<String>| {
        l.truncate(MAX_ITEMS);
        for t in l.iter_mut() {
            *t = clip(t, MAX_ITEM);
        }
    };
    for l in [
        &mut s.open_questions,
        &mut s.blockers,
        &mut s.recent_changes,
        &mut s.files_created,
        &mut s.files_modified,
        &mut s.files_deleted,
        &mut s.errors,
    ] {
        list(l);
    }
    s.active_tasks.truncate(MAX_ITEMS);
    for t in &mut s.active_tasks {
        text(&mut t.content);
        text(&mut t.status);
    }
    s.decisions.truncate(MAX_ITEMS);
    for d in &mut s.decisions {
        text(&mut d.decision);
        text(&mut d.rationale);
        text(&mut d.impact);
    }
    s.tool_history.truncate(MAX_ITEMS);
    for t in &mut s.tool_history {
        text(&mut t.name);
        text(&mut t.summary);
    }
    for t in
        [&mut s.phase, &mut s.git_head, &mut s.goal, &mut s.summary, &mut s.last_prompt, &mut s.last_answer]
    {
        text(t);
    }
    s
}

fn payload(c: &Checkpoint) -> Payload {
    let content_type = if c.payload_content_type.is_empty() {
        "unnamed type".into()
    } else {
        clip(&c.payload_content_type, 100)
    };
    let json = serde_json::from_slice::<serde_json::Value>(&c.payload)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_default();
    let cut = json.len() > MAX_PAYLOAD_SHOWN;
    let json = if cut { clip(&json, MAX_PAYLOAD_SHOWN) } else { visible(&json) };
    Payload { content_type, size: size(i64::try_from(c.payload.len()).unwrap_or(i64::MAX)), json, cut }
}

/// What changed from one list to another: items only in the first, only in the second.
pub struct Change {
    pub what: &'static str,
    pub removed: Vec<String>,
    pub added: Vec<String>,
}

fn change(what: &'static str, a: &[String], b: &[String]) -> Change {
    Change {
        what,
        removed: a.iter().filter(|x| !b.contains(x)).map(|x| clip(x, 300)).collect(),
        added: b.iter().filter(|x| !a.contains(x)).map(|x| clip(x, 300)).collect(),
    }
}

/// How checkpoint `b` differs from `a`: tasks (by content, with their status), decisions
/// (with rationale), files, open questions, blockers, errors. Only what changed is listed.
pub fn compare(a: &CheckpointState, b: &CheckpointState) -> Vec<Change> {
    let tasks = |s: &CheckpointState| {
        s.active_tasks
            .iter()
            .map(|t| format!("{} — {}", t.content, if t.status.is_empty() { "?" } else { &t.status }))
            .collect::<Vec<_>>()
    };
    let decisions = |s: &CheckpointState| {
        s.decisions
            .iter()
            .map(|d| {
                if d.rationale.is_empty() {
                    d.decision.clone()
                } else {
                    format!("{} (because {})", d.decision, d.rationale)
                }
            })
            .collect::<Vec<_>>()
    };
    let files = |s: &CheckpointState| {
        let mut all = Vec::new();
        all.extend(s.files_created.iter().map(|f| format!("created {f}")));
        all.extend(s.files_modified.iter().map(|f| format!("modified {f}")));
        all.extend(s.files_deleted.iter().map(|f| format!("deleted {f}")));
        all
    };
    [
        change("Tasks", &tasks(a), &tasks(b)),
        change("Decisions", &decisions(a), &decisions(b)),
        change("Files", &files(a), &files(b)),
        change("Open questions", &a.open_questions, &b.open_questions),
        change("Blockers", &a.blockers, &b.blockers),
        change("Errors", &a.errors, &b.errors),
    ]
    .into_iter()
    .filter(|c| !c.removed.is_empty() || !c.added.is_empty())
    .collect()
}

#[cfg(test)]
mod tests {
    use baton_proto::v1::{Decision, Task};

    use super::*;

    #[test]
    fn compare_lists_what_changed() {
        let task = |c: &str, s: &str| Task { content: c.into(), status: s.into(), ..Default::default() };
        let a = CheckpointState {
            active_tasks: vec![task("write tests", "in_progress"), task("ship", "pending")],
            files_modified: vec!["a.rs".into()],
            ..Default::default()
        };
        let b = CheckpointState {
            active_tasks: vec![task("write tests", "completed"), task("ship", "pending")],
            files_modified: vec!["a.rs".into(), "b.rs".into()],
            decisions: vec![Decision {
                decision: "use axum".into(),
                rationale: "tonic has it".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let changes = compare(&a, &b);
        let names: Vec<_> = changes.iter().map(|c| c.what).collect();
        assert_eq!(names, ["Tasks", "Decisions", "Files"]);
        assert_eq!(changes[0].removed, ["write tests — in_progress"]);
        assert_eq!(changes[0].added, ["write tests — completed"]);
        assert_eq!(changes[1].added, ["use axum (because tonic has it)"]);
        assert_eq!(changes[2].added, ["modified b.rs"]);
        assert!(compare(&a, &a).is_empty());
    }
}
