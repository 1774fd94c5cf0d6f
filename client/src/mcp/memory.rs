//! The memory tools: `remember`, `forget` and `recall`.

use std::fmt::Write as _;

use baton_proto::v1::{DeleteMemoryRequest, ListMemoryRequest, MemoryEntry, delete_memory_request};

use super::params;
use super::tools::{Answer, Call, Failure, clip, conflict_words};
use crate::hub::remote::Hub;
use crate::outbox::write::{self, Delivered, Write};
use crate::usecase::memory::{self, Put};
use crate::view;

pub async fn remember(call: &Call<'_>, p: params::Remember) -> Answer {
    let text = p.text.trim();
    if text.is_empty() {
        return Err(Failure::Arguments("text is empty: say what to remember".into()));
    }
    if p.category == params::Category::Note && p.key.as_deref().is_none_or(|k| k.trim().is_empty()) {
        return Err(Failure::Arguments(
            "a note needs a key (e.g. \"deploy\"): a later note with the same key replaces it".into(),
        ));
    }
    if p.category != params::Category::Note && p.key.is_some() {
        return Err(Failure::Arguments(format!("key is for notes only, not for {}", p.category.name())));
    }
    if p.rationale.is_some() && p.category != params::Category::Decision {
        return Err(Failure::Arguments(format!(
            "rationale is for decisions only, not for {}",
            p.category.name()
        )));
    }
    let conversation = call.conversation();
    let (kind, session) = call.author(conversation.as_ref());
    let add = memory::Add {
        category: p.category.name().to_owned(),
        text: text.to_owned(),
        rationale: p.rationale.clone(),
        key: p.key.clone(),
        branch: p.branch.clone(),
        if_revision: None,
    };
    let mut hub = call.hub().await;
    let (put, redacted) =
        match memory::put(call.ctx, hub.as_mut(), &call.project.key, &add, (kind, &session)).await {
            Ok(done) => done,
            Err(e) => return Err(Failure::Tool(format!("not remembered: {e:#}"))),
        };
    let what = p.category.name().replace('_', " ");
    let mut out = match put {
        Put::AlreadyHeld => format!("The project's {what} list already holds that; nothing added."),
        Put::Queued => format!(
            "The Baton hub is unreachable: the {what} is queued on this machine and will be sent when it is back (it applies to the list as it is then)."
        ),
        Put::Sent(r) => {
            let article = if what.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
            let evicted = evicted_words(&r.evicted);
            let evicted = if evicted.is_empty() { evicted } else { format!(" {evicted}") };
            format!(
                "Remembered as {article} {what} (revision {}).{}{evicted}",
                r.result.revision,
                conflict_words(&r.result)
            )
        }
    };
    if redacted > 0 {
        let _ = write!(
            out,
            " {} redacted before storing.",
            crate::text::count(redacted, "secret was", "secrets were")
        );
    }
    Ok(out)
}

/// The entries an append pushed out past its category's cap, in words (empty when none).
pub fn evicted_words(evicted: &[MemoryEntry]) -> String {
    let items: Vec<String> = evicted.iter().map(view::entry_line).collect();
    if items.is_empty() {
        return String::new();
    }
    format!(
        "The category is at its cap: {} evicted to history ({}); `recall` with evicted shows it.",
        if items.len() == 1 { "the oldest entry was" } else { "the oldest entries were" },
        items.join(", ")
    )
}

pub async fn forget(call: &Call<'_>, p: params::Forget) -> Answer {
    let id = p.id.trim();
    if id.len() < 8 || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(Failure::Arguments(format!(
            "{id:?} is not an entry id: give the id recall shows (at least its last 8 characters)"
        )));
    }
    let mut hub = call.hub().await;
    let full = if uuid::Uuid::parse_str(id).is_ok() {
        id.to_owned()
    } else {
        let Some(h) = hub.as_mut() else {
            return Err(Failure::Tool(
                "the Baton hub is unreachable: a short id cannot be looked up; give the full id to queue it"
                    .into(),
            ));
        };
        memory::entry_id(h, &call.project.key, id).await?
    };
    let conversation = call.conversation();
    let (kind, session) = call.author(conversation.as_ref());
    let request = DeleteMemoryRequest {
        project: call.project.key.clone(),
        target: Some(delete_memory_request::Target::EntryId(full.clone())),
        write: write::options(kind, &session),
    };
    match write::submit(&call.ctx.queue, hub.as_mut(), Write::DeleteMemory(request), None).await {
        Ok(Delivered::Sent(r)) => {
            Ok(format!("Forgot entry {full} (revision {}).{}", r.result.revision, conflict_words(&r.result)))
        }
        Ok(Delivered::Queued) => Ok(format!(
            "The Baton hub is unreachable: forgetting {full} is queued and will be sent when it is back."
        )),
        Err(e) => Err(Failure::Tool(format!("not forgotten: {e:#}"))),
    }
}

async fn list_memory(
    hub: &mut Hub,
    project: &str,
    category: &str,
    evicted: bool,
) -> Result<Vec<MemoryEntry>, Failure> {
    let request = ListMemoryRequest {
        project: project.to_owned(),
        category: category.to_owned(),
        include_evicted: evicted,
        ..Default::default()
    };
    Ok(crate::hub::pages::memory(hub, request).await?.entries)
}

pub async fn recall(call: &Call<'_>, p: params::Recall) -> Answer {
    let category = p.category.as_deref().map(str::trim).unwrap_or_default();
    if !category.is_empty() && !memory::categories().any(|c| c == category) {
        let all: Vec<&str> = memory::categories().collect();
        return Err(Failure::Arguments(format!(
            "unknown category {category:?}: use one of {}",
            all.join(", ")
        )));
    }
    let Some(mut hub) = call.hub().await else { return Ok(call.offline()) };
    let entries = list_memory(&mut hub, &call.project.key, category, p.include_evicted).await?;
    if entries.is_empty() {
        let what = if category.is_empty() { "memory" } else { category };
        return Ok(format!("Project {} has no {what} yet.", call.project.key));
    }
    let mut out = format!(
        "Memory of project {} ({}):\n",
        call.project.key,
        crate::text::count(entries.len(), "entry", "entries")
    );
    for e in &entries {
        let mut line = format!("- [{}", e.category);
        if !e.key.is_empty() {
            let _ = write!(line, " {}", e.key);
        }
        if !e.branch.is_empty() {
            let _ = write!(line, " @{}", e.branch);
        }
        let _ = write!(line, "] {}", e.content);
        if !e.rationale.is_empty() {
            let _ = write!(line, " (why: {})", e.rationale);
        }
        let by = e.author.as_ref().map(|a| a.host.clone()).unwrap_or_default();
        let _ = write!(line, " — id {}, by {by}, revision {}", view::short(&e.id), e.record_revision);
        if e.evicted {
            line.push_str(", evicted from the brief");
        }
        out.push_str(&line);
        out.push('\n');
    }
    Ok(clip(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An append past its category's cap names what it pushed out, and how to see it again.
    #[test]
    fn evictions_are_named() {
        assert_eq!(evicted_words(&[]), "");
        let entry = MemoryEntry {
            id: "0190aaaa-0000-7000-8000-00000000beef".into(),
            content: "use option 1".into(),
            ..Default::default()
        };
        let words = evicted_words(&[entry]);
        assert!(
            words.contains("the oldest entry was evicted") && words.contains("\"use option 1\" (0000beef)"),
            "{words}"
        );
        assert!(words.contains("recall"), "{words}");
    }
}
