//! Reservations' rules (`ReservationService`), pure: what a path and a task key may be, what
//! overlaps, when a reservation has lapsed, who is first in a queue, and what a request
//! gets. A write reads the project's live reservations under the project's lock and lets
//! these functions decide; whatever they change is the write's event.

use std::collections::{BTreeMap, HashSet};

use baton_proto::v1::ReservationStatus;

use crate::core::validate::{Invalid, invalid, single_line};

/// A path's bytes at most.
pub const MAX_PATH: usize = 1024;
/// A task key's bytes at most.
pub const MAX_TASK: usize = 256;
pub const MAX_REASON: usize = 1024;
/// Paths and tasks one request names at most.
pub const MAX_TARGETS: usize = 100;
/// A wait's seconds at most.
pub const MAX_WAIT_SECONDS: u32 = 600;
pub const DEFAULT_TTL_SECONDS: u32 = 600;
pub const MIN_TTL_SECONDS: u32 = 2;
pub const MAX_TTL_SECONDS: u32 = 86_400;

/// What a reservation is on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// A repository-relative path, canonical (`path`).
    Path(String),
    /// A task key.
    Task(String),
}

impl Target {
    /// The kind as stored.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Path(_) => "path",
            Self::Task(_) => "task",
        }
    }

    pub fn text(&self) -> &str {
        match self {
            Self::Path(t) | Self::Task(t) => t,
        }
    }

    /// A stored target (an unknown kind is read as a task, which overlaps only itself).
    pub fn stored(kind: &str, text: &str) -> Self {
        if kind == "path" { Self::Path(text.to_owned()) } else { Self::Task(text.to_owned()) }
    }

    /// Equal, or one path a directory holding the other; never a path and a task.
    pub fn overlaps(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Path(a), Self::Path(b)) => a == b || contains(a, b) || contains(b, a),
            (Self::Task(a), Self::Task(b)) => a == b,
            _ => false,
        }
    }
}

/// Whether directory `dir` holds `path` (a component boundary: "src" holds "src/a", not "src2").
fn contains(dir: &str, path: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

/// Whether reservations of these branches can overlap ("" is project-wide).
pub fn branches_meet(a: &str, b: &str) -> bool {
    a.is_empty() || b.is_empty() || a == b
}

/// A path as stored: repository-relative, '/'-separated, "." components and repeated or
/// trailing separators dropped; refused when absolute, when it climbs out with "..", when it
/// names the repository itself, or when it is not one line of at most 1,024 bytes.
pub fn path(field: &str, raw: &str) -> Result<String, Invalid> {
    single_line(field, raw, MAX_PATH)?;
    if raw.starts_with('/') {
        return Err(invalid(
            field,
            format!(
                "{raw:?} is absolute; give the path relative to the repository's root (e.g. \"src/main.rs\")"
            ),
        ));
    }
    let mut parts = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(invalid(
                    field,
                    format!(
                        "{raw:?} has a \"..\" component; a reservation names a path inside the repository"
                    ),
                ));
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(invalid(
            field,
            "names no file or directory: give one inside the repository (e.g. \"src\" or \"src/main.rs\")",
        ));
    }
    Ok(parts.join("/"))
}

/// A task key: 1..=256 bytes, one line, kept as given.
pub fn task(field: &str, raw: &str) -> Result<String, Invalid> {
    if raw.trim().is_empty() {
        return Err(invalid(field, "is empty: give the task's key (an issue id, a task title, a thread id)"));
    }
    single_line(field, raw, MAX_TASK)?;
    Ok(raw.to_owned())
}

/// Targets as the store reads them: the paths, and the task keys.
pub fn split(targets: &[Target]) -> (Vec<String>, Vec<String>) {
    let (mut paths, mut tasks) = (Vec::new(), Vec::new());
    for t in targets {
        match t {
            Target::Path(x) => paths.push(x.clone()),
            Target::Task(x) => tasks.push(x.clone()),
        }
    }
    (paths, tasks)
}

/// The targets of a request, checked and canonical, each once, in the order given.
pub fn targets(paths: &[String], tasks: &[String]) -> Result<Vec<Target>, Invalid> {
    let n = paths.len() + tasks.len();
    if n > MAX_TARGETS {
        return Err(invalid("paths", format!("{n} paths and tasks; at most {MAX_TARGETS} per request")));
    }
    let mut out = Vec::with_capacity(n);
    for (i, p) in paths.iter().enumerate() {
        out.push(Target::Path(path(&format!("paths[{i}]"), p)?));
    }
    for (i, t) in tasks.iter().enumerate() {
        out.push(Target::Task(task(&format!("tasks[{i}]"), t)?));
    }
    let mut seen = HashSet::new();
    out.retain(|t| seen.insert(t.clone()));
    Ok(out)
}

/// A reservation as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Row {
    pub id: String,
    pub session_id: String,
    /// The request it was made by: a request's reservations are granted together.
    pub request: String,
    /// "path" or "task".
    pub kind: String,
    pub target: String,
    pub branch: String,
    pub reason: String,
    /// `ReservationStatus` as a number.
    pub status: i64,
    /// Encoded `Actor`.
    pub holder: Vec<u8>,
    pub created_us: i64,
    /// The revision that made it: a queue's order.
    pub created_revision: i64,
    /// 0 while waiting.
    pub granted_us: i64,
    pub expires_us: i64,
    /// 0 while live.
    pub ended_us: i64,
    pub ended_by: String,
    pub revision: i64,
}

impl Row {
    pub fn target(&self) -> Target {
        Target::stored(&self.kind, &self.target)
    }

    pub fn is(&self, status: ReservationStatus) -> bool {
        self.status == status as i64
    }

    /// Held or waiting, and its time not run out at `now_us`.
    pub fn live_at(&self, now_us: i64) -> bool {
        (self.is(ReservationStatus::Held) || self.is(ReservationStatus::Waiting)) && self.expires_us > now_us
    }

    /// Whether it is in the way of `target` on `branch`.
    pub fn meets(&self, target: &Target, branch: &str) -> bool {
        branches_meet(&self.branch, branch) && self.target().overlaps(target)
    }

    fn meets_row(&self, other: &Self) -> bool {
        self.meets(&other.target(), &other.branch)
    }

    fn end(&mut self, status: ReservationStatus, now_us: i64, revision: i64) {
        self.status = status as i64;
        self.ended_us = now_us;
        self.revision = revision;
    }
}

/// A project's live reservations as one write sees them, and which it changed.
#[derive(Debug, Default)]
pub struct Book {
    pub rows: Vec<Row>,
    changed: HashSet<usize>,
    /// Live rows of the project that were not read (none of them can change or refuse
    /// this write; they count towards the cap).
    unread_live: usize,
}

/// What a request in the way meets.
#[derive(Debug, Clone)]
pub struct Blocked {
    /// Index in `Book::rows`.
    pub row: usize,
    /// The requested target it overlaps.
    pub requested: Target,
}

/// A request for reservations, validated.
#[derive(Debug, Clone)]
pub struct Ask {
    pub session_id: String,
    pub request: String,
    pub targets: Vec<Target>,
    pub branch: String,
    pub reason: String,
    pub holder: Vec<u8>,
    /// Take over what other sessions hold (authorized by the caller).
    pub steal: bool,
    /// µs to wait when blocked (0: do not queue).
    pub wait_us: i64,
}

/// What a request got.
#[derive(Debug)]
pub enum Outcome {
    /// Held: the rows (new or renewed), and those taken over.
    Granted { rows: Vec<usize>, taken_over: Vec<usize> },
    /// Queued behind these.
    Queued { rows: Vec<usize>, blockers: Vec<Blocked> },
    /// Refused: nothing changed for it.
    Blocked(Vec<Blocked>),
}

/// Where the new rows' ids and the write's clock come from.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub now_us: i64,
    pub revision: i64,
    /// The project's time to live (µs).
    pub ttl_us: i64,
}

impl Book {
    pub fn new(rows: Vec<Row>) -> Self {
        Self::with_unread(rows, 0)
    }

    /// A book of the rows a write read, beside `unread_live` live rows it did not.
    pub fn with_unread(rows: Vec<Row>, unread_live: usize) -> Self {
        Self { rows, changed: HashSet::new(), unread_live }
    }

    /// The rows this write changed or added, in the book's order.
    pub fn changed(&self) -> Vec<&Row> {
        let mut idx: Vec<usize> = self.changed.iter().copied().collect();
        idx.sort_unstable();
        idx.into_iter().map(|i| &self.rows[i]).collect()
    }

    pub fn is_changed(&self) -> bool {
        !self.changed.is_empty()
    }

    /// Live rows (held and waiting, time not run out), those not read included.
    pub fn live(&self, now_us: i64) -> usize {
        self.unread_live + self.rows.iter().filter(|r| r.live_at(now_us)).count()
    }

    /// Ends what ran out (held: EXPIRED; waiting: WAIT_ENDED), then grants the queue: each
    /// request's waits, in queue order, once nothing held and no earlier wait is in the way
    /// of any of them. Whatever it changes, this write's event carries.
    pub fn settle(&mut self, clock: Clock) {
        for i in 0..self.rows.len() {
            let r = &self.rows[i];
            if r.expires_us > clock.now_us {
                continue;
            }
            let status = if r.is(ReservationStatus::Held) {
                ReservationStatus::Expired
            } else if r.is(ReservationStatus::Waiting) {
                ReservationStatus::WaitEnded
            } else {
                continue;
            };
            self.rows[i].end(status, clock.now_us, clock.revision);
            self.changed.insert(i);
        }
        self.grant_queue(clock);
    }

    /// Grants waiting requests in queue order, each once nothing is in its way.
    fn grant_queue(&mut self, clock: Clock) {
        let mut requests: BTreeMap<(i64, String), Vec<usize>> = BTreeMap::new();
        for (i, r) in self.rows.iter().enumerate() {
            if r.is(ReservationStatus::Waiting) && r.live_at(clock.now_us) {
                requests.entry((r.created_revision, r.request.clone())).or_default().push(i);
            }
        }
        for rows in requests.values() {
            let clear = rows.iter().all(|&i| self.in_the_way(&self.rows[i], i).is_none());
            if clear {
                for &i in rows {
                    let r = &mut self.rows[i];
                    r.status = ReservationStatus::Held as i64;
                    r.granted_us = clock.now_us;
                    r.expires_us = clock.now_us.saturating_add(clock.ttl_us);
                    r.revision = clock.revision;
                    self.changed.insert(i);
                }
            }
        }
    }

    /// The first row in the way of waiting row `me`: held by another session, or waiting for
    /// another session ahead of it.
    fn in_the_way(&self, me: &Row, me_idx: usize) -> Option<usize> {
        self.rows.iter().enumerate().find_map(|(i, r)| {
            let ahead = r.is(ReservationStatus::Held)
                || (r.is(ReservationStatus::Waiting)
                    && (r.created_revision, &r.request) < (me.created_revision, &me.request));
            (i != me_idx && r.session_id != me.session_id && ahead && r.meets_row(me)).then_some(i)
        })
    }

    /// What is in the way of a request: live rows of other sessions overlapping a target,
    /// held ones and (unless it steals, which goes past the queue) waiting ones.
    pub fn blockers(&self, ask: &Ask, now_us: i64) -> Vec<Blocked> {
        let mut blockers = Vec::new();
        for target in &ask.targets {
            for (i, r) in self.rows.iter().enumerate() {
                if r.session_id == ask.session_id || !r.live_at(now_us) || !r.meets(target, &ask.branch) {
                    continue;
                }
                if ask.steal && r.is(ReservationStatus::Waiting) {
                    continue;
                }
                blockers.push(Blocked { row: i, requested: target.clone() });
            }
        }
        blockers
    }

    /// Decides a request (after `settle`): renews what the session holds already, grants the
    /// rest when nothing is in the way (taking over the holders when it steals), else queues
    /// it when it may wait, else refuses it. New rows get ids from `ids`, in target order.
    pub fn ask(&mut self, ask: &Ask, clock: Clock, ids: &mut impl FnMut() -> String) -> Outcome {
        let blockers = self.blockers(ask, clock.now_us);
        if !blockers.is_empty() && !ask.steal {
            if ask.wait_us <= 0 {
                return Outcome::Blocked(blockers);
            }
            let until = clock.now_us.saturating_add(ask.wait_us);
            let rows = ask
                .targets
                .iter()
                .map(|t| self.add(ask, t, ReservationStatus::Waiting, until, clock, ids()))
                .collect();
            return Outcome::Queued { rows, blockers };
        }
        let mut taken_over = Vec::new();
        for b in &blockers {
            if !taken_over.contains(&b.row) {
                let r = &mut self.rows[b.row];
                r.end(ReservationStatus::TakenOver, clock.now_us, clock.revision);
                r.ended_by.clone_from(&ask.session_id);
                self.changed.insert(b.row);
                taken_over.push(b.row);
            }
        }
        let until = clock.now_us.saturating_add(clock.ttl_us);
        let mut rows = Vec::with_capacity(ask.targets.len());
        for t in &ask.targets {
            let own = self.rows.iter().position(|r| {
                r.session_id == ask.session_id
                    && r.is(ReservationStatus::Held)
                    && r.live_at(clock.now_us)
                    && r.target() == *t
                    && r.branch == ask.branch
            });
            match own {
                Some(i) => {
                    let r = &mut self.rows[i];
                    r.expires_us = until;
                    r.reason.clone_from(&ask.reason);
                    r.revision = clock.revision;
                    self.changed.insert(i);
                    rows.push(i);
                }
                None => rows.push(self.add(ask, t, ReservationStatus::Held, until, clock, ids())),
            }
        }
        Outcome::Granted { rows, taken_over }
    }

    fn add(
        &mut self,
        ask: &Ask,
        target: &Target,
        status: ReservationStatus,
        expires_us: i64,
        clock: Clock,
        id: String,
    ) -> usize {
        let held = status == ReservationStatus::Held;
        self.rows.push(Row {
            id,
            session_id: ask.session_id.clone(),
            request: ask.request.clone(),
            kind: target.kind().to_owned(),
            target: target.text().to_owned(),
            branch: ask.branch.clone(),
            reason: ask.reason.clone(),
            status: status as i64,
            holder: ask.holder.clone(),
            created_us: clock.now_us,
            created_revision: clock.revision,
            granted_us: if held { clock.now_us } else { 0 },
            expires_us,
            ended_us: 0,
            ended_by: String::new(),
            revision: clock.revision,
        });
        let i = self.rows.len() - 1;
        self.changed.insert(i);
        i
    }

    /// Ends a session's live rows that `pick` selects (held: `held_as`; waiting:
    /// WAIT_ENDED); returns them.
    pub fn end_of(
        &mut self,
        session_id: &str,
        held_as: ReservationStatus,
        clock: Clock,
        pick: impl Fn(&Row) -> bool,
    ) -> Vec<usize> {
        let mut ended = Vec::new();
        for (i, r) in self.rows.iter_mut().enumerate() {
            if r.session_id != session_id || !r.live_at(clock.now_us) || !pick(r) {
                continue;
            }
            let status = if r.is(ReservationStatus::Held) { held_as } else { ReservationStatus::WaitEnded };
            r.end(status, clock.now_us, clock.revision);
            ended.push(i);
            self.changed.insert(i);
        }
        ended
    }

    /// Moves a session's held rows to its successor (a resume), renewed; its waits end.
    pub fn hand_over(&mut self, from: &str, to: &str, holder: &[u8], clock: Clock) -> Vec<usize> {
        let mut moved = Vec::new();
        for (i, r) in self.rows.iter_mut().enumerate() {
            if r.session_id != from || !r.live_at(clock.now_us) {
                continue;
            }
            if r.is(ReservationStatus::Held) {
                to.clone_into(&mut r.session_id);
                r.holder = holder.to_vec();
                r.expires_us = clock.now_us.saturating_add(clock.ttl_us);
                r.revision = clock.revision;
                moved.push(i);
            } else {
                r.end(ReservationStatus::WaitEnded, clock.now_us, clock.revision);
            }
            self.changed.insert(i);
        }
        moved
    }

    /// Rows this write changed that were granted from a queue (status HELD, made earlier).
    pub fn granted_from_queue(&self, clock: Clock) -> Vec<&Row> {
        self.changed()
            .into_iter()
            .filter(|r| {
                r.is(ReservationStatus::Held)
                    && r.granted_us == clock.now_us
                    && r.created_revision < clock.revision
            })
            .collect()
    }
}

/// The order lists show: held first by target, then waiting in queue order.
pub fn list_order(a: &Row, b: &Row) -> std::cmp::Ordering {
    list_key(a).cmp(&list_key(b))
}

/// A row's place in a list (`list_order`), which a page token keeps.
pub fn list_key(r: &Row) -> (bool, i64, String, String, String) {
    if r.is(ReservationStatus::Held) {
        (false, 0, r.kind.clone(), r.target.clone(), r.id.clone())
    } else {
        (true, r.created_revision, r.request.clone(), r.target.clone(), r.id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, session: &str, target: &Target, status: ReservationStatus, revision: i64) -> Row {
        Row {
            id: id.into(),
            session_id: session.into(),
            request: format!("req-{id}"),
            kind: target.kind().into(),
            target: target.text().into(),
            branch: String::new(),
            reason: String::new(),
            status: status as i64,
            holder: Vec::new(),
            created_us: 0,
            created_revision: revision,
            granted_us: 0,
            expires_us: 1_000,
            ended_us: 0,
            ended_by: String::new(),
            revision,
        }
    }

    fn p(s: &str) -> Target {
        Target::Path(s.into())
    }

    fn ask(session: &str, targets: Vec<Target>) -> Ask {
        Ask {
            session_id: session.into(),
            request: format!("req-{session}"),
            targets,
            branch: String::new(),
            reason: "why".into(),
            holder: Vec::new(),
            steal: false,
            wait_us: 0,
        }
    }

    const CLOCK: Clock = Clock { now_us: 500, revision: 10, ttl_us: 600 };

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("new-{n}")
        }
    }

    #[test]
    fn paths_are_canonical_and_stay_inside() {
        assert_eq!(path("p", "./src//auth/./jwt.rs/").unwrap(), "src/auth/jwt.rs");
        for bad in ["/etc/passwd", "../x", "src/../../x", "", ".", "./", "a\nb", "a\0b"] {
            assert!(path("p", bad).is_err(), "{bad:?}");
        }
        assert!(path("p", &"a".repeat(MAX_PATH + 1)).is_err());
        assert!(task("t", " ").is_err());
        assert!(task("t", "#42").is_ok());
    }

    #[test]
    fn overlap_is_equal_or_containing_on_a_component_boundary() {
        assert!(p("src").overlaps(&p("src/a.rs")));
        assert!(p("src/a.rs").overlaps(&p("src")));
        assert!(p("src/a.rs").overlaps(&p("src/a.rs")));
        assert!(!p("src").overlaps(&p("src2/a.rs")));
        assert!(!p("src/a").overlaps(&p("src/ab")));
        assert!(!p("42").overlaps(&Target::Task("42".into())));
        assert!(Target::Task("42".into()).overlaps(&Target::Task("42".into())));
        assert!(branches_meet("", "main") && branches_meet("x", "x") && !branches_meet("x", "y"));
    }

    #[test]
    fn a_holder_blocks_others_and_renews_its_own() {
        let mut book = Book::new(vec![row("a", "s1", &p("src"), ReservationStatus::Held, 1)]);
        book.settle(CLOCK);
        match book.ask(&ask("s2", vec![p("src/x.rs")]), CLOCK, &mut ids()) {
            Outcome::Blocked(b) => assert_eq!(b[0].row, 0),
            other => panic!("{other:?}"),
        }
        assert!(!book.is_changed());
        match book.ask(&ask("s1", vec![p("src")]), CLOCK, &mut ids()) {
            Outcome::Granted { rows, .. } => assert_eq!(rows, vec![0]),
            other => panic!("{other:?}"),
        }
        assert_eq!(book.rows[0].expires_us, 1_100);
    }

    #[test]
    fn lapsed_rows_end_and_the_first_waiter_gets_them() {
        let mut held = row("a", "s1", &p("src"), ReservationStatus::Held, 1);
        held.expires_us = 400;
        let w2 = row("b", "s2", &p("src/a.rs"), ReservationStatus::Waiting, 2);
        let w3 = row("c", "s3", &p("src/a.rs"), ReservationStatus::Waiting, 3);
        let w4 = row("d", "s4", &p("docs"), ReservationStatus::Waiting, 4);
        let mut book = Book::new(vec![held, w2, w3, w4]);
        book.settle(CLOCK);
        let status: Vec<i64> = book.rows.iter().map(|r| r.status).collect();
        assert_eq!(
            status,
            vec![
                ReservationStatus::Expired as i64,
                ReservationStatus::Held as i64,
                ReservationStatus::Waiting as i64,
                ReservationStatus::Held as i64,
            ]
        );
        assert_eq!(book.granted_from_queue(CLOCK).len(), 2);
    }

    #[test]
    fn a_request_queues_behind_earlier_waiters_and_thieves_go_past() {
        let held = row("a", "s1", &p("src"), ReservationStatus::Held, 1);
        let waiting = row("b", "s2", &p("src"), ReservationStatus::Waiting, 2);
        let mut book = Book::new(vec![held, waiting]);
        let mut late = ask("s3", vec![p("src/z.rs")]);
        late.wait_us = 100;
        match book.ask(&late, CLOCK, &mut ids()) {
            Outcome::Queued { rows, blockers } => {
                assert_eq!(rows, vec![2]);
                assert_eq!(blockers.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        let mut thief = ask("s4", vec![p("src")]);
        thief.steal = true;
        match book.ask(&thief, CLOCK, &mut ids()) {
            Outcome::Granted { taken_over, .. } => assert_eq!(taken_over, vec![0]),
            other => panic!("{other:?}"),
        }
        assert_eq!(book.rows[0].ended_by, "s4");
    }

    #[test]
    fn a_request_is_granted_whole_or_not_at_all() {
        let held = row("a", "s1", &p("b"), ReservationStatus::Held, 1);
        let mut book = Book::new(vec![held]);
        assert!(matches!(book.ask(&ask("s2", vec![p("a"), p("b")]), CLOCK, &mut ids()), Outcome::Blocked(_)));
        assert_eq!(book.rows.len(), 1);
        // Queued as one request: granted together once the holder is gone.
        let mut wait = ask("s2", vec![p("a"), p("b")]);
        wait.wait_us = 1_000;
        assert!(matches!(book.ask(&wait, CLOCK, &mut ids()), Outcome::Queued { .. }));
        let next = Clock { now_us: 600, revision: 11, ttl_us: 600 };
        book.end_of("s1", ReservationStatus::Released, next, |_| true);
        book.settle(next);
        assert!(book.rows[1..].iter().all(|r| r.is(ReservationStatus::Held)));
    }
}
