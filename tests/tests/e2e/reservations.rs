//! ReservationService: grants, refusals naming the holder, renewals, releases, waits handed on
//! first come first served, lapses, takeovers and who may take over, sessions that end or are
//! resumed, the cap, bad input; and the race: of any number of overlapping requests exactly
//! one wins, on one server and on two over one Postgres, checked against the event history.
//!
//! BATON_RESERVATION_ROUNDS sets the race's rounds (default 200).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use baton_proto::v1::{
    AgentKind, EndSessionRequest, EventKind, GetBriefRequest, ListReservationsRequest, ReleaseRequest,
    RenewReservationsRequest, Reservation, ReservationEnforcement, ReservationStatus, ReserveRequest,
    ReserveResponse, ResumeSessionRequest, SessionStatus, SetReservationSettingsRequest, StartSessionRequest,
    event, resume_session_request,
};
use baton_tests::{Backend, Clients, Server, both};
use tonic::Code;

use crate::access::{token, with};
use crate::{all_events, assert_gapless, code, project, start, write};

/// A live session of `user` on `host`.
async fn session(c: &mut Clients, p: &str, host: &str, user: &str) -> String {
    let s = start(
        c,
        StartSessionRequest {
            project: p.into(),
            agent: AgentKind::ClaudeCode as i32,
            host: host.into(),
            user: user.into(),
            branch: "main".into(),
            write: write(),
            ..Default::default()
        },
    )
    .await;
    s.id
}

fn ask(p: &str, session: &str, paths: &[&str], tasks: &[&str]) -> ReserveRequest {
    ReserveRequest {
        project: p.into(),
        session_id: session.into(),
        paths: paths.iter().map(|s| (*s).to_owned()).collect(),
        tasks: tasks.iter().map(|s| (*s).to_owned()).collect(),
        reason: format!("work of {session}"),
        write: write(),
        ..Default::default()
    }
}

async fn reserve(c: &mut Clients, request: ReserveRequest) -> ReserveResponse {
    c.reservations.reserve(request).await.unwrap().into_inner()
}

async fn live(c: &mut Clients, p: &str) -> Vec<Reservation> {
    let request = ListReservationsRequest { project: p.into(), ..Default::default() };
    c.reservations.list_reservations(request).await.unwrap().into_inner().reservations
}

fn release(p: &str, session: &str) -> ReleaseRequest {
    ReleaseRequest { project: p.into(), session_id: session.into(), write: write(), ..Default::default() }
}

async fn grant_refuse_renew_release(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let a = session(&mut c, &p, "laptop-a", "ann").await;
    let b = session(&mut c, &p, "laptop-b", "bob").await;

    let got = reserve(&mut c, ask(&p, &a, &["./src//auth/"], &["#42"])).await;
    assert!(got.granted);
    assert_eq!(got.reservations.len(), 2);
    assert_eq!(got.reservations[0].path, "src/auth", "paths are stored canonical");
    assert_eq!(got.reservations[1].task, "#42");
    let held = &got.reservations[0];
    assert_eq!(held.status, ReservationStatus::Held as i32);
    assert_eq!(held.holder.as_ref().unwrap().host, "laptop-a");
    let lapse = held.expires_at.unwrap().seconds - held.granted_at.unwrap().seconds;
    assert!((599..=601).contains(&lapse), "the default time to live is 10 minutes, got {lapse} s");

    // A file inside the directory, and the task, are refused with the holder named; a sibling
    // directory whose name starts the same is not in the way.
    let refused = reserve(&mut c, ask(&p, &b, &["src/auth/jwt.rs"], &[])).await;
    assert!(!refused.granted && refused.reservations.is_empty());
    let blocker = refused.blockers[0].reservation.as_ref().unwrap();
    assert_eq!(
        (blocker.session_id.as_str(), refused.blockers[0].requested.as_str()),
        (a.as_str(), "src/auth/jwt.rs")
    );
    assert_eq!(blocker.holder.as_ref().unwrap().host, "laptop-a");
    assert_eq!(blocker.reason, format!("work of {a}"));
    assert!(blocker.granted_at.is_some());
    assert_eq!(refused.result.unwrap().revision, 0, "a refusal writes nothing");
    assert!(!reserve(&mut c, ask(&p, &b, &[], &["#42"])).await.granted);
    assert!(reserve(&mut c, ask(&p, &b, &["src/authz"], &["#43"])).await.granted);
    // All or nothing: one blocked target refuses the whole request.
    assert!(!reserve(&mut c, ask(&p, &b, &["docs", "src"], &[])).await.granted);
    assert!(live(&mut c, &p).await.iter().all(|r| r.path != "docs"));

    // Asking again for what one holds renews it; a renewal tells what was lost.
    assert!(reserve(&mut c, ask(&p, &a, &["src/auth"], &[])).await.granted);
    let renewed = c
        .reservations
        .renew_reservations(RenewReservationsRequest {
            project: p.clone(),
            session_id: a.clone(),
            known_ids: got.reservations.iter().map(|r| r.id.clone()).collect(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renewed.held.len(), 2);
    assert!(renewed.lost.is_empty());
    assert_eq!(renewed.settings.unwrap().enforcement, ReservationEnforcement::Warn as i32);

    // Filtered listings: what overlaps a path (as a pre-tool hook asks), a session's.
    let request = ListReservationsRequest {
        project: p.clone(),
        paths: vec!["src/auth/jwt.rs".into()],
        ..Default::default()
    };
    let overlapping = c.reservations.list_reservations(request).await.unwrap().into_inner();
    assert_eq!(overlapping.reservations.len(), 1);
    assert_eq!(overlapping.reservations[0].session_id, a);
    assert!(overlapping.as_of_revision > 0);

    // Released by target: the file is free for the other session.
    let mut by_target = release(&p, &a);
    by_target.paths = vec!["src/auth".into()];
    let released = c.reservations.release(by_target).await.unwrap().into_inner();
    assert_eq!(released.released.len(), 1);
    assert_eq!(released.released[0].status, ReservationStatus::Released as i32);
    assert!(reserve(&mut c, ask(&p, &b, &["src/auth/jwt.rs"], &[])).await.granted);
    // Releasing nothing writes nothing.
    let mut nothing = release(&p, &a);
    nothing.paths = vec!["nowhere".into()];
    assert!(c.reservations.release(nothing).await.unwrap().into_inner().result.is_none());

    // Every change was one event, gapless.
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let changes: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::ReservationsChanged as i32)
        .filter_map(|e| match &e.value {
            Some(event::Value::Reservations(r)) => Some(r.reservations.len()),
            _ => None,
        })
        .collect();
    assert_eq!(changes, vec![2, 2, 1, 1, 1], "grant, grant, renew, release, grant");
}
both!(grant_refuse_renew_release);

/// Waits are served first come first served, handed on by the release; a wait runs out.
async fn waits_are_served_in_order(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let a = session(&mut c, &p, "h", "u").await;
    let b = session(&mut c, &p, "h", "u").await;
    let d = session(&mut c, &p, "h", "u").await;
    assert!(reserve(&mut c, ask(&p, &a, &["src"], &[])).await.granted);

    let waiter = |session: String, delay: u64| {
        let mut c = c.clone();
        let p = p.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let mut request = ask(&p, &session, &["src/lib.rs"], &[]);
            request.wait_seconds = 30;
            let got = reserve(&mut c, request).await;
            (got, Instant::now())
        })
    };
    let first = waiter(b.clone(), 0);
    let second = waiter(d.clone(), 300);
    tokio::time::sleep(Duration::from_millis(800)).await;
    // Both wait, in order; the listing shows them after the holder.
    let queue = live(&mut c, &p).await;
    let order: Vec<(&str, i32)> = queue.iter().map(|r| (r.session_id.as_str(), r.status)).collect();
    assert_eq!(
        order,
        vec![
            (a.as_str(), ReservationStatus::Held as i32),
            (b.as_str(), ReservationStatus::Waiting as i32),
            (d.as_str(), ReservationStatus::Waiting as i32)
        ]
    );
    // Someone who does not wait is refused: the file is held, and waited for.
    let e = session(&mut c, &p, "h", "u").await;
    assert!(!reserve(&mut c, ask(&p, &e, &["src/lib.rs"], &[])).await.granted);

    let released = c.reservations.release(release(&p, &a)).await.unwrap().into_inner();
    assert_eq!(released.granted.len(), 1, "the release hands the file to the first waiter");
    assert_eq!(released.granted[0].session_id, b);
    let (got, _) = first.await.unwrap();
    assert!(got.granted);
    assert_eq!(got.reservations[0].session_id, b);
    // The second is still waiting; it gets the file when the first releases it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished());
    c.reservations.release(release(&p, &b)).await.unwrap();
    let (got, _) = second.await.unwrap();
    assert!(got.granted && got.reservations[0].session_id == d);

    // A wait that runs out: refused, its place in the queue gone.
    let mut short = ask(&p, &e, &["src"], &[]);
    short.wait_seconds = 1;
    let started = Instant::now();
    let got = reserve(&mut c, short).await;
    assert!(!got.granted && got.blockers[0].reservation.as_ref().unwrap().session_id == d);
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(live(&mut c, &p).await.len(), 1, "the ended wait left the queue");
}
both!(waits_are_served_in_order);

/// A holder that stops renewing loses its reservation after the time to live, and the first
/// waiter gets it at that moment; the old holder's renewal says it expired.
async fn lapses_hand_on_to_the_waiter(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let settings = SetReservationSettingsRequest {
        project: p.clone(),
        ttl_seconds: Some(2),
        write: write(),
        ..Default::default()
    };
    let set = c.reservations.set_reservation_settings(settings).await.unwrap().into_inner();
    assert_eq!(set.settings.unwrap().ttl_seconds, 2);
    let a = session(&mut c, &p, "h", "u").await;
    let b = session(&mut c, &p, "h", "u").await;
    let held = reserve(&mut c, ask(&p, &a, &[], &["deploy"])).await;
    let mut wait = ask(&p, &b, &[], &["deploy"]);
    wait.wait_seconds = 20;
    let started = Instant::now();
    let got = reserve(&mut c, wait).await;
    assert!(got.granted, "{got:?}");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(1500) && waited < Duration::from_secs(10), "waited {waited:?}");
    let renewed = c
        .reservations
        .renew_reservations(RenewReservationsRequest {
            project: p.clone(),
            session_id: a.clone(),
            known_ids: vec![held.reservations[0].id.clone()],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(renewed.held.is_empty());
    assert_eq!(renewed.lost[0].status, ReservationStatus::Expired as i32);
    // The lapse was an event, in the same write as the grant.
    let events = all_events(&mut c, &p).await;
    let last = events.iter().rev().find(|e| e.kind == EventKind::ReservationsChanged as i32).unwrap();
    let Some(event::Value::Reservations(change)) = &last.value else { panic!() };
    let statuses: HashSet<i32> = change.reservations.iter().map(|r| r.status).collect();
    assert!(statuses.contains(&(ReservationStatus::Expired as i32)));
    assert!(statuses.contains(&(ReservationStatus::Held as i32)));
}
both!(lapses_hand_on_to_the_waiter);

/// Ending a session ends its reservations; a resume hands them to the successor.
async fn sessions_take_their_reservations_along(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let a = session(&mut c, &p, "h", "u").await;
    let b = session(&mut c, &p, "h", "u").await;
    assert!(reserve(&mut c, ask(&p, &a, &["api"], &[])).await.granted);
    assert!(reserve(&mut c, ask(&p, &b, &["web"], &[])).await.granted);
    let end = EndSessionRequest {
        session_id: a.clone(),
        status: SessionStatus::Completed as i32,
        write: write(),
        ..Default::default()
    };
    c.sessions.end_session(end).await.unwrap();
    let left: Vec<String> = live(&mut c, &p).await.into_iter().map(|r| r.path).collect();
    assert_eq!(left, vec!["web".to_owned()]);

    // b goes idle and is resumed elsewhere: the successor holds "web".
    crate::go_idle(&mut c, &b).await;
    let resume = ResumeSessionRequest {
        project: p.clone(),
        target: Some(resume_session_request::Target::SessionId(b.clone())),
        host: "laptop-2".into(),
        write: write(),
        ..Default::default()
    };
    let next = c.sessions.resume_session(resume).await.unwrap().into_inner().session.unwrap();
    let now = live(&mut c, &p).await;
    assert_eq!(now.len(), 1);
    assert_eq!((now[0].session_id.as_str(), now[0].path.as_str()), (next.id.as_str(), "web"));
    assert_eq!(now[0].holder.as_ref().unwrap().host, "laptop-2");

    // The brief: the successor reads that it holds them; another session, who does.
    let brief = |session: &str| GetBriefRequest {
        project: p.clone(),
        session_id: session.into(),
        ..Default::default()
    };
    let text = c.brief.get_brief(brief(&next.id)).await.unwrap().into_inner().brief.unwrap().text;
    assert!(text.contains("Reserved now") && text.contains("web — yours"), "{text}");
    let other = session(&mut c, &p, "h", "u").await;
    let text = c.brief.get_brief(brief(&other)).await.unwrap().into_inner().brief.unwrap().text;
    let short = &next.id[next.id.len() - 8..];
    assert!(text.contains(&format!("web — claude-code {short} (u@laptop-2)")), "{text}");
}
both!(sessions_take_their_reservations_along);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_session_cannot_reserve() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let a = session(&mut c, &p, "h", "u").await;
    let end = EndSessionRequest {
        session_id: a.clone(),
        status: SessionStatus::Completed as i32,
        write: write(),
        ..Default::default()
    };
    c.sessions.end_session(end).await.unwrap();
    let (status, message) = code(c.reservations.reserve(ask(&p, &a, &["x"], &[])).await);
    assert_eq!(status, Code::FailedPrecondition);
    assert!(message.contains("completed") && message.contains("start or resume"), "{message}");
}

/// Taking over: the same user with the same token, or an admin; the old holder is told.
async fn takeovers(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let admin = token(&server, &["create", "--name", "root", "--role", "admin"]);
    let ann = token(&server, &["create", "--name", "ann", "--role", "writer"]);
    let bob = token(&server, &["create", "--name", "bob", "--role", "writer"]);
    let mut c = server.clients().await;
    let p = project();
    let start_as = |secret: &str, user: &str| {
        with(
            StartSessionRequest {
                project: p.clone(),
                agent: AgentKind::Codex as i32,
                user: user.into(),
                host: format!("{user}-box"),
                write: write(),
                ..Default::default()
            },
            secret,
        )
    };
    let id = |r: baton_proto::v1::StartSessionResponse| r.session.unwrap().id;
    let a1 = id(c.sessions.start_session(start_as(&ann, "ann")).await.unwrap().into_inner());
    let a2 = id(c.sessions.start_session(start_as(&ann, "ann")).await.unwrap().into_inner());
    let b1 = id(c.sessions.start_session(start_as(&bob, "bob")).await.unwrap().into_inner());
    let held = c.reservations.reserve(with(ask(&p, &a1, &["core"], &[]), &ann)).await.unwrap().into_inner();
    assert!(held.granted);

    let mut steal = ask(&p, &b1, &["core/x.rs"], &[]);
    steal.steal = true;
    let (status, message) = code(c.reservations.reserve(with(steal.clone(), &bob)).await);
    assert_eq!(status, Code::PermissionDenied);
    assert!(message.contains("ann") && message.contains("admin"), "{message}");

    // Ann's other session takes it over; then an admin takes it from her.
    let mut mine = ask(&p, &a2, &["core"], &[]);
    mine.steal = true;
    let took = c.reservations.reserve(with(mine, &ann)).await.unwrap().into_inner();
    assert!(took.granted);
    assert_eq!(took.taken_over[0].session_id, a1);
    assert_eq!(took.taken_over[0].status, ReservationStatus::TakenOver as i32);
    steal.write = write();
    let (status, _) = code(c.reservations.reserve(with(steal.clone(), &bob)).await);
    assert_eq!(status, Code::PermissionDenied);
    steal.write = write();
    let by_admin = c.reservations.reserve(with(steal, &admin)).await.unwrap().into_inner();
    assert!(by_admin.granted && by_admin.taken_over[0].session_id == a2);

    // The first holder's renewal says who took it.
    let renew = RenewReservationsRequest {
        project: p.clone(),
        session_id: a1.clone(),
        known_ids: vec![held.reservations[0].id.clone()],
    };
    let lost = c.reservations.renew_reservations(with(renew, &ann)).await.unwrap().into_inner().lost;
    assert_eq!(lost[0].status, ReservationStatus::TakenOver as i32);
    assert_eq!(lost[0].ended_by_session_id, a2);

    // A reader may list, not reserve.
    let reader = token(&server, &["create", "--name", "viewer", "--role", "reader"]);
    let (status, _) = code(c.reservations.reserve(with(ask(&p, &b1, &["z"], &[]), &reader)).await);
    assert_eq!(status, Code::PermissionDenied);
    let listed = c
        .reservations
        .list_reservations(with(
            ListReservationsRequest { project: p.clone(), ..Default::default() },
            &reader,
        ))
        .await
        .unwrap();
    assert_eq!(listed.into_inner().reservations.len(), 1);
}
both!(takeovers);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_nothing_granted() {
    let server = Server::start_with(Backend::Sqlite, &["--max-reservations", "3"]).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let a = session(&mut c, &p, "h", "u").await;
    let long = "x/".repeat(600);
    let many: Vec<String> = (0..101).map(|i| format!("f{i}")).collect();
    let cases: Vec<(ReserveRequest, &str)> = vec![
        (ask(&p, &a, &["/etc/passwd"], &[]), "absolute"),
        (ask(&p, &a, &["src/../../etc"], &[]), ".."),
        (ask(&p, &a, &["./"], &[]), "names no file"),
        (ask(&p, &a, &[""], &[]), "names no file"),
        (ask(&p, &a, &[long.as_str()], &[]), "limit is 1024"),
        (ask(&p, &a, &["a\nb"], &[]), "control characters"),
        (ask(&p, &a, &[], &[" "]), "is empty"),
        (ask(&p, &a, &[], &[]), "are empty"),
        (ReserveRequest { paths: many, ..ask(&p, &a, &[], &[]) }, "at most 100"),
        (ask(&p, "not-a-uuid", &["x"], &[]), "session_id"),
        (ReserveRequest { wait_seconds: 601, ..ask(&p, &a, &["x"], &[]) }, "wait_seconds"),
        (ask("", &a, &["x"], &[]), "project"),
    ];
    for (request, says) in cases {
        let (status, message) = code(c.reservations.reserve(request).await);
        assert_eq!(status, Code::InvalidArgument, "{says}: {message}");
        assert!(message.contains(says), "expected {says:?} in {message:?}");
    }
    let (status, _) =
        code(c.reservations.reserve(ask(&p, &uuid::Uuid::now_v7().to_string(), &["x"], &[])).await);
    assert_eq!(status, Code::NotFound);
    let settings =
        SetReservationSettingsRequest { project: p.clone(), ttl_seconds: Some(1), ..Default::default() };
    let (status, message) = code(c.reservations.set_reservation_settings(settings).await);
    assert_eq!(status, Code::InvalidArgument, "{message}");
    assert!(live(&mut c, &p).await.is_empty(), "nothing was granted by mistake");

    // The cap: three live, the fourth refused naming the flag.
    assert!(reserve(&mut c, ask(&p, &a, &["a", "b"], &[])).await.granted);
    assert!(reserve(&mut c, ask(&p, &a, &["c"], &[])).await.granted);
    let (status, message) = code(c.reservations.reserve(ask(&p, &a, &["d"], &[])).await);
    assert_eq!(status, Code::ResourceExhausted);
    assert!(message.contains("at most 3") && message.contains("--max-reservations"), "{message}");
    // Renewing what it holds is not a new one.
    assert!(reserve(&mut c, ask(&p, &a, &["c"], &[])).await.granted);
}

/// What a race round asks: 16 sessions, overlapping targets of one round (the directory, a
/// file in it, the same file, the task).
fn round_targets(round: usize, who: usize) -> (Vec<String>, Vec<String>) {
    match who % 4 {
        0 => (vec![format!("r{round}")], vec![]),
        1 => (vec![format!("r{round}/f.rs")], vec![]),
        2 => (vec![format!("r{round}/f.rs"), format!("other{round}-{who}")], vec![format!("t{round}")]),
        _ => (vec![format!("r{round}/f.rs")], vec![format!("t{round}")]),
    }
}

/// Replays the reservation events: no two sessions ever hold overlapping reservations at one
/// revision.
fn check_history(events: &[baton_proto::v1::Event]) -> usize {
    let mut held: HashMap<String, Reservation> = HashMap::new();
    let mut grants = 0;
    for e in events {
        let Some(event::Value::Reservations(change)) = &e.value else { continue };
        for r in &change.reservations {
            if r.status == ReservationStatus::Held as i32 {
                if !held.contains_key(&r.id) {
                    grants += 1;
                }
                held.insert(r.id.clone(), r.clone());
            } else {
                held.remove(&r.id);
            }
        }
        let rows: Vec<&Reservation> = held.values().collect();
        for (i, x) in rows.iter().enumerate() {
            for y in &rows[i + 1..] {
                if x.session_id == y.session_id {
                    continue;
                }
                let overlap = if x.path.is_empty() || y.path.is_empty() {
                    !x.task.is_empty() && x.task == y.task
                } else {
                    x.path == y.path
                        || y.path.starts_with(&format!("{}/", x.path))
                        || x.path.starts_with(&format!("{}/", y.path))
                };
                assert!(!overlap, "at revision {} {x:?} and {y:?} are both held", e.revision);
            }
        }
    }
    grants
}

async fn race(servers: &[&Server]) {
    let rounds: usize =
        std::env::var("BATON_RESERVATION_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let p = project();
    let mut clients = Vec::new();
    for s in servers {
        clients.push(s.clients().await);
    }
    let mut sessions = Vec::new();
    for i in 0..16 {
        let n = clients.len();
        let c = &mut clients[i % n];
        sessions.push(session(c, &p, &format!("host-{i}"), "u").await);
    }
    for round in 0..rounds {
        let mut tasks = Vec::new();
        for (who, id) in sessions.iter().enumerate() {
            let mut c = clients[who % clients.len()].clone();
            let (paths, tasks_) = round_targets(round, who);
            let request = ReserveRequest {
                project: p.clone(),
                session_id: id.clone(),
                paths,
                tasks: tasks_,
                write: write(),
                ..Default::default()
            };
            tasks.push(tokio::spawn(async move { (who, c.reservations.reserve(request).await) }));
        }
        let mut winners = Vec::new();
        for t in tasks {
            let (who, got) = t.await.unwrap();
            let got = got.unwrap_or_else(|e| panic!("round {round}: {e}")).into_inner();
            if got.granted {
                winners.push(who);
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let mut c = clients[0].clone();
        c.reservations.release(release(&p, &sessions[winners[0]])).await.unwrap();
    }
    let mut c = clients[0].clone();
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    assert!(check_history(&events) >= rounds);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_on_one_sqlite_server() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    race(&[&server]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_on_two_servers_over_one_postgres() {
    let a = Server::start(Backend::Postgres).await.unwrap();
    let b = Server::start_on(Backend::Postgres, &a.database_url, &[]).unwrap();
    race(&[&a, &b]).await;
}

/// Overlap is by whole components whatever the characters (accents, `%`, `_`), on both
/// backends: a directory holds its files, not its longer-named siblings.
async fn any_characters_overlap_by_components(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let a = session(&mut c, &p, "h", "u").await;
    let b = session(&mut c, &p, "h", "u").await;
    assert!(reserve(&mut c, ask(&p, &a, &["données/été_%"], &[])).await.granted);
    assert!(!reserve(&mut c, ask(&p, &b, &["données/été_%/a.md"], &[])).await.granted);
    assert!(!reserve(&mut c, ask(&p, &b, &["données"], &[])).await.granted);
    assert!(reserve(&mut c, ask(&p, &b, &["données/été_%2", "données/étéX%"], &[])).await.granted);
}
both!(any_characters_overlap_by_components);
