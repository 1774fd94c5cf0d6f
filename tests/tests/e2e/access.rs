//! Access: open while no token exists; then every request needs one; roles and project
//! scope on every service; revocation; the token's name recorded as the actor.

use std::time::Duration;

use baton_proto::v1::{
    CheckpointKind, CreateCheckpointRequest, CreateTokenRequest, GetBriefRequest, GetSessionRequest,
    GetStatsRequest, ListEventsRequest, ListMemoryRequest, ListTokensRequest, RevokeTokenRequest,
    StartSessionRequest, WatchCursor, WatchRequest,
};
use baton_tests::{Backend, ClientEnv, Server, both, git_repo};
use tonic::Code;
use tonic::metadata::MetadataValue;

use crate::{project, put_note, start_session, write};

/// Runs `baton-server token …` against the server's database.
pub fn token(server: &Server, args: &[&str]) -> String {
    let out = std::process::Command::new(baton_tests::binary("baton-server"))
        .args(["--database-url", &server.database_url, "token"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

pub fn with<T>(msg: T, secret: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {secret}")).unwrap());
    r
}

async fn tokens_roles_and_scope(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let (p, other) = (project(), project());
    // Open: no token needed.
    let s = start_session(&mut c, &p).await;
    let admin = token(&server, &["create", "--name", "alice", "--role", "admin"]);
    let reader = token(&server, &["create", "--name", "dashboard", "--role", "reader"]);
    let scoped = token(&server, &["create", "--name", "worker-7", "--role", "writer", "--project", &p]);
    assert!(admin.starts_with("baton_") && admin != reader);
    let listed = token(&server, &["list"]);
    assert!(
        listed.contains("alice\tadmin\t*\tactive") && listed.contains(&format!("worker-7\twriter\t{p}")),
        "{listed}"
    );
    tokio::time::sleep(Duration::from_millis(2100)).await; // past the "no tokens yet" cache

    // Now every request needs a token, loopback included, on every service.
    let status = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(
        status.message().contains("BATON_TOKEN") && status.message().contains("token create"),
        "{}",
        status.message()
    );
    assert_eq!(
        c.sessions.get_session(GetSessionRequest { session_id: s.id.clone() }).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    assert_eq!(
        c.brief
            .get_brief(GetBriefRequest { project: p.clone(), ..Default::default() })
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    let bad = c
        .events
        .list_events(with(ListEventsRequest { project: p.clone(), ..Default::default() }, "baton_nope"))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::Unauthenticated);
    assert!(bad.message().contains("unknown access token"), "{}", bad.message());

    // Roles: a reader reads but cannot write.
    c.memory
        .list_memory(with(ListMemoryRequest { project: p.clone(), ..Default::default() }, &reader))
        .await
        .unwrap();
    let denied = c
        .sessions
        .start_session(with(
            StartSessionRequest { project: p.clone(), agent: 1, write: write(), ..Default::default() },
            &reader,
        ))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert!(
        denied.message().contains("dashboard") && denied.message().contains("reader"),
        "{}",
        denied.message()
    );

    // Scope: a project token works in its project only, also for id-based calls.
    let other_session = c
        .sessions
        .start_session(with(
            StartSessionRequest { project: other.clone(), agent: 1, write: write(), ..Default::default() },
            &admin,
        ))
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    c.checkpoints
        .create_checkpoint(with(
            CreateCheckpointRequest {
                session_id: s.id.clone(),
                kind: CheckpointKind::Manual as i32,
                write: write(),
                ..Default::default()
            },
            &scoped,
        ))
        .await
        .unwrap();
    let out_of_scope = c
        .checkpoints
        .create_checkpoint(with(
            CreateCheckpointRequest {
                session_id: other_session.id.clone(),
                kind: CheckpointKind::Manual as i32,
                write: write(),
                ..Default::default()
            },
            &scoped,
        ))
        .await
        .unwrap_err();
    assert_eq!(out_of_scope.code(), Code::PermissionDenied);
    assert!(out_of_scope.message().contains("limited to project"), "{}", out_of_scope.message());
    let watch = c
        .events
        .watch(with(
            WatchRequest {
                cursors: vec![WatchCursor { project: other.clone(), after_revision: 0 }],
                kinds: vec![],
            },
            &scoped,
        ))
        .await
        .unwrap_err();
    assert_eq!(watch.code(), Code::PermissionDenied);

    // Writes record which token made them.
    let events = c
        .events
        .list_events(with(ListEventsRequest { project: p.clone(), ..Default::default() }, &admin))
        .await
        .unwrap()
        .into_inner();
    let last = events.events.last().unwrap();
    assert_eq!(last.actor.as_ref().unwrap().token, "worker-7");

    // Revocation takes effect within the cache's lifetime.
    token(&server, &["revoke", "worker-7"]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let revoked = c
        .memory
        .list_memory(with(ListMemoryRequest { project: p.clone(), ..Default::default() }, &scoped))
        .await
        .unwrap_err();
    assert_eq!(revoked.code(), Code::Unauthenticated);
    assert!(revoked.message().contains("revoked"), "{}", revoked.message());

    // The client sends BATON_TOKEN; a wrong one gets a clear message.
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/tokens.git");
    let out = env.run(repo.path(), &["memory", "list", "--token", &admin], "");
    assert_eq!(out.code, 0, "{out:?}");
    let out = env.run(repo.path(), &["memory", "list", "--token", "baton_wrong"], "");
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("refused the token"), "{out:?}");
    let _ = put_note;
}
both!(tokens_roles_and_scope);

async fn bootstrap_token_and_open_network(backend: Backend) {
    // BATON_BOOTSTRAP_ADMIN_TOKEN creates the first admin token; then a non-loopback
    // listen is allowed (the hub is no longer open).
    let secret = "baton_bootstrap_secret_0123456789";
    let server = Server::start_with(backend, &["--bootstrap-admin-token", secret]).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    assert_eq!(
        c.memory
            .list_memory(ListMemoryRequest { project: p.clone(), ..Default::default() })
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    c.memory
        .list_memory(with(ListMemoryRequest { project: p.clone(), ..Default::default() }, secret))
        .await
        .unwrap();
    let listed = token(&server, &["list"]);
    assert!(listed.starts_with("bootstrap-admin\tadmin"), "{listed}");
}
both!(bootstrap_token_and_open_network);

async fn tokens_over_grpc_and_stats(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    start_session(&mut c, &p).await;
    put_note(&mut c, &p, "k", "v", write()).await.unwrap();
    let root = token(&server, &["create", "--name", "root", "--role", "admin"]);
    tokio::time::sleep(Duration::from_millis(2100)).await;

    // An admin creates a scoped writer remotely; its secret works at once.
    let made = c
        .admin
        .create_token(with(
            CreateTokenRequest { name: "ci".into(), role: "writer".into(), project: p.clone() },
            &root,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(made.secret.starts_with("baton_"));
    assert_eq!(made.token.as_ref().unwrap().project, p);
    c.memory
        .list_memory(with(ListMemoryRequest { project: p.clone(), ..Default::default() }, &made.secret))
        .await
        .unwrap();
    let listed = c.admin.list_tokens(with(ListTokensRequest {}, &root)).await.unwrap().into_inner();
    let names: Vec<&str> = listed.tokens.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["root", "ci"]);
    assert!(format!("{listed:?}").contains("ci") && !format!("{listed:?}").contains(&made.secret));

    // Bad input and the wrong caller.
    let (status, _) = crate::code(
        c.admin
            .create_token(with(
                CreateTokenRequest { name: "x".into(), role: "god".into(), project: String::new() },
                &root,
            ))
            .await,
    );
    assert_eq!(status, Code::InvalidArgument);
    let (status, message) = crate::code(
        c.admin
            .create_token(with(
                CreateTokenRequest { name: "ci".into(), role: "reader".into(), project: String::new() },
                &root,
            ))
            .await,
    );
    assert_eq!(status, Code::AlreadyExists, "{message}");
    let (status, _) = crate::code(c.admin.list_tokens(with(ListTokensRequest {}, &made.secret)).await);
    assert_eq!(status, Code::PermissionDenied);

    // Stats: within the caller's scope.
    let stats = c.admin.get_stats(with(GetStatsRequest::default(), &made.secret)).await.unwrap().into_inner();
    assert_eq!(stats.projects.len(), 1);
    let mine = &stats.projects[0];
    assert_eq!(
        (mine.project.as_str(), mine.head_revision, mine.events, mine.memory_entries),
        (p.as_str(), 2, 2, 1)
    );
    assert_eq!(mine.sessions.get("active"), Some(&1));
    let (status, _) = crate::code(
        c.admin
            .get_stats(with(
                GetStatsRequest { project: "github.com/no/such".into(), ..Default::default() },
                &root,
            ))
            .await,
    );
    assert_eq!(status, Code::NotFound);

    // Revoked remotely: refused within the cache window.
    c.admin.revoke_token(with(RevokeTokenRequest { name: "ci".into() }, &root)).await.unwrap();
    let (status, _) =
        crate::code(c.admin.revoke_token(with(RevokeTokenRequest { name: "ci".into() }, &root)).await);
    assert_eq!(status, Code::NotFound);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let status = c
        .memory
        .list_memory(with(ListMemoryRequest { project: p.clone(), ..Default::default() }, &made.secret))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
}
both!(tokens_over_grpc_and_stats);
