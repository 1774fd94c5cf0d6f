//! What a checkpoint holds of a conversation.

use std::path::{Path, PathBuf};

use crate::agents::transcript;
use crate::ctx::{Ctx, log};
use crate::local::journal;
use crate::project::git;

/// A conversation's state for a checkpoint: the journal (the hooks' payloads), completed by
/// the transcript, which lags them; redacted.
pub fn conversation_state(
    ctx: &Ctx,
    record: &crate::local::state::AgentSession,
    transcript: Option<PathBuf>,
    cwd: &Path,
    root: &Path,
) -> baton_proto::v1::CheckpointState {
    let transcript = transcript
        .or_else(|| Some(PathBuf::from(&record.transcript_path)).filter(|t| !t.as_os_str().is_empty()));
    let read = transcript.map(|t| transcript::read(&t, cwd, root)).unwrap_or_default();
    let mut state = journal::merge(&record.journal, read);
    state.git_head = git::head(cwd).unwrap_or_default();
    state.tool_count = state.tool_count.max(i64::try_from(record.tool_count).unwrap_or(0));
    let mut redactor = baton_proto::redact::Redactor::default();
    redactor.fields(baton_proto::redact::state_texts(&mut state));
    if redactor.count > 0 {
        log(ctx, &format!("redacted {} secret(s) from a checkpoint before sending", redactor.count));
    }
    state
}
