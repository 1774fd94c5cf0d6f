//! The web view over HTTP, on the gRPC port: sign-in and its cookie, the pages' access rules
//! (a scoped token sees only its project, on pages and live streams), CSRF and the Host
//! check, escaping, the live stream's resume, revocation ending a stream, and gRPC untouched
//! by all of it. The browser suite (tests/web) drives the same pages in Chromium.

use std::time::Duration;

use baton_proto::v1::{ListSessionsRequest, RevokeTokenRequest, StartSessionRequest};
use baton_tests::web::{Req, csrf_of, read_until, send, sign_in};
use baton_tests::{Backend, Server, both};

use crate::access::{token, with};
use crate::{project, put_note, start, start_session, write};

both!(sign_in_pages_and_sign_out);
async fn sign_in_pages_and_sign_out(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    start_session(&mut c, &p).await;
    let admin = token(&server, &["create", "--name", "alice", "--role", "admin"]);
    tokio::time::sleep(Duration::from_millis(2100)).await; // past the "no tokens yet" cache
    let addr = server.addr;

    // Signed out: every page sends the browser to sign in (htmx is told by a header).
    let reply = send(addr, &Req::get("/")).await;
    assert_eq!((reply.status, reply.header("location")), (303, Some("/signin")));
    let reply =
        send(addr, &Req::get(&format!("/sessions/rows?project={p}")).header("hx-request", "true")).await;
    assert_eq!((reply.status, reply.header("hx-redirect")), (401, Some("/signin")));

    // A wrong token is refused, with the reason; the right one signs in.
    let reply = send(addr, &Req::post("/signin", &[("token", "baton_wrong")])).await;
    assert_eq!(reply.status, 401);
    assert!(reply.body.contains("unknown access token") && reply.cookie().is_none(), "{}", reply.body);
    let reply = send(addr, &Req::post("/signin", &[("token", &admin)])).await;
    assert_eq!(reply.status, 303);
    let set = reply.header("set-cookie").unwrap();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && !set.contains(&admin), "{set}");
    let cookie = reply.cookie().unwrap();

    let page = send(addr, &Req::get("/").cookie(&cookie)).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(&p) && page.body.contains("alice"), "{}", page.body);
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe"), "{csp}");
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    let sessions = send(addr, &Req::get(&format!("/sessions?project={p}")).cookie(&cookie)).await;
    assert!(
        sessions.body.contains("ship the hub") && sessions.body.contains("dev @ laptop"),
        "{}",
        sessions.body
    );

    // Signing out needs the page's CSRF token; then the cookie no longer works.
    let csrf = csrf_of(&page.body);
    let reply = send(addr, &Req::post("/signout", &[]).cookie(&cookie)).await;
    assert_eq!(reply.status, 403, "{reply:?}");
    let reply = send(addr, &Req::post("/signout", &[("_csrf", &csrf)]).cookie(&cookie)).await;
    assert_eq!((reply.status, reply.header("location")), (303, Some("/signin")));
    assert!(reply.header("set-cookie").unwrap().contains("Max-Age=0"));
    let reply = send(addr, &Req::get("/").cookie(&cookie)).await;
    assert_eq!(reply.status, 303, "a signed-out cookie still worked");
}

both!(filters_by_user_and_branch);
async fn filters_by_user_and_branch(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let mine = start_session(&mut c, &p).await;
    let other = StartSessionRequest {
        project: p.clone(),
        agent: 2,
        host: "ci".into(),
        user: "bot".into(),
        branch: "feature/x".into(),
        goal: "other work".into(),
        write: write(),
        ..Default::default()
    };
    let theirs = start(&mut c, other).await;
    let list = |user: &str, branch: &str| ListSessionsRequest {
        project: p.clone(),
        user: user.into(),
        branch: branch.into(),
        ..Default::default()
    };
    let ids =
        |r: baton_proto::v1::ListSessionsResponse| r.sessions.into_iter().map(|s| s.id).collect::<Vec<_>>();
    assert_eq!(ids(c.sessions.list_sessions(list("dev", "")).await.unwrap().into_inner()), [mine.id]);
    assert_eq!(ids(c.sessions.list_sessions(list("", "feature/x")).await.unwrap().into_inner()), [theirs.id]);
    assert!(ids(c.sessions.list_sessions(list("dev", "feature/x")).await.unwrap().into_inner()).is_empty());
    let status = c.sessions.list_sessions(list("a\nb", "")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");

    // The page's filters are the API's.
    let cookie = sign_in(server.addr, "").await;
    let page =
        send(server.addr, &Req::get(&format!("/sessions?project={p}&branch=feature%2Fx")).cookie(&cookie))
            .await;
    assert!(page.body.contains("other work") && !page.body.contains("ship the hub"), "{}", page.body);
    let page =
        send(server.addr, &Req::get(&format!("/sessions?project={p}&status=bogus")).cookie(&cookie)).await;
    assert_eq!(page.status, 400);
    assert!(page.body.contains("not a session status"), "{}", page.body);
}

both!(scoped_tokens_see_only_their_project);
async fn scoped_tokens_see_only_their_project(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let (p, secret) = (project(), project());
    start_session(&mut c, &p).await;
    put_note(&mut c, &secret, "plans", "the secret plan", write()).await.unwrap();
    let scoped = token(&server, &["create", "--name", "worker", "--role", "reader", "--project", &p]);
    let admin = token(&server, &["create", "--name", "root", "--role", "admin"]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let addr = server.addr;
    let cookie = sign_in(addr, &scoped).await;

    let overview = send(addr, &Req::get("/").cookie(&cookie)).await;
    assert!(overview.body.contains(&p) && !overview.body.contains(&secret), "{}", overview.body);
    for path in [
        format!("/sessions?project={secret}"),
        format!("/sessions/rows?project={secret}"),
        format!("/activity?project={secret}"),
        format!("/stream?project={secret}"),
    ] {
        let reply = send(addr, &Req::get(&path).cookie(&cookie)).await;
        assert_eq!(reply.status, 403, "{path}: {reply:?}");
        assert!(!reply.body.contains("the secret plan"));
    }
    // The all-project stream carries only the token's project.
    let all = Req::get("/stream").cookie(&cookie);
    let reading =
        tokio::spawn(async move { read_until(addr, &all, "the-end", Duration::from_secs(4)).await });
    tokio::time::sleep(Duration::from_millis(800)).await;
    let note = crate::note_request(&secret, "plans", "another secret", write());
    c.memory.put_memory(with(note, &admin)).await.unwrap();
    let session = StartSessionRequest {
        project: p.clone(),
        agent: 1,
        goal: "visible".into(),
        write: write(),
        ..Default::default()
    };
    c.sessions.start_session(with(session, &admin)).await.unwrap();
    let seen = reading.await.unwrap();
    assert!(seen.contains("session started") && !seen.contains("plans"), "{seen}");
}

both!(revoking_a_token_signs_its_browsers_out);
async fn revoking_a_token_signs_its_browsers_out(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    start_session(&mut c, &p).await;
    let admin = token(&server, &["create", "--name", "root", "--role", "admin"]);
    let reader = token(&server, &["create", "--name", "viewer", "--role", "reader"]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let addr = server.addr;
    let cookie = sign_in(addr, &reader).await;
    let stream = Req::get(&format!("/stream?project={p}")).cookie(&cookie);
    let reading =
        tokio::spawn(
            async move { read_until(addr, &stream, "event: signed-out", Duration::from_secs(15)).await },
        );
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.admin.revoke_token(with(RevokeTokenRequest { name: "viewer".into() }, &admin)).await.unwrap();
    let seen = reading.await.unwrap();
    assert!(seen.contains("event: signed-out"), "the stream did not end: {seen}");
    let reply = send(addr, &Req::get("/").cookie(&cookie)).await;
    assert_eq!((reply.status, reply.header("location")), (303, Some("/signin")));
}

both!(live_stream_resumes_from_a_revision);
async fn live_stream_resumes_from_a_revision(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    for i in 0..3 {
        put_note(&mut c, &p, &format!("n{i}"), "v", write()).await.unwrap();
    }
    let addr = server.addr;
    let cookie = sign_in(addr, "").await;
    // From the URL's revision…
    let req = Req::get(&format!("/stream?project={p}&since=1")).cookie(&cookie);
    let seen = read_until(addr, &req, "id: 3", Duration::from_secs(5)).await;
    assert!(seen.contains("id: 2") && seen.contains("n1") && !seen.contains("id: 1\n"), "{seen}");
    // …or from Last-Event-ID, when the browser's own reconnect sends it.
    let req = Req::get(&format!("/stream?project={p}&since=0")).cookie(&cookie).header("last-event-id", "2");
    let seen = read_until(addr, &req, "id: 3", Duration::from_secs(5)).await;
    assert!(seen.contains("id: 3") && !seen.contains("id: 2"), "{seen}");
    let bad = send(addr, &Req::get(&format!("/stream?project={p}&kinds=nope")).cookie(&cookie)).await;
    assert_eq!(bad.status, 400);
}

both!(pages_refuse_foreign_hosts_and_cross_site_posts);
async fn pages_refuse_foreign_hosts_and_cross_site_posts(backend: Backend) {
    let server = Server::start_with(backend, &["--web-hosts", "baton.example.com"]).await.unwrap();
    let addr = server.addr;
    let reply = send(addr, &Req::get("/signin").host("evil.example:80")).await;
    assert_eq!(reply.status, 421, "{reply:?}");
    for host in ["localhost:1", "baton.example.com", "[::1]:9", "192.0.2.7"] {
        assert_eq!(send(addr, &Req::get("/signin").host(host)).await.status, 200, "{host}");
    }
    // A form posted from another site, however the browser says so.
    let reply = send(addr, &Req::post("/signin", &[]).header("origin", "http://evil.example")).await;
    assert_eq!(reply.status, 403);
    let reply = send(addr, &Req::post("/signin", &[]).header("sec-fetch-site", "cross-site")).await;
    assert_eq!(reply.status, 403);
    let reply = send(addr, &Req::post("/signin", &[]).header("sec-fetch-site", "same-origin")).await;
    assert_eq!(reply.status, 303);

    // gRPC is not the web view's: any authority, by IP or by name, is served.
    let channel = tonic::transport::Endpoint::from_shared(server.url())
        .unwrap()
        .origin("http://evil.example:1".parse().unwrap())
        .connect()
        .await
        .unwrap();
    let mut sessions = baton_proto::v1::session_service_client::SessionServiceClient::new(channel);
    let listed =
        sessions.list_sessions(ListSessionsRequest { project: project(), ..Default::default() }).await;
    assert!(listed.is_ok(), "{listed:?}");
}

both!(hostile_content_is_escaped);
async fn hostile_content_is_escaped(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let hostile = StartSessionRequest {
        project: p.clone(),
        agent: 1,
        host: "<img src=x onerror=alert(1)>".into(),
        goal: "<script>alert('goal')</script>".into(),
        write: write(),
        ..Default::default()
    };
    start(&mut c, hostile).await;
    let cookie = sign_in(server.addr, "").await;
    for path in [format!("/sessions?project={p}"), format!("/activity?project={p}"), "/".into()] {
        let page = send(server.addr, &Req::get(&path).cookie(&cookie)).await;
        assert_eq!(page.status, 200, "{path}");
        assert!(
            !page.body.contains("<script>alert") && !page.body.contains("<img src=x"),
            "{path}: {}",
            page.body
        );
        assert!(
            page.body.contains("&#60;script&#62;alert") || page.body.contains("&lt;script&gt;alert"),
            "{path}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_web_serves_grpc_only() {
    let server = Server::start_with(Backend::Sqlite, &["--no-web"]).await.unwrap();
    let mut c = server.clients().await;
    start_session(&mut c, &project()).await;
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n").await.unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut raw)).await;
    assert!(
        !String::from_utf8_lossy(&raw).contains("Baton"),
        "a page was served: {}",
        String::from_utf8_lossy(&raw)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_sessions_and_revocation_hold_across_instances() {
    let a = Server::start(Backend::Postgres).await.unwrap();
    let b = Server::start_on(Backend::Postgres, &a.database_url, &[]).unwrap();
    let mut c = a.clients().await;
    let p = project();
    start_session(&mut c, &p).await;
    let admin = token(&a, &["create", "--name", "root", "--role", "admin"]);
    let reader = token(&a, &["create", "--name", "viewer", "--role", "reader"]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    // Signed in on one server, the cookie works on the other.
    let cookie = sign_in(a.addr, &reader).await;
    let page = send(b.addr, &Req::get(&format!("/sessions?project={p}")).cookie(&cookie)).await;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(page.body.contains("ship the hub"));
    // A stream open on B ends when the token is revoked through A.
    let stream = Req::get(&format!("/stream?project={p}")).cookie(&cookie);
    let addr = b.addr;
    let reading =
        tokio::spawn(
            async move { read_until(addr, &stream, "event: signed-out", Duration::from_secs(15)).await },
        );
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.admin.revoke_token(with(RevokeTokenRequest { name: "viewer".into() }, &admin)).await.unwrap();
    assert!(reading.await.unwrap().contains("event: signed-out"));
    for server in [&a, &b] {
        let reply = send(server.addr, &Req::get("/").cookie(&cookie)).await;
        assert_eq!(reply.status, 303, "still signed in after revocation");
    }
}

both!(state_changes_need_the_csrf_token_and_the_right_role);
async fn state_changes_need_the_csrf_token_and_the_right_role(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    start_session(&mut c, &p).await;
    let admin = token(&server, &["create", "--name", "root", "--role", "admin"]);
    let reader = token(&server, &["create", "--name", "viewer", "--role", "reader"]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let addr = server.addr;
    let as_admin = sign_in(addr, &admin).await;
    let csrf = csrf_of(&send(addr, &Req::get("/").cookie(&as_admin)).await.body);
    let note = |csrf: &str| {
        Req::post(
            "/memory",
            &[("_csrf", csrf), ("project", &p), ("category", "note"), ("key", "k"), ("content", "v")],
        )
    };
    for post in [
        note("").cookie(&as_admin),
        note("0123456789abcdef0123456789abcdef").cookie(&as_admin),
        Req::post("/admin/tokens", &[("name", "x"), ("role", "reader")]).cookie(&as_admin),
        Req::post("/admin/revoke", &[("name", "viewer")]).cookie(&as_admin),
    ] {
        let reply = send(addr, &post).await;
        assert_eq!(reply.status, 403, "{post:?}: {reply:?}");
    }
    // The header htmx sends works as well as the form field.
    let reply = send(addr, &note("").cookie(&as_admin).header("x-baton-csrf", &csrf)).await;
    assert_eq!(reply.status, 303, "{reply:?}");

    // A reader may look but not write, and has no admin page.
    let as_reader = sign_in(addr, &reader).await;
    let reader_csrf = csrf_of(&send(addr, &Req::get("/").cookie(&as_reader)).await.body);
    let reply = send(addr, &note(&reader_csrf).cookie(&as_reader)).await;
    assert_eq!(reply.status, 403);
    assert!(reply.body.contains("cannot write"), "{}", reply.body);
    for path in ["/admin", "/admin/retention"] {
        assert_eq!(send(addr, &Req::get(path).cookie(&as_reader)).await.status, 403, "{path}");
    }
    let reply = send(
        addr,
        &Req::post("/admin/tokens", &[("_csrf", &reader_csrf), ("name", "mine"), ("role", "admin")])
            .cookie(&as_reader),
    )
    .await;
    assert_eq!(reply.status, 403);

    // An admin creates a token: its secret is in the page, never in a URL or the log.
    let reply = send(
        addr,
        &Req::post("/admin/tokens", &[("_csrf", &csrf), ("name", "ci"), ("role", "writer"), ("project", &p)])
            .cookie(&as_admin),
    )
    .await;
    assert_eq!(reply.status, 200);
    let at = reply.body.find("class=\"secret\">").unwrap() + 15;
    let secret = &reply.body[at..at + 70];
    assert!(secret.starts_with("baton_"), "{secret}");
    assert!(!server.log().contains(secret) && !server.log().contains(&admin), "a secret was logged");
}

both!(pages_answer_bad_input_clearly);
async fn pages_answer_bad_input_clearly(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = start_session(&mut c, &p).await;
    let addr = server.addr;
    let cookie = sign_in(addr, "").await;
    let cases: [(String, u16, &str); 9] = [
        (format!("/session?id={}", uuid::Uuid::now_v7()), 404, "no session"),
        ("/session?id=nope".into(), 400, "not a valid uuid"),
        ("/compare?a=&b=".into(), 400, "name a checkpoint"),
        ("/sessions?project=".into(), 400, "project"),
        (format!("/activity?project={p}&before=0"), 400, "before must be a revision"),
        (format!("/search?project={p}&q=x&kind=files"), 400, "not memory, checkpoint or session"),
        (format!("/logs?project={p}&key=none"), 404, "no agent log"),
        (format!("/session?id={}&part=99", s.id), 200, "No checkpoints yet"),
        ("/nothing/here".into(), 404, "no page at this address"),
    ];
    for (path, status, says) in cases {
        let reply = send(addr, &Req::get(&path).cookie(&cookie)).await;
        assert_eq!(reply.status, status, "{path}: {}", reply.body);
        assert!(reply.body.contains(says), "{path}: {}", reply.body);
    }
    // A memory form naming no category the API knows.
    let csrf = csrf_of(&send(addr, &Req::get("/").cookie(&cookie)).await.body);
    let reply = send(
        addr,
        &Req::post(
            "/memory",
            &[("_csrf", &csrf), ("project", &p), ("category", "secrets"), ("content", "x")],
        )
        .cookie(&cookie),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert!(reply.body.contains("not a memory category"), "{}", reply.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_counts_as_one_request_against_its_tokens_rate() {
    let server =
        Server::start_with(Backend::Sqlite, &["--rate-limit", "1", "--rate-burst", "4"]).await.unwrap();
    let mut c = server.clients().await;
    // Twelve projects: the overview reads each one's sessions and changes (dozens of calls).
    for _ in 0..12 {
        start_session(&mut c, &project()).await;
    }
    let reader = token(&server, &["create", "--name", "viewer", "--role", "reader"]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let cookie = sign_in(server.addr, &reader).await;
    let page = send(server.addr, &Req::get("/").cookie(&cookie)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    // Past the burst, pages are refused like any other request.
    let mut refused = 0;
    for _ in 0..8 {
        let reply = send(server.addr, &Req::get("/").cookie(&cookie)).await;
        if reply.status == 429 {
            refused += 1;
            assert!(reply.body.contains("rate"), "{}", reply.body);
        }
    }
    assert!(refused > 0, "eight pages in a row stayed under a rate of 1/s with a burst of 4");
}

both!(stats_of_sessions_only_count_nothing_else);
async fn stats_of_sessions_only_count_nothing_else(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    start_session(&mut c, &p).await;
    put_note(&mut c, &p, "k", "v", write()).await.unwrap();
    let stats = |sessions_only| baton_proto::v1::GetStatsRequest { project: p.clone(), sessions_only };
    let full = c.admin.get_stats(stats(false)).await.unwrap().into_inner().projects.remove(0);
    let quick = c.admin.get_stats(stats(true)).await.unwrap().into_inner().projects.remove(0);
    assert_eq!(
        (full.head_revision, full.sessions.clone(), full.memory_entries),
        (2, quick.sessions.clone(), 1)
    );
    assert_eq!((quick.head_revision, quick.memory_entries, quick.events), (2, 0, 0));
    assert_eq!(quick.sessions.get("active"), Some(&1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_failures_are_limited_like_other_authentication() {
    let server =
        Server::start_with(Backend::Sqlite, &["--auth-failure-rate", "1", "--auth-failure-burst", "3"])
            .await
            .unwrap();
    let admin = token(&server, &["create", "--name", "root", "--role", "admin"]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let mut statuses = Vec::new();
    for i in 0..8 {
        let reply = send(server.addr, &Req::post("/signin", &[("token", &format!("baton_guess{i}"))])).await;
        statuses.push(reply.status);
        if reply.status == 429 {
            assert!(reply.body.contains("too many"), "{}", reply.body);
        }
    }
    assert!(statuses.contains(&429), "eight wrong tokens in a row were never slowed down: {statuses:?}");
    assert!(statuses[..3].iter().all(|s| *s == 401), "{statuses:?}");
    // The address is held back, not the token: the right one still signs in once it waits.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = sign_in(server.addr, &admin).await;
}

/// The reservations page: who holds what and why, who waits in what order, escaped; its
/// tables come alone for the live refresh, fed by a stream of reservation events only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_page_shows_holders_and_the_queue() {
    use baton_proto::v1::ReserveRequest;
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let holder = start_session(&mut c, &p).await.id;
    let waiter = start_session(&mut c, &p).await.id;
    let ask = |session: &str, wait: u32, reason: &str| ReserveRequest {
        project: p.clone(),
        session_id: session.into(),
        paths: vec!["src/auth".into()],
        reason: reason.into(),
        wait_seconds: wait,
        write: write(),
        ..Default::default()
    };
    let cookie = sign_in(server.addr, "").await;
    let empty = send(server.addr, &Req::get(&format!("/reservations?project={p}")).cookie(&cookie)).await;
    assert!(empty.status == 200 && empty.body.contains("Nobody holds anything"), "{}", empty.body);
    c.reservations.reserve(ask(&holder, 0, "<script>alert(1)</script> auth rewrite")).await.unwrap();
    let mut w = c.clone();
    let second = ask(&waiter, 30, "next in line");
    let queued = tokio::spawn(async move { w.reservations.reserve(second).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let page = send(server.addr, &Req::get(&format!("/reservations?project={p}")).cookie(&cookie)).await;
    assert_eq!(page.status, 200);
    let body = &page.body;
    assert!(
        body.contains("<code>src/auth</code>") && body.contains("laptop") && body.contains("next in line"),
        "{body}"
    );
    assert!(!body.contains("<script>alert") && body.contains("auth rewrite"), "{body}");
    assert!(body.contains("kinds=reservations") && body.contains("<h2>Waiting</h2>"), "{body}");
    let tables =
        send(server.addr, &Req::get(&format!("/reservations/tables?project={p}")).cookie(&cookie)).await;
    assert!(tables.status == 200 && tables.body.contains("next in line") && !tables.body.contains("<html"));
    // The stream of reservation events carries the release that hands the path on.
    let req = Req::get(&format!("/stream?project={p}&kinds=reservations")).cookie(&cookie);
    let reading = tokio::spawn(async move {
        read_until(server.addr, &req, "released src/auth", Duration::from_secs(10)).await
    });
    let release = baton_proto::v1::ReleaseRequest {
        project: p.clone(),
        session_id: holder.clone(),
        write: write(),
        ..Default::default()
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.reservations.release(release).await.unwrap();
    assert!(queued.await.unwrap().unwrap().into_inner().granted);
    let seen = reading.await.unwrap();
    assert!(seen.contains("released src/auth") && seen.contains("holds src/auth"), "{seen}");
}

/// A session's page lists its commits; a commit's page names the session, the prompt, the
/// task and the decisions near it, its stored text escaped; an unknown commit is a 404 that
/// says how commits get recorded; the activity line of a commit event links the commit page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_pages_answer_why() {
    use baton_proto::v1::{
        CheckpointKind, CheckpointState, CommitLink, CommitMadeBy, CommitSeenBy, CreateCheckpointRequest,
        Decision, NewCommitLink, RecordCommitsRequest,
    };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = start_session(&mut c, &p).await.id;
    let cookie = sign_in(server.addr, "").await;
    let page = send(server.addr, &Req::get(&format!("/session?id={s}")).cookie(&cookie)).await;
    assert!(page.status == 200 && page.body.contains("No commits recorded"), "{}", page.body);
    let state = CheckpointState {
        decisions: vec![Decision {
            decision: "retry only GETs".into(),
            rationale: "POSTs may charge twice".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let before = c
        .checkpoints
        .create_checkpoint(CreateCheckpointRequest {
            session_id: s.clone(),
            kind: CheckpointKind::Manual as i32,
            state: Some(state),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .checkpoint
        .unwrap()
        .id;
    let commit = "5ad".repeat(13) + "5";
    let link = CommitLink {
        commit_id: commit.clone(),
        session_id: s.clone(),
        checkpoint_id: before,
        made_by: CommitMadeBy::Agent as i32,
        seen_by: CommitSeenBy::ToolCall as i32,
        subject: "<script>alert(1)</script> Add retries".into(),
        files: vec!["src/fetch.rs".into()],
        prompt: "make the fetcher retry on 503".into(),
        task: "Add retries".into(),
        ..Default::default()
    };
    let request = RecordCommitsRequest {
        project: p.clone(),
        links: vec![NewCommitLink { link: Some(link), ..Default::default() }],
        write: write(),
    };
    c.commits.record_commits(request).await.unwrap();
    let page = send(server.addr, &Req::get(&format!("/session?id={s}")).cookie(&cookie)).await;
    assert!(page.body.contains("/commit?project=") && page.body.contains("5ad5ad5ad5ad"), "{}", page.body);
    assert!(!page.body.contains("<script>alert") && page.body.contains("Add retries"), "{}", page.body);
    let encoded: String = form_urlencoded::byte_serialize(p.as_bytes()).collect();
    let commit_page =
        send(server.addr, &Req::get(&format!("/commit?project={encoded}&id={commit}")).cookie(&cookie)).await;
    let body = &commit_page.body;
    assert_eq!(commit_page.status, 200, "{body}");
    for part in [
        "make the fetcher retry on 503",
        "Add retries (in_progress)",
        "retry only GETs",
        "POSTs may charge twice",
        "src/fetch.rs",
        "the agent",
        &format!("baton resume --session {s}"),
    ] {
        assert!(body.contains(part), "{part}: {body}");
    }
    assert!(!body.contains("<script>alert"), "{body}");
    let missing = send(
        server.addr,
        &Req::get(&format!("/commit?project={encoded}&id={}", "0".repeat(40))).cookie(&cookie),
    )
    .await;
    assert!(missing.status == 404 && missing.body.contains("--post-commit"), "{}", missing.body);
    let bad =
        send(server.addr, &Req::get(&format!("/commit?project={encoded}&id=xyz")).cookie(&cookie)).await;
    assert!(bad.status == 400 && bad.body.contains("40 or 64 hex"), "{} {}", bad.status, bad.body);
    let activity =
        send(server.addr, &Req::get(&format!("/activity?project={encoded}")).cookie(&cookie)).await;
    assert!(activity.body.contains(&format!("id={commit}")), "{}", activity.body);
}
