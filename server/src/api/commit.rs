//! `CommitService`: requests checked (project, ids made canonical, sizes) before anything is
//! read, then `service::commit`.

use baton_proto::v1::commit_service_server::CommitService;
use baton_proto::v1::{
    CommitMadeBy, CommitSeenBy, FindCommitsRequest, FindCommitsResponse, ListCommitsRequest,
    ListCommitsResponse, NewCommitLink, RecordCommitsRequest, RecordCommitsResponse,
};
use tonic::{Request, Response, Status};

use super::{Api, without_clock, write_ctx};
use crate::core::access::Need;
use crate::core::commit::{
    self as rules, Link, MAX_FILES, MAX_FIND_IDS, MAX_FIND_LINES, MAX_LINES, MAX_LINKS, MAX_PROMPT,
    MAX_SUBJECT, MAX_TASK, Recorded,
};
use crate::core::page;
use crate::core::validate::{self, Invalid, invalid, limits};
use crate::error::Error;
use crate::service::commit::{self, Asked};
use crate::store::Store;

/// A recorded link, checked and made canonical; the secrets taken out of its text counted.
pub(crate) fn recorded(at: usize, new: NewCommitLink, redacted: &mut u32) -> Result<Recorded, Invalid> {
    let field = |name: &str| format!("links[{at}].{name}");
    let l = new.link.ok_or_else(|| invalid(field("link"), "is missing: set the commit and its session"))?;
    let commit_id = rules::object_id(&field("link.commit_id"), &l.commit_id)?;
    let session_id = validate::uuid(&field("link.session_id"), &l.session_id)?.to_string();
    let checkpoint_id = if l.checkpoint_id.is_empty() {
        String::new()
    } else {
        validate::uuid(&field("link.checkpoint_id"), &l.checkpoint_id)?.to_string()
    };
    let patch_id = if l.patch_id.is_empty() {
        String::new()
    } else {
        rules::object_id(&field("link.patch_id"), &l.patch_id)?
    };
    let made_by = validate::enum_value::<CommitMadeBy>(&field("link.made_by"), l.made_by, false)?;
    let seen_by = validate::enum_value::<CommitSeenBy>(&field("link.seen_by"), l.seen_by, false)?;
    validate::single_line(&field("link.branch"), &l.branch, limits::SHORT)?;
    validate::single_line(&field("link.subject"), &l.subject, MAX_SUBJECT)?;
    validate::optional(&field("link.prompt"), &l.prompt, MAX_PROMPT)?;
    validate::single_line(&field("link.task"), &l.task, MAX_TASK)?;
    validate::count(&field("link.files"), l.files.len(), MAX_FILES)?;
    for (i, path) in l.files.iter().enumerate() {
        validate::required(&field(&format!("link.files[{i}]")), path, limits::PATH)?;
    }
    validate::count(&field("line_fingerprints"), new.line_fingerprints.len(), MAX_LINES)?;
    let mut fingerprints = new
        .line_fingerprints
        .iter()
        .enumerate()
        .map(|(i, f)| rules::fingerprint(&field(&format!("line_fingerprints[{i}]")), f))
        .collect::<Result<Vec<_>, _>>()?;
    fingerprints.sort_unstable();
    fingerprints.dedup();
    let mut clean = |text: &str| {
        let (text, n) = crate::core::redact::redact(text);
        *redacted += n;
        text.into_owned()
    };
    let link = Link {
        commit_id,
        session_id,
        checkpoint_id,
        patch_id,
        made_by: made_by as i64,
        seen_by: seen_by as i64,
        ambiguous: i64::from(l.ambiguous),
        branch: l.branch,
        subject: clean(&l.subject),
        committed_us: l.committed_at.as_ref().map_or(0, super::us),
        // A list of strings always serializes.
        files: serde_json::to_string(&l.files).unwrap_or_else(|_| "[]".into()),
        prompt: clean(&l.prompt),
        task: clean(&l.task),
        lines: i64::try_from(fingerprints.len()).unwrap_or(i64::MAX),
        lines_truncated: i64::from(new.lines_truncated),
        ..Link::default()
    };
    Ok(Recorded { link, fingerprints })
}

fn object_ids(field: &str, raw: &[String]) -> Result<Vec<String>, Invalid> {
    validate::count(field, raw.len(), MAX_FIND_IDS)?;
    raw.iter().enumerate().map(|(i, id)| rules::object_id(&format!("{field}[{i}]"), id)).collect()
}

#[tonic::async_trait]
impl<S: Store> CommitService for Api<S> {
    async fn record_commits(
        &self,
        request: Request<RecordCommitsRequest>,
    ) -> Result<Response<RecordCommitsResponse>, Status> {
        let who = self.auth.check(&request, Need::Write, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        if req.links.is_empty() {
            return Err(
                Error::from(invalid("links", format!("is empty: record 1..={MAX_LINKS} links"))).into()
            );
        }
        validate::count("links", req.links.len(), MAX_LINKS)?;
        let mut hash_view = req.clone();
        without_clock(&mut hash_view.write);
        let mut redacted = 0;
        let links = req
            .links
            .into_iter()
            .enumerate()
            .map(|(at, new)| recorded(at, new, &mut redacted))
            .collect::<Result<Vec<_>, _>>()?;
        let ctx = write_ctx("RecordCommits", &hash_view, req.write.as_ref(), redacted, &who)?;
        Ok(Response::new(commit::record(&self.store, ctx, req.project, links).await?))
    }

    async fn find_commits(
        &self,
        request: Request<FindCommitsRequest>,
    ) -> Result<Response<FindCommitsResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        let commits = object_ids("commit_ids", &req.commit_ids)?;
        let patch_ids = object_ids("patch_ids", &req.patch_ids)?;
        validate::count("line_fingerprints", req.line_fingerprints.len(), MAX_FIND_LINES)?;
        let fingerprints = req
            .line_fingerprints
            .iter()
            .enumerate()
            .map(|(i, f)| rules::fingerprint(&format!("line_fingerprints[{i}]"), f))
            .collect::<Result<Vec<_>, _>>()?;
        let asked = Asked { project: req.project, commits, patch_ids, fingerprints };
        Ok(Response::new(commit::find(&self.store, asked).await?))
    }

    async fn list_commits(
        &self,
        request: Request<ListCommitsRequest>,
    ) -> Result<Response<ListCommitsResponse>, Status> {
        self.auth.check(&request, Need::Read, &request.get_ref().project).await?;
        let req = request.into_inner();
        validate::project("project", &req.project)?;
        let session = if req.session_id.is_empty() {
            None
        } else {
            Some(validate::uuid("session_id", &req.session_id)?.to_string())
        };
        let limit = validate::page_size("limit", req.limit, 100, 1000)?;
        let after = if req.page_token.is_empty() {
            None
        } else {
            Some(page::position("page_token", &req.page_token)?)
        };
        Ok(Response::new(commit::list(&self.store, req.project, session, limit, after).await?))
    }
}
