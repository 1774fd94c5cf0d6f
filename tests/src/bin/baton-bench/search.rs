//! Search over 100,000 indexed records (10,000 with `--quick`), on a server of its own: p50
//! and p99 of a page of 20 for a rare term, a term in 1% of the records and one in 20%,
//! through Baton's `SearchService`, next to the floor — a plain `LIKE '%term%'` scan of the
//! same rows in a table of the same database kind, limited to 20. Then the same searches'
//! targets in a small project beside it, while every one of those records matches: a term
//! and a long phrase whose words fill the big project (a search's work is bounded by its
//! own project). Then the same database as a server before search left it (nothing
//! indexed): how long start-up takes, and how long the background indexing of its records.

use std::time::Instant;

use baton_proto::v1::{MemoryItem, MemoryOp, PutMemoryRequest, SearchRequest};
use baton_tests::{Backend, Clients, Server};

use crate::floor::Floor;
use crate::stats::{Run, ms, sequential};
use crate::{Row, Sizes};

const PROJECT: &str = "bench/search";
/// A small project beside the big one, and how many records it holds.
const SMALL: &str = "bench/search-small";
const SMALL_RECORDS: u64 = 1000;
/// A word in every record of the big project, and in 1% of the small one's.
const EVERYWHERE: &str = "omnipresentterm";
/// The terms searched for, and in how many records of every 10,000 each is.
const TERMS: [(&str, &str, u64); 3] = [
    ("zyzzyvarare", "a rare term (1 in 10,000 records)", 10_000),
    ("quorumonepct", "a term in 1% of the records", 100),
    ("ledgertwenty", "a term in 20% of the records", 5),
];

pub async fn rows(backend: Backend, floor: &Floor, sizes: Sizes, table: &mut Vec<Row>) {
    let mut server = Server::start_with(backend, &["--log-level", "info"]).await.expect("start baton-server");
    let c = &server.clients().await;
    let records: u64 = if sizes.quick { 10_000 } else { 100_000 };
    let started = Instant::now();
    plant(c, records).await;
    let planted = started.elapsed();
    floor.seed_docs(PROJECT, &(0..records).map(text).collect::<Vec<_>>()).await;
    eprintln!("  {records} records indexed through Baton's writes in {planted:.1?}");
    let runs = if sizes.quick { 30 } else { 200 };
    for (term, what, every) in TERMS {
        let search = c.search.clone();
        let baton = sequential(runs, |_| {
            let mut search = search.clone();
            async move {
                let hits = search
                    .search(SearchRequest {
                        project: PROJECT.into(),
                        query: term.into(),
                        page_size: 20,
                        ..Default::default()
                    })
                    .await
                    .unwrap()
                    .into_inner()
                    .hits;
                assert_eq!(hits.len() as u64, (records / every).min(20), "{term}");
            }
        })
        .await;
        let at_floor = sequential(runs, |_| async move {
            floor.like(PROJECT, term, 20).await;
        })
        .await;
        table.push(row(what, records, planted, &baton, &at_floor));
    }
    beside(c, floor, records, runs, table).await;
    table.push(backfill(&mut server, records).await);
}

/// Searches in a project of `SMALL_RECORDS` while the big one's every record matches: its
/// word, and a phrase of the big project's words (the longest a query may hold).
async fn beside(c: &Clients, floor: &Floor, records: u64, runs: usize, table: &mut Vec<Row>) {
    let texts: Vec<String> = (0..SMALL_RECORDS).map(small_text).collect();
    let mut memory = c.memory.clone();
    for chunk in texts.chunks(100) {
        let items =
            chunk.iter().map(|t| MemoryItem { content: t.clone(), rationale: String::new() }).collect();
        let request = PutMemoryRequest {
            project: SMALL.into(),
            category: "decision".into(),
            op: MemoryOp::Append as i32,
            items,
            ..Default::default()
        };
        memory.put_memory(request).await.unwrap();
    }
    floor.seed_docs(SMALL, &texts).await;
    let phrase = format!("\"{}\"", text(7).split(' ').take(14).collect::<Vec<_>>().join(" "));
    let cases = [
        (
            EVERYWHERE.to_owned(),
            EVERYWHERE.to_owned(),
            "a word in every record of the other project, 1% of this one's",
            10,
        ),
        (
            phrase,
            EVERYWHERE.to_owned(),
            "a 14-word phrase of the other project's record, none of this one's",
            0,
        ),
    ];
    for (query, like, what, expected) in cases {
        let search = c.search.clone();
        let baton = sequential(runs, |_| {
            let (mut search, query) = (search.clone(), query.clone());
            async move {
                let request =
                    SearchRequest { project: SMALL.into(), query, page_size: 20, ..Default::default() };
                let hits = search.search(request).await.unwrap().into_inner().hits;
                assert_eq!(hits.len(), expected, "{what}");
            }
        })
        .await;
        let at_floor = sequential(runs, |_| {
            let like = like.clone();
            async move {
                floor.like(SMALL, &like, 20).await;
            }
        })
        .await;
        let mut r = row(what, SMALL_RECORDS, std::time::Duration::ZERO, &baton, &at_floor);
        r.scenario = format!(
            "search in a project of {SMALL_RECORDS} records beside one of {records} that all match: {what}"
        );
        table.push(r);
    }
}

/// A record of the small project: a big project's record's words but other ones' order,
/// and `EVERYWHERE` in 1%.
fn small_text(i: u64) -> String {
    let mut words: Vec<String> = text(1_000_000 + i).split(' ').map(str::to_owned).collect();
    words.retain(|w| w != EVERYWHERE && !TERMS.iter().any(|(t, ..)| t == w));
    if i.is_multiple_of(100) {
        words.push(EVERYWHERE.to_owned());
    }
    words.join(" ")
}

/// The database as a server before search left it, started again: start-up, then the
/// background indexing until searches are no longer partial.
async fn backfill(server: &mut Server, records: u64) -> Row {
    server.kill9();
    let sql = [
        "DELETE FROM search_docs".to_owned(),
        format!("INSERT INTO search_backfill (project) VALUES ('{PROJECT}')"),
    ];
    for statement in &sql {
        server.execute(statement).await.unwrap();
    }
    let started = Instant::now();
    server.restart().unwrap();
    let up = started.elapsed();
    let mut c = server.clients().await;
    loop {
        let reply = c
            .search
            .search(SearchRequest { project: PROJECT.into(), query: TERMS[0].0.into(), ..Default::default() })
            .await
            .unwrap()
            .into_inner();
        if !reply.partial {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let indexed = started.elapsed();
    Row {
        scenario: format!(
            "a database from before search, {records} records: start-up, then indexing in the background"
        ),
        baton: format!("serving after {}; indexed after {indexed:.1?}", ms(up)),
        floor: String::new(),
        ratio: format!("{:.0} records/s", records as f64 / indexed.as_secs_f64()),
        target: "start-up not held back".into(),
        met: Some(up.as_secs_f64() < 5.0),
    }
}

fn row(what: &str, records: u64, planted: std::time::Duration, baton: &Run, floor: &Run) -> Row {
    let met = baton.p50().as_secs_f64() <= 0.005 && baton.p99().as_secs_f64() <= 0.020;
    Row {
        scenario: format!(
            "search, {what}: a page of 20 of {records} records (indexed by the writes in {planted:.0?})"
        ),
        baton: format!("p50 {} / p99 {}", ms(baton.p50()), ms(baton.p99())),
        floor: format!("LIKE scan p50 {} / p99 {}", ms(floor.p50()), ms(floor.p99())),
        ratio: format!(
            "{:.1}× the scan's p50",
            baton.p50().as_secs_f64() / floor.p50().as_secs_f64().max(1e-9)
        ),
        target: "p50 ≤ 5 ms, p99 ≤ 20 ms".into(),
        met: Some(met),
    }
}

/// Record `i`'s text: 14 words of a 5,000-word vocabulary, the terms it holds, and
/// `EVERYWHERE`.
fn text(i: u64) -> String {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut words = Vec::new();
    for _ in 0..14 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        words.push(word(x % 5000));
    }
    for (term, _, every) in TERMS {
        if i.is_multiple_of(every) {
            words.push(term.to_owned());
        }
    }
    words.push(EVERYWHERE.to_owned());
    words.join(" ")
}

fn word(n: u64) -> String {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ne", "tor", "vas", "qui", "ren", "sol", "dun", "pri", "el", "gam", "ost", "ur",
        "bex",
    ];
    let s = |k: u64| SYLLABLES[(k % 16) as usize];
    format!("{}{}{}", s(n), s(n / 16), s(n / 256))
}

/// Writes the records as decisions, 100 per write, from 8 clients.
async fn plant(c: &Clients, records: u64) {
    let tasks: Vec<_> = (0..8u64)
        .map(|w| {
            let mut memory = c.memory.clone();
            tokio::spawn(async move {
                for batch in (w..records / 100).step_by(8) {
                    let items = (batch * 100..(batch + 1) * 100)
                        .map(|i| MemoryItem { content: text(i), rationale: String::new() })
                        .collect();
                    memory
                        .put_memory(PutMemoryRequest {
                            project: PROJECT.into(),
                            category: "decision".into(),
                            op: MemoryOp::Append as i32,
                            items,
                            ..Default::default()
                        })
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}
