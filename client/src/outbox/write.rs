//! Writes from the client: sent at once when the hub answers, queued when it does not, and
//! the queue flushed first so writes reach the hub in the order they were made.

use std::time::Duration;

use anyhow::Context;
use baton_proto::v1::{
    CreateCheckpointRequest, DeleteMemoryRequest, EndSessionRequest, PutMemoryRequest, RecordCommitsRequest,
    StartSessionRequest, UpdateSessionRequest, WriteOptions, WriteResult,
};
use prost::Message;
use tonic::Status;

use crate::clock::now_us;
use crate::hub::remote::{self, Hub};
use crate::outbox::queue::{Entry, Queue};

/// How long a hook's write waits for the queue lock before queueing behind another flush.
pub const LOCK_WAIT: Duration = Duration::from_millis(300);

/// A write the client can make (and queue).
#[derive(Debug, Clone)]
pub enum Write {
    StartSession(StartSessionRequest),
    UpdateSession(UpdateSessionRequest, String),
    EndSession(EndSessionRequest, String),
    CreateCheckpoint(Box<CreateCheckpointRequest>, String),
    PutMemory(PutMemoryRequest),
    DeleteMemory(DeleteMemoryRequest),
    RecordCommits(RecordCommitsRequest),
}

/// A write the hub answered with a refusal (not an outage): its sentence says why.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// What the hub answered a write with.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    pub result: WriteResult,
    /// History entries a memory append pushed out past its category's cap.
    pub evicted: Vec<baton_proto::v1::MemoryEntry>,
    /// The entries a memory deletion removed.
    pub deleted: Vec<String>,
}

/// What came back.
#[derive(Debug, Clone)]
pub enum Delivered {
    Sent(Box<Sent>),
    Queued,
}

fn ts(us: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: us.div_euclid(1_000_000),
        nanos: i32::try_from(us.rem_euclid(1_000_000) * 1000).unwrap_or(0),
    }
}

/// Fresh write options: a request id (for idempotent retries) and this client's labels.
pub fn options(agent: i32, session_id: &str) -> Option<WriteOptions> {
    Some(WriteOptions {
        request_id: uuid::Uuid::now_v7().to_string(),
        agent,
        host: hostname(),
        user: user(),
        session_id: session_id.to_owned(),
        ..Default::default()
    })
}

/// The user name Baton records (and `baton search --author` finds): `USER`, else `LOGNAME`,
/// else the account name of this process' user (a service or container may set neither).
pub fn user() -> String {
    let from_env = ["USER", "LOGNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()));
    from_env.or_else(account_name).unwrap_or_default()
}

/// The name `/etc/passwd` gives this process' user id (the owner of `/proc/self`).
fn account_name() -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let uid = std::fs::metadata("/proc/self").ok()?.uid().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        (fields.nth(1)? == uid && !name.is_empty()).then(|| name.to_owned())
    })
}

/// The host name Baton records: `BATON_HOST` when set (several simulated machines on one
/// computer, in tests), else the machine's.
pub fn hostname() -> String {
    if let Some(host) = std::env::var("BATON_HOST").ok().filter(|h| !h.trim().is_empty()) {
        return host.trim().to_owned();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .or_else(|| {
            std::process::Command::new("hostname")
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        })
        .unwrap_or_default()
}

impl Write {
    pub fn rpc(&self) -> &'static str {
        match self {
            Self::StartSession(_) => "StartSession",
            Self::UpdateSession(..) => "UpdateSession",
            Self::EndSession(..) => "EndSession",
            Self::CreateCheckpoint(..) => "CreateCheckpoint",
            Self::PutMemory(_) => "PutMemory",
            Self::DeleteMemory(_) => "DeleteMemory",
            Self::RecordCommits(_) => "RecordCommits",
        }
    }

    /// The project, for the queue listing (session-scoped writes carry it alongside).
    pub fn project(&self) -> &str {
        match self {
            Self::StartSession(r) => &r.project,
            Self::PutMemory(r) => &r.project,
            Self::DeleteMemory(r) => &r.project,
            Self::RecordCommits(r) => &r.project,
            Self::UpdateSession(_, p) | Self::EndSession(_, p) | Self::CreateCheckpoint(_, p) => p,
        }
    }

    fn options(&mut self) -> &mut Option<WriteOptions> {
        match self {
            Self::StartSession(r) => &mut r.write,
            Self::UpdateSession(r, _) => &mut r.write,
            Self::EndSession(r, _) => &mut r.write,
            Self::CreateCheckpoint(r, _) => &mut r.write,
            Self::PutMemory(r) => &mut r.write,
            Self::DeleteMemory(r) => &mut r.write,
            Self::RecordCommits(r) => &mut r.write,
        }
    }

    pub fn request_id(&self) -> &str {
        let w = match self {
            Self::StartSession(r) => &r.write,
            Self::UpdateSession(r, _) => &r.write,
            Self::EndSession(r, _) => &r.write,
            Self::CreateCheckpoint(r, _) => &r.write,
            Self::PutMemory(r) => &r.write,
            Self::DeleteMemory(r) => &r.write,
            Self::RecordCommits(r) => &r.write,
        };
        w.as_ref().map_or("", |w| w.request_id.as_str())
    }

    /// Encoded for the queue: the request, plus the project for session-scoped writes.
    pub fn encode(&self) -> Vec<u8> {
        let (body, project) = match self {
            Self::StartSession(r) => (r.encode_to_vec(), None),
            Self::UpdateSession(r, p) => (r.encode_to_vec(), Some(p)),
            Self::EndSession(r, p) => (r.encode_to_vec(), Some(p)),
            Self::CreateCheckpoint(r, p) => (r.encode_to_vec(), Some(p)),
            Self::PutMemory(r) => (r.encode_to_vec(), None),
            Self::DeleteMemory(r) => (r.encode_to_vec(), None),
            Self::RecordCommits(r) => (r.encode_to_vec(), None),
        };
        let project = project.map(String::as_str).unwrap_or_default();
        // A project key is at most a few hundred bytes (the hub refuses longer ones).
        let mut out = u32::try_from(project.len()).unwrap_or(u32::MAX).to_le_bytes().to_vec();
        out.extend_from_slice(project.as_bytes());
        out.extend(body);
        out
    }

    pub fn decode(rpc: &str, bytes: &[u8]) -> anyhow::Result<Self> {
        let len = bytes.get(..4).context("queue entry too short")?;
        let len = u32::from_le_bytes(len.try_into()?) as usize;
        let project = String::from_utf8(bytes.get(4..4 + len).context("queue entry too short")?.to_vec())?;
        let body = bytes.get(4 + len..).context("queue entry too short")?;
        Ok(match rpc {
            "StartSession" => Self::StartSession(Message::decode(body)?),
            "UpdateSession" => Self::UpdateSession(Message::decode(body)?, project),
            "EndSession" => Self::EndSession(Message::decode(body)?, project),
            "CreateCheckpoint" => Self::CreateCheckpoint(Box::new(Message::decode(body)?), project),
            "PutMemory" => Self::PutMemory(Message::decode(body)?),
            "DeleteMemory" => Self::DeleteMemory(Message::decode(body)?),
            "RecordCommits" => Self::RecordCommits(Message::decode(body)?),
            other => anyhow::bail!("unknown queued call {other:?}"),
        })
    }

    /// Sends it; a queued write carries when it was made and this clock's time now, so the
    /// hub can remove the clock offset.
    pub async fn send(mut self, hub: &mut Hub, written_at_us: Option<i64>) -> Result<Sent, Status> {
        if let Some(at) = written_at_us
            && let Some(w) = self.options().as_mut()
        {
            w.written_at = Some(ts(at));
            w.client_now = Some(ts(now_us()));
        }
        let mut deleted = Vec::new();
        let (result, evicted) = match self {
            Self::StartSession(r) => (hub.sessions.start_session(r).await?.into_inner().result, vec![]),
            Self::UpdateSession(r, _) => (hub.sessions.update_session(r).await?.into_inner().result, vec![]),
            Self::EndSession(r, _) => (hub.sessions.end_session(r).await?.into_inner().result, vec![]),
            Self::CreateCheckpoint(r, _) => {
                (hub.checkpoints.create_checkpoint(*r).await?.into_inner().result, vec![])
            }
            Self::PutMemory(r) => {
                let reply = hub.memory.put_memory(r).await?.into_inner();
                (reply.result, reply.evicted)
            }
            Self::DeleteMemory(r) => {
                let reply = hub.memory.delete_memory(r).await?.into_inner();
                deleted = reply.deleted_ids;
                (reply.result, vec![])
            }
            Self::RecordCommits(r) => (hub.commits.record_commits(r).await?.into_inner().result, vec![]),
        };
        Ok(Sent { result: result.unwrap_or_default(), evicted, deleted })
    }
}

/// What a flush did.
#[derive(Debug, Default)]
pub struct Flushed {
    pub sent: usize,
    pub buried: usize,
    pub left: usize,
    /// Conflicts the hub reported for queued writes (STALE ones among them).
    pub conflicts: Vec<String>,
    /// Each delivered write's result, by request id.
    pub results: Vec<(String, WriteResult)>,
    /// Each refused write's reason, by request id.
    pub refused: Vec<(String, String)>,
    /// Entries left alone because another process was sending them (see `queue::claim`).
    pub in_flight: Vec<std::path::PathBuf>,
}

/// Sends queued writes in order. Stops at the first transient failure (order matters: a
/// queued checkpoint may refer to a queued session); a refusal moves that entry to the
/// dead-letter list and goes on.
pub async fn flush(
    queue: &Queue,
    hub: &mut Hub,
    wait: Option<Duration>,
    deadline: Option<std::time::Instant>,
) -> anyhow::Result<Flushed> {
    let Some(locked) = queue.lock(wait)? else {
        // Another process is flushing right now: it will send them.
        return Ok(Flushed { left: queue.counts().0, ..Default::default() });
    };
    let mut out = Flushed::default();
    let pending = locked.pending()?;
    let total = pending.len();
    for (i, (path, entry)) in pending.into_iter().enumerate() {
        if deadline.is_some_and(|d| std::time::Instant::now() > d) {
            out.left = total - i;
            break;
        }
        // Another process is sending this one right now (its own write): not ours to send.
        let Some(_claim) = crate::outbox::queue::claim(&path)? else {
            out.in_flight.push(path);
            continue;
        };
        if now_us() - entry.written_at_us
            > i64::try_from(crate::outbox::queue::MAX_AGE.as_micros()).unwrap_or(i64::MAX)
        {
            locked.bury(&path, &entry, "older than the queue's 30-day cap".into())?;
            out.buried += 1;
            continue;
        }
        let write = match entry.write() {
            Ok(w) => w,
            Err(e) => {
                locked.bury(&path, &entry, format!("cannot be read: {e}"))?;
                out.buried += 1;
                continue;
            }
        };
        match write.send(hub, Some(entry.written_at_us)).await {
            Ok(Sent { result, .. }) => {
                if let Some(c) = &result.conflict {
                    out.conflicts.push(format!(
                        "{} {} ({:?})",
                        entry.rpc,
                        c.record,
                        baton_proto::v1::WriteOutcome::try_from(c.outcome).unwrap_or_default()
                    ));
                }
                locked.remove(&path)?;
                out.sent += 1;
                out.results.push((entry.request_id.clone(), result));
            }
            Err(status) if remote::is_transient(&status) => {
                out.left = total - i;
                break;
            }
            Err(status) => {
                locked.bury(&path, &entry, remote::explain(&status))?;
                out.buried += 1;
                out.refused.push((entry.request_id.clone(), remote::explain(&status)));
            }
        }
    }
    Ok(out)
}

/// Sends a write now, or queues it when the hub is unreachable (or older writes are still
/// queued, which must reach the hub first).
pub async fn submit(
    queue: &Queue,
    hub: Option<&mut Hub>,
    write: Write,
    wait: Option<Duration>,
) -> anyhow::Result<Delivered> {
    Box::pin(deliver(queue, hub, write, wait, None::<fn() -> anyhow::Result<()>>)).await
}

/// `submit`, with `then` run once the write is on disk (queued, or journaled and synced) and
/// before it is sent: for a local record naming what the write makes (a conversation's
/// session), which must not outlive a power cut the write does not (the conversation's later
/// writes would name a session the hub never heard of).
pub async fn submit_then(
    queue: &Queue,
    hub: Option<&mut Hub>,
    write: Write,
    wait: Option<Duration>,
    then: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<Delivered> {
    Box::pin(deliver(queue, hub, write, wait, Some(then))).await
}

async fn deliver(
    queue: &Queue,
    hub: Option<&mut Hub>,
    write: Write,
    wait: Option<Duration>,
    then: Option<impl FnOnce() -> anyhow::Result<()>>,
) -> anyhow::Result<Delivered> {
    let Some(hub) = hub else {
        let queued = enqueue(queue, &write, wait)?;
        then.map_or(Ok(()), |then| then())?;
        return Ok(queued);
    };
    // Journaled before anything is sent: if this process is stopped mid-send (a hook's
    // time budget, a kill, a hub that accepts but never answers), the write is still
    // queued for the next flush. A write that gets an answer leaves the journal.
    let older = queue.waiting();
    let journal = {
        let entry = Entry::new(&write, now_us());
        locked(queue, wait)?.push_in_flight(&entry)?
    };
    if let Some(then) = then {
        crate::outbox::queue::sync(&journal.path)?;
        then()?;
    }
    if older > 0 {
        // Queued writes first (order matters). Writes other processes are sending at this
        // moment are not queued: they are as concurrent as this one, and waiting for them
        // would only serialize hooks that run at once.
        let flushed = flush(queue, hub, wait, None).await?;
        if flushed.left > 0 {
            crate::outbox::queue::sync(&journal.path)?;
            return Ok(Delivered::Queued);
        }
    }
    match write.clone().send(hub, None).await {
        Ok(sent) => {
            forget(&journal.path);
            Ok(Delivered::Sent(Box::new(sent)))
        }
        Err(status) if remote::is_transient(&status) => {
            crate::outbox::queue::sync(&journal.path)?;
            Ok(Delivered::Queued)
        }
        Err(status) => {
            forget(&journal.path);
            Err(Refused(remote::explain(&status)).into())
        }
    }
    // The claim on the entry ends here: one left behind is an ordinary queued write.
}

/// The queue, locked for a change; a hook waits at most `wait` (at least 2 s).
fn locked(queue: &Queue, wait: Option<Duration>) -> anyhow::Result<crate::outbox::queue::Locked<'_>> {
    queue
        .lock(wait.map(|w| w.max(Duration::from_secs(2))))?
        .context("the offline queue is locked by another process")
}

/// Takes a delivered write out of the journal; no queue lock needed, as a flusher leaves a
/// claimed entry alone. Failing to is harmless: a later flush sends it again and the hub
/// answers with the stored reply.
fn forget(path: &std::path::Path) {
    let _ = std::fs::remove_file(path);
}

fn enqueue(queue: &Queue, write: &Write, wait: Option<Duration>) -> anyhow::Result<Delivered> {
    locked(queue, wait)?.push(&Entry::new(write, now_us()))?;
    Ok(Delivered::Queued)
}
