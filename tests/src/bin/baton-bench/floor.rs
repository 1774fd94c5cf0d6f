//! The storage floor: what the same database does for Baton's kind of write with nothing
//! of Baton around it. One transaction per write: lock the project row (allocating the
//! revision), insert the record and its event, commit; with Baton's durability settings
//! (SQLite: WAL, synchronous=FULL, BEGIN IMMEDIATE; Postgres: the cluster's own).
//!
//! `write_indexed` also writes the record's search document the way Baton's index holds it
//! (its table, unique key and full-text index as the migrations declare them, its words
//! split by Baton's tokenizer): what the index costs the storage itself, printed beside
//! each write row.

use std::str::FromStr;
use std::time::Duration;

use baton_tests::Backend;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

const SCHEMA: [&str; 4] = [
    "CREATE TABLE projects (key TEXT PRIMARY KEY, head BIGINT NOT NULL)",
    "CREATE TABLE records (project TEXT NOT NULL, revision BIGINT NOT NULL, body BYTEA NOT NULL, PRIMARY KEY (project, revision))",
    "CREATE TABLE events (project TEXT NOT NULL, revision BIGINT NOT NULL, body BYTEA NOT NULL, PRIMARY KEY (project, revision))",
    "CREATE TABLE docs (project TEXT NOT NULL, id BIGINT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (project, id))",
];

/// Baton's search documents (migrations `*_search.sql`, less the index on a memory record's
/// documents that migration 15 drops), the columns a write fills.
const INDEX_SQLITE: [&str; 3] = [
    "CREATE TABLE search_docs (id INTEGER PRIMARY KEY, project TEXT NOT NULL, kind INTEGER NOT NULL, \
     record_id TEXT NOT NULL, record TEXT NOT NULL, body TEXT NOT NULL, words TEXT NOT NULL, \
     UNIQUE (project, kind, record_id))",
    "CREATE VIRTUAL TABLE search_fts USING fts5(words, content = 'search_docs', content_rowid = 'id', \
     tokenize = 'ascii')",
    "CREATE TRIGGER search_docs_added AFTER INSERT ON search_docs BEGIN \
     INSERT INTO search_fts (rowid, words) VALUES (new.id, new.words); END",
];
const INDEX_POSTGRES: [&str; 2] = [
    "CREATE TABLE search_docs (id BIGSERIAL PRIMARY KEY, project TEXT NOT NULL, kind SMALLINT NOT NULL, \
     record_id TEXT NOT NULL, record TEXT NOT NULL, body TEXT NOT NULL, words TSVECTOR NOT NULL, \
     UNIQUE (project, kind, record_id))",
    "CREATE INDEX search_docs_words ON search_docs USING GIN (words) \
     WITH (fastupdate = on, gin_pending_list_limit = 256)",
];
const INDEX_INSERT_SQLITE: &str =
    "INSERT INTO search_docs (project, kind, record_id, record, body, words) VALUES ($1, 1, $2, $2, $3, $4)";
const INDEX_INSERT_POSTGRES: &str = "INSERT INTO search_docs (project, kind, record_id, record, body, words) \
     VALUES ($1, 1, $2, $2, $3, $4::tsvector)";

const LOCK: &str = "INSERT INTO projects (key, head) VALUES ($1, 1) ON CONFLICT (key) DO UPDATE SET head = projects.head + 1 RETURNING head";

#[derive(Clone)]
pub enum Floor {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Floor {
    /// A fresh database of the same kind as the server's, with the floor's schema.
    pub async fn open(backend: Backend, dir: &std::path::Path) -> Floor {
        match backend {
            Backend::Sqlite => {
                let options =
                    SqliteConnectOptions::from_str(&format!("sqlite://{}", dir.join("floor.db").display()))
                        .unwrap()
                        .create_if_missing(true)
                        .journal_mode(SqliteJournalMode::Wal)
                        .synchronous(SqliteSynchronous::Full)
                        .busy_timeout(Duration::from_secs(30));
                // Baton's SQLite pool size.
                let pool = SqlitePoolOptions::new().max_connections(8).connect_with(options).await.unwrap();
                for sql in SCHEMA.iter().chain(&INDEX_SQLITE) {
                    sqlx::query(sqlx::AssertSqlSafe(sql.replace("BYTEA", "BLOB")))
                        .execute(&pool)
                        .await
                        .unwrap();
                }
                Floor::Sqlite(pool)
            }
            Backend::Postgres => {
                let url = baton_tests::postgres::fresh_database().await.unwrap();
                // Baton's Postgres pool size.
                let pool = PgPoolOptions::new().max_connections(16).connect(&url).await.unwrap();
                for sql in SCHEMA.iter().chain(&INDEX_POSTGRES) {
                    sqlx::query(sqlx::AssertSqlSafe(*sql)).execute(&pool).await.unwrap();
                }
                Floor::Postgres(pool)
            }
        }
    }

    /// One write: lock + record + event, committed.
    pub async fn write(&self, project: &str, body: &[u8]) {
        self.write_with(project, body, None).await;
    }

    /// `write`, with the record's search document holding `text` (see the module header).
    pub async fn write_indexed(&self, project: &str, body: &[u8], text: &str) {
        self.write_with(project, body, Some(text)).await;
    }

    async fn write_with(&self, project: &str, body: &[u8], indexed: Option<&str>) {
        use baton_server::core::search::tokens::{doc_words, fts5_text, tsvector_literal};
        macro_rules! write {
            ($tx:expr, $insert:expr, $words:expr) => {{
                let mut tx = $tx;
                let (revision,): (i64,) =
                    sqlx::query_as(LOCK).bind(project).fetch_one(&mut *tx).await.unwrap();
                sqlx::query("INSERT INTO records (project, revision, body) VALUES ($1, $2, $3)")
                    .bind(project)
                    .bind(revision)
                    .bind(body)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                sqlx::query("INSERT INTO events (project, revision, body) VALUES ($1, $2, $3)")
                    .bind(project)
                    .bind(revision)
                    .bind(&body[..body.len().min(256)])
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                if let Some(text) = indexed {
                    sqlx::query($insert)
                        .bind(project)
                        .bind(format!("r{revision}"))
                        .bind(text)
                        .bind($words(&doc_words(text)))
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                }
                tx.commit().await.unwrap();
            }};
        }
        match self {
            Floor::Sqlite(pool) => {
                let words = |w: &[String]| fts5_text(project, w);
                write!(pool.begin_with("BEGIN IMMEDIATE").await.unwrap(), INDEX_INSERT_SQLITE, words);
            }
            Floor::Postgres(pool) => {
                write!(pool.begin().await.unwrap(), INDEX_INSERT_POSTGRES, tsvector_literal);
            }
        }
    }

    /// Writes a long log fast (one transaction, multi-row inserts): the floor's copy of the
    /// catch-up scenario's events.
    pub async fn seed_events(&self, project: &str, bodies: &[Vec<u8>]) {
        macro_rules! seed {
            ($db:ty, $pool:expr) => {{
                let mut tx = $pool.begin().await.unwrap();
                for (start, chunk) in bodies.chunks(500).enumerate() {
                    let mut q =
                        sqlx::QueryBuilder::<$db>::new("INSERT INTO events (project, revision, body) ");
                    q.push_values(chunk.iter().enumerate(), |mut row, (i, body)| {
                        row.push_bind(project)
                            .push_bind((start * 500 + i + 1) as i64)
                            .push_bind(body.as_slice());
                    });
                    q.build().execute(&mut *tx).await.unwrap();
                }
                tx.commit().await.unwrap();
            }};
        }
        match self {
            Floor::Sqlite(pool) => seed!(sqlx::Sqlite, pool),
            Floor::Postgres(pool) => seed!(sqlx::Postgres, pool),
        }
    }

    /// The search scenario's rows, as plain text (one transaction, multi-row inserts).
    pub async fn seed_docs(&self, project: &str, bodies: &[String]) {
        macro_rules! seed {
            ($db:ty, $pool:expr) => {{
                let mut tx = $pool.begin().await.unwrap();
                for (start, chunk) in bodies.chunks(500).enumerate() {
                    let mut q = sqlx::QueryBuilder::<$db>::new("INSERT INTO docs (project, id, body) ");
                    q.push_values(chunk.iter().enumerate(), |mut row, (i, body)| {
                        row.push_bind(project).push_bind((start * 500 + i) as i64).push_bind(body.as_str());
                    });
                    q.build().execute(&mut *tx).await.unwrap();
                }
                tx.commit().await.unwrap();
            }};
        }
        match self {
            Floor::Sqlite(pool) => seed!(sqlx::Sqlite, pool),
            Floor::Postgres(pool) => seed!(sqlx::Postgres, pool),
        }
    }

    /// The search floor: up to `limit` rows whose text holds a term, by a plain scan.
    pub async fn like(&self, project: &str, term: &str, limit: i64) -> usize {
        let sql = "SELECT id, body FROM docs WHERE project = $1 AND body LIKE $2 LIMIT $3";
        let pattern = format!("%{term}%");
        let rows: Vec<(i64, String)> = match self {
            Floor::Sqlite(pool) => {
                sqlx::query_as(sql).bind(project).bind(pattern).bind(limit).fetch_all(pool).await.unwrap()
            }
            Floor::Postgres(pool) => {
                sqlx::query_as(sql).bind(project).bind(pattern).bind(limit).fetch_all(pool).await.unwrap()
            }
        };
        rows.len()
    }

    /// Reads a page of events after a revision; returns how many and the last revision.
    pub async fn read_events(&self, project: &str, after: i64, limit: i64) -> (usize, i64) {
        let sql = "SELECT revision, body FROM events WHERE project = $1 AND revision > $2 ORDER BY revision LIMIT $3";
        let rows: Vec<(i64, Vec<u8>)> = match self {
            Floor::Sqlite(pool) => {
                sqlx::query_as(sql).bind(project).bind(after).bind(limit).fetch_all(pool).await.unwrap()
            }
            Floor::Postgres(pool) => {
                sqlx::query_as(sql).bind(project).bind(after).bind(limit).fetch_all(pool).await.unwrap()
            }
        };
        (rows.len(), rows.last().map_or(after, |r| r.0))
    }

    /// The reads a resume needs at the floor: the session's latest record and the project's
    /// newest records (the brief's inputs), by primary key.
    pub async fn resume_reads(&self, project: &str, revision: i64) {
        let one = "SELECT body FROM records WHERE project = $1 AND revision = $2";
        let recent = "SELECT body FROM records WHERE project = $1 ORDER BY revision DESC LIMIT 50";
        match self {
            Floor::Sqlite(pool) => {
                let _: Option<(Vec<u8>,)> =
                    sqlx::query_as(one).bind(project).bind(revision).fetch_optional(pool).await.unwrap();
                let _: Vec<(Vec<u8>,)> = sqlx::query_as(recent).bind(project).fetch_all(pool).await.unwrap();
            }
            Floor::Postgres(pool) => {
                let _: Option<(Vec<u8>,)> =
                    sqlx::query_as(one).bind(project).bind(revision).fetch_optional(pool).await.unwrap();
                let _: Vec<(Vec<u8>,)> = sqlx::query_as(recent).bind(project).fetch_all(pool).await.unwrap();
            }
        }
    }
}
