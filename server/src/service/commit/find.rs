//! FindCommits: the links of commits, patch ids and line fingerprints in one reply, each link
//! once, with its session and what the session was working on at the commit (the
//! checkpoint before it and the next one; the session's latest when retention pruned it).

use std::collections::{BTreeMap, HashMap, HashSet};

use baton_proto::v1::{
    CheckpointState, CommitContext, Decision, FindCommitsResponse, FingerprintMatch, FoundCommit, Task,
};
use prost::Message;

use super::link_message;
use crate::core::commit::{Link, MAX_FOUND};
use crate::core::page::{Budget, REPLY_BUDGET};
use crate::core::time::ts;
use crate::error::Result;
use crate::store::commit_links::Moment;
use crate::store::model::Session;
use crate::store::{Store, head_revision};

/// Line matches read, at most (four per fingerprint asked for at the most): a line added by
/// many commits counts once per commit.
const MAX_MATCHES: i64 = 200_000;
/// Tasks and decisions a context shows, at most.
const NEAR: usize = 5;
/// Checkpoints read at a time.
const CHECKPOINT_BATCH: usize = 500;

/// What FindCommits asks about, validated.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    pub project: String,
    pub commits: Vec<String>,
    pub patch_ids: Vec<String>,
    pub fingerprints: Vec<String>,
}

type Key = (String, String);

fn key(l: &Link) -> Key {
    (l.commit_id.clone(), l.session_id.clone())
}

/// FindCommits.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn find<S: Store>(store: &S, asked: Asked) -> Result<FindCommitsResponse> {
    let project = asked.project;
    let as_of_revision = head_revision(store, project.clone()).await?;
    let limit = i64::try_from(MAX_FOUND + 1).unwrap_or(i64::MAX);
    let mut links = store.links_of(project.clone(), asked.commits, asked.patch_ids, limit).await?;
    let matches = store.line_matches(project.clone(), asked.fingerprints, MAX_MATCHES).await?;
    let have: HashSet<Key> = links.iter().map(key).collect();
    let wanted: HashSet<Key> =
        matches.iter().map(|(_, c, s)| (c.clone(), s.clone())).filter(|k| !have.contains(k)).collect();
    let commits: Vec<String> =
        wanted.iter().map(|(c, _)| c.clone()).collect::<HashSet<_>>().into_iter().collect();
    for batch in commits.chunks(crate::core::commit::MAX_FIND_IDS) {
        let more = store.links_of(project.clone(), batch.to_vec(), Vec::new(), limit).await?;
        links.extend(more.into_iter().filter(|l| wanted.contains(&key(l))));
    }
    links.sort_by(|a, b| {
        b.committed_us
            .cmp(&a.committed_us)
            .then_with(|| b.commit_id.cmp(&a.commit_id))
            .then_with(|| a.session_id.cmp(&b.session_id))
    });
    links.dedup_by(|a, b| key(a) == key(b));
    let mut truncated = links.len() > MAX_FOUND;
    links.truncate(MAX_FOUND);

    let ids: Vec<String> =
        links.iter().map(|l| l.session_id.clone()).collect::<HashSet<_>>().into_iter().collect();
    let sessions: HashMap<String, Session> = store
        .sessions_in(project.clone(), ids.clone())
        .await?
        .into_iter()
        .map(|s| (s.id.clone(), s))
        .collect();
    let contexts = contexts(store, &project, &links, &sessions, ids).await?;

    let mut budget = Budget::with_bytes(i64::try_from(MAX_FOUND).unwrap_or(i64::MAX), REPLY_BUDGET);
    let mut found = Vec::with_capacity(links.len());
    for (link, context) in links.iter().zip(contexts) {
        let message = FoundCommit { link: Some(link_message(link)), context: Some(context) };
        if !budget.take(message.encoded_len()) {
            truncated = true;
            break;
        }
        found.push(message);
    }
    let index: HashMap<Key, i32> = links
        .iter()
        .take(found.len())
        .enumerate()
        .map(|(i, l)| (key(l), i32::try_from(i).unwrap_or(i32::MAX)))
        .collect();
    let mut by_fingerprint: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (fingerprint, commit, session) in matches {
        if let Some(i) = index.get(&(commit, session)) {
            by_fingerprint.entry(fingerprint).or_default().push(*i);
        }
    }
    let fingerprints = by_fingerprint
        .into_iter()
        .map(|(fingerprint, mut links)| {
            links.sort_unstable();
            links.dedup();
            FingerprintMatch { fingerprint, links }
        })
        .collect();
    let shown: HashSet<&str> = links.iter().take(found.len()).map(|l| l.session_id.as_str()).collect();
    let mut sessions: Vec<_> =
        sessions.values().filter(|s| shown.contains(s.id.as_str())).map(Session::to_proto).collect();
    sessions.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(FindCommitsResponse { links: found, sessions, fingerprints, as_of_revision, truncated })
}

/// Each link's context, in the links' order.
async fn contexts<S: Store>(
    store: &S,
    project: &str,
    links: &[Link],
    sessions: &HashMap<String, Session>,
    session_ids: Vec<String>,
) -> Result<Vec<CommitContext>> {
    let moments = store.session_moments(project.to_owned(), session_ids).await?;
    let mut by_session: HashMap<&str, Vec<&Moment>> = HashMap::new();
    for m in &moments {
        by_session.entry(m.1.as_str()).or_default().push(m);
    }
    // For each link: the checkpoint before it (if still stored), the next one, or the
    // session's latest when the one before is gone.
    let picks: Vec<Pick> = links
        .iter()
        .map(|l| {
            let list = by_session.get(l.session_id.as_str()).map_or(&[][..], Vec::as_slice);
            let before = list.iter().position(|m| !l.checkpoint_id.is_empty() && m.0 == l.checkpoint_id);
            let after = match before {
                Some(at) => list.get(at + 1),
                None => list.iter().find(|m| m.2 >= l.committed_us),
            };
            let gone = !l.checkpoint_id.is_empty() && before.is_none();
            let latest = gone
                .then(|| sessions.get(&l.session_id).and_then(|s| s.head_checkpoint_id.clone()))
                .flatten();
            Pick {
                before: before.and_then(|at| list.get(at)).map(|m| (m.0.clone(), m.2)),
                after: after.map(|m| m.0.clone()),
                latest,
                gone,
            }
        })
        .collect();
    let wanted: Vec<String> = picks
        .iter()
        .flat_map(|p| [p.before.as_ref().map(|b| b.0.clone()), p.after.clone(), p.latest.clone()])
        .flatten()
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let mut states: HashMap<String, CheckpointState> = HashMap::new();
    for batch in wanted.chunks(CHECKPOINT_BATCH) {
        for row in store.checkpoints(project.to_owned(), batch.to_vec()).await? {
            // A checkpoint that fails its digest tells nothing here (GetCheckpoint says why).
            if let Ok(c) = row.verified_state() {
                states.insert(c.id.clone(), c.state.unwrap_or_default());
            }
        }
    }
    Ok(links.iter().zip(picks).map(|(l, p)| context(l, &p, &states)).collect())
}

/// The checkpoints a link's context comes from.
struct Pick {
    /// (id, created_us) of the checkpoint before the commit.
    before: Option<(String, i64)>,
    after: Option<String>,
    /// The session's latest checkpoint, when the one before is gone.
    latest: Option<String>,
    gone: bool,
}

fn context(link: &Link, pick: &Pick, states: &HashMap<String, CheckpointState>) -> CommitContext {
    let state = |id: Option<&String>| id.and_then(|id| states.get(id));
    let before = state(pick.before.as_ref().map(|b| &b.0));
    let after = state(pick.after.as_ref());
    let latest = state(pick.latest.as_ref());
    let sources: Vec<&CheckpointState> = [before, after, latest].into_iter().flatten().collect();
    let prompt = if link.prompt.is_empty() {
        sources.iter().map(|s| s.last_prompt.as_str()).find(|p| !p.is_empty()).unwrap_or_default().to_owned()
    } else {
        link.prompt.clone()
    };
    let mut tasks: Vec<Task> = Vec::new();
    if !link.task.is_empty() {
        tasks.push(Task { content: link.task.clone(), status: "in_progress".into(), ..Default::default() });
    }
    for s in before.into_iter().chain(latest) {
        for t in s.active_tasks.iter().filter(|t| t.status == "in_progress") {
            if tasks.len() < NEAR && !tasks.iter().any(|k| k.content == t.content) {
                tasks.push(t.clone());
            }
        }
    }
    // Decisions of the checkpoint before and the next (each a full snapshot: the later one
    // holds the earlier's), the newest last.
    let mut decisions: Vec<Decision> = Vec::new();
    for s in before.into_iter().chain(after).chain(latest) {
        for d in &s.decisions {
            if !decisions.iter().any(|k| k.decision == d.decision) {
                decisions.push(d.clone());
            }
        }
    }
    let skip = decisions.len().saturating_sub(NEAR);
    CommitContext {
        checkpoint_gone: pick.gone,
        checkpoint_at: pick.before.as_ref().map(|b| ts(b.1)),
        prompt,
        tasks,
        decisions: decisions.into_iter().skip(skip).collect(),
    }
}
