//! The second attack pass on search (issue 39, point 2): a search's work is bounded by its
//! own project, by a time limit the database enforces, by a cap on phrase length and by a
//! cap on the searches one token may run at once, so searches cannot starve the rest of
//! the API.

use std::time::Duration;

use baton_proto::v1::{ListSessionsRequest, SearchRequest};
use baton_tests::{Backend, Server, both};
use tonic::Code;

use crate::access::{token, with};
use crate::{project, put_note, write};

fn search(p: &str, query: &str) -> SearchRequest {
    SearchRequest { project: p.into(), query: query.into(), ..Default::default() }
}

/// A phrase's cost grows with its words: a long one is refused before it reaches the
/// database, with what to do instead.
async fn a_long_phrase_is_refused(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    put_note(&mut c, &p, "k", "needle in the haystack", write()).await.unwrap();
    let phrase = format!("\"{}\"", vec!["a"; 499].join(" "));
    let err = c.search.search(search(&p, &phrase)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("a phrase of 499 words"), "{}", err.message());
    let found = c.search.search(search(&p, "\"needle in the haystack\"")).await.unwrap().into_inner();
    assert_eq!(found.hits.len(), 1);
}
both!(a_long_phrase_is_refused);

/// Searches held up in the database (here by a lock on the search index) keep to their
/// time limit and to the cap per token, on connections of their own: the rest of the API
/// answers meanwhile, and searches answer again once the database does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_searches_neither_pile_up_nor_starve_the_api() {
    use sqlx::Connection as _;
    let server = Server::start_with(
        Backend::Postgres,
        &["--search-time-limit", "3s", "--max-searches-per-token", "2"],
    )
    .await
    .unwrap();
    let alice = token(&server, &["create", "--name", "alice", "--role", "reader"]);
    let admin = token(&server, &["create", "--name", "admin", "--role", "admin"]);
    let mut c = server.clients().await;
    let p = project();
    let note = crate::note_request(&p, "k", "the needle", write());
    c.memory.put_memory(with(note, &admin)).await.unwrap();

    let mut lock = sqlx::PgConnection::connect(&server.database_url).await.unwrap();
    sqlx::raw_sql("BEGIN; LOCK TABLE search_docs IN ACCESS EXCLUSIVE MODE").execute(&mut lock).await.unwrap();
    let stuck: Vec<_> = (0..2)
        .map(|_| {
            let (mut c, request) = (c.clone(), with(search(&p, "needle"), &alice));
            tokio::spawn(async move { c.search.search(request).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let third = c.search.search(with(search(&p, "needle"), &alice)).await.unwrap_err();
    assert_eq!(third.code(), Code::ResourceExhausted, "{third:?}");
    assert!(third.message().contains("already has 2 searches running"), "{}", third.message());
    // The rest of the API is not waiting for the searches' connections.
    let listed = tokio::time::timeout(
        Duration::from_secs(2),
        c.sessions
            .list_sessions(with(ListSessionsRequest { project: p.clone(), ..Default::default() }, &alice)),
    )
    .await
    .expect("ListSessions waited for the searches");
    assert!(listed.is_ok(), "{listed:?}");
    for s in stuck {
        let err = s.await.unwrap().unwrap_err();
        assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
        assert!(err.message().contains("time limit of 3000 ms"), "{}", err.message());
    }
    sqlx::raw_sql("ROLLBACK").execute(&mut lock).await.unwrap();
    let found = c.search.search(with(search(&p, "needle"), &alice)).await.unwrap().into_inner();
    assert_eq!(found.hits.len(), 1);
}
