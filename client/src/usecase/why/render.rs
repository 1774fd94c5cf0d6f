//! The answer of `baton why` as people read it (blocks of lines, each with its session, how
//! it was found, the prompt, task and decisions) and as tools read it (JSON). Everything from
//! the hub is shown with its control characters made visible.

use baton_proto::v1::{CommitContext, CommitLink, CommitMadeBy, Session};
use serde_json::{Value, json};

use super::{Answer, Block, Found, How};
use crate::safe::line;
use crate::view;

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

fn when_us(us: i64) -> String {
    let ts = prost_types::Timestamp { seconds: us / 1_000_000, nanos: 0 };
    format!("{} ({})", view::time(Some(&ts)), view::age(Some(&ts)))
}

fn lines_label(path: &str, b: &Block) -> String {
    if b.first == b.last { format!("{path}:{}", b.first) } else { format!("{path}:{}-{}", b.first, b.last) }
}

/// How a block's session was found, in words.
fn how_text(how: &How, link: &CommitLink) -> String {
    match how {
        How::Commit => "its commit was recorded in the session".into(),
        How::PatchId { original } => {
            format!(
                "the same change as {} (rebased, cherry-picked, or squashed alone): its patch id",
                short(original)
            )
        }
        How::Lines { original } => format!(
            "its lines were added by {} {:?} (squash-merged or copied): their fingerprints",
            short(original),
            line(&link.subject)
        ),
    }
}

fn made_text(link: &CommitLink, others: &[CommitLink]) -> String {
    if link.ambiguous {
        let n = others.len() + 1;
        return format!(
            "the person, while {n} sessions were live in the worktree (which one is not known; the others: {})",
            others.iter().map(|o| view::short(&o.session_id).to_owned()).collect::<Vec<_>>().join(", ")
        );
    }
    match CommitMadeBy::try_from(link.made_by).unwrap_or_default() {
        CommitMadeBy::Agent => "the agent (one of its tool calls)".into(),
        CommitMadeBy::Person => "the person at the keyboard, while the session was live".into(),
        CommitMadeBy::Unspecified => "unknown".into(),
    }
}

fn session_text(s: Option<&Session>, id: &str) -> String {
    let Some(s) = s else { return format!("session {}", view::short(id)) };
    let who =
        [s.user.as_str(), s.host.as_str()].iter().filter(|x| !x.is_empty()).copied().collect::<Vec<_>>();
    format!(
        "session {} · {} · {} · started {} ({})",
        view::short(&s.id),
        view::agent(s.agent),
        line(&who.join("@")),
        view::time(s.created_at.as_ref()),
        view::age(s.created_at.as_ref())
    )
}

fn context_lines(out: &mut Vec<String>, context: &CommitContext, session: Option<&Session>) {
    if !context.prompt.is_empty() {
        out.push(format!("  prompt:    {:?}", line(&crate::text::clip(&context.prompt, 400))));
    }
    for t in context.tasks.iter().take(3) {
        out.push(format!("  task:      {} ({})", line(&t.content), line(&t.status)));
    }
    if context.checkpoint_gone {
        out.push("  the checkpoint before this commit is gone (retention); the session kept:".into());
        if let Some(summary) = session.map(|s| s.summary.as_str()).filter(|s| !s.is_empty()) {
            out.push(format!("  summary:   {}", line(&crate::text::clip(summary, 400))));
        }
    }
    if !context.decisions.is_empty() {
        out.push("  decisions near it:".into());
        for d in &context.decisions {
            let why =
                if d.rationale.is_empty() { String::new() } else { format!(" — {}", line(&d.rationale)) };
            out.push(format!("    - {}{why}", line(&d.decision)));
        }
    }
}

/// The answer as text.
pub fn text(a: &Answer) -> String {
    let mut out = Vec::new();
    if a.blocks.is_empty() {
        return format!("{}: the file is empty\n", a.path);
    }
    for b in &a.blocks {
        let label = lines_label(&a.path, b);
        match &b.found {
            Found::NotCommitted => out.push(format!("{label}  not committed yet")),
            Found::NoSession => out.push(format!(
                "{label}  {} {:?} by {}, {}: no session recorded",
                short(&b.commit),
                line(&b.summary),
                line(&b.author),
                when_us(b.committed_us)
            )),
            Found::Linked { how, link, context, others } => {
                let session = a.sessions.get(&link.session_id);
                out.push(format!(
                    "{label}  {} {:?} by {}, {}",
                    short(&b.commit),
                    line(&b.summary),
                    line(&b.author),
                    when_us(b.committed_us)
                ));
                out.push(format!("  written in {}", session_text(session, &link.session_id)));
                out.push(format!("  found:     {}", how_text(how, link)));
                out.push(format!("  made by:   {}", made_text(link, others)));
                if !link.ambiguous && !others.is_empty() {
                    let also: Vec<String> = others
                        .iter()
                        .map(|o| format!("session {} ({})", view::short(&o.session_id), short(&o.commit_id)))
                        .collect();
                    out.push(format!("  also:      the same lines by {}", also.join(", ")));
                }
                context_lines(&mut out, context, session);
                out.push(format!(
                    "  more:      baton resume --session {}   ·   {}/session?id={}",
                    link.session_id,
                    a.server.trim_end_matches('/'),
                    link.session_id
                ));
            }
        }
    }
    if a.truncated {
        out.push(
            "partial answer: the hub matched more commits than one reply holds, so some lines above may say \
             \"no session recorded\" wrongly; ask about fewer lines (FILE:FIRST-LAST)"
                .into(),
        );
    }
    crate::safe::text(&(out.join("\n") + "\n")).into_owned()
}

fn link_json(link: &CommitLink) -> Value {
    json!({
        "commit": link.commit_id,
        "session_id": link.session_id,
        "checkpoint_id": link.checkpoint_id,
        "patch_id": link.patch_id,
        "made_by": CommitMadeBy::try_from(link.made_by).unwrap_or_default().as_str_name().trim_start_matches("COMMIT_MADE_BY_").to_ascii_lowercase(),
        "ambiguous": link.ambiguous,
        "branch": link.branch,
        "subject": link.subject,
        "committed_at": view::time(link.committed_at.as_ref()),
        "files": link.files,
        "prompt": link.prompt,
        "task": link.task,
    })
}

/// The answer as JSON.
pub fn json(a: &Answer) -> Value {
    let blocks: Vec<Value> = a
        .blocks
        .iter()
        .map(|b| {
            let mut v = json!({
                "first_line": b.first,
                "last_line": b.last,
                "commit": if b.commit == crate::project::git::blame::NOT_COMMITTED { Value::Null } else { json!(b.commit) },
                "author": b.author,
                "summary": b.summary,
            });
            let (matched, extra) = match &b.found {
                Found::NotCommitted => ("not_committed", Value::Null),
                Found::NoSession => ("no_session", Value::Null),
                Found::Linked { how, link, context, others } => {
                    let (by, original) = match how {
                        How::Commit => ("commit", link.commit_id.clone()),
                        How::PatchId { original } => ("patch_id", original.clone()),
                        How::Lines { original } => ("line_fingerprints", original.clone()),
                    };
                    let session = a.sessions.get(&link.session_id).map(view::session_json);
                    let extra = json!({
                        "original_commit": original,
                        "link": link_json(link),
                        "session": session,
                        "also": others.iter().map(link_json).collect::<Vec<_>>(),
                        "context": {
                            "checkpoint_gone": context.checkpoint_gone,
                            "prompt": context.prompt,
                            "tasks": context.tasks.iter().map(|t| json!({"content": t.content, "status": t.status})).collect::<Vec<_>>(),
                            "decisions": context.decisions.iter().map(|d| json!({"decision": d.decision, "rationale": d.rationale})).collect::<Vec<_>>(),
                        },
                        "web": format!("{}/session?id={}", a.server.trim_end_matches('/'), link.session_id),
                    });
                    (by, extra)
                }
            };
            v["matched_by"] = json!(matched);
            if !extra.is_null() {
                v["found"] = extra;
            }
            v
        })
        .collect();
    json!({ "path": a.path, "blocks": blocks, "truncated": a.truncated })
}
