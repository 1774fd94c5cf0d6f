//! The schema's baseline (`server/src/store/schema.rs`): a database made by the migrations it
//! replaced (`tests/fixtures/migrations/`), with rows in it, is adopted by the server in
//! place — every row kept, the dead functions gone, its schema (tables, columns, indexes,
//! constraints, types, functions, triggers) equal to a new database's — and takes writes
//! after; a history that stops short is refused, saying what to do, and left as it was.

use std::borrow::Cow;
use std::path::Path;

use baton_server::events::Wakers;
use baton_server::store::{PgStore, SqliteStore, Store};
use sqlx::migrate::Migrator;

use super::{ctx, note, put, revisions};

/// The migrations before the baseline, as a development build applied them.
async fn before(backend: &str, all_but: usize) -> Migrator {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/migrations").join(backend);
    let mut migrator = Migrator::new(dir).await.unwrap();
    let keep = migrator.migrations.len() - all_but;
    migrator.migrations = Cow::Owned(migrator.migrations[..keep].to_vec());
    migrator
}

/// Rows as a development build wrote them: a project at revision 3 with a session, a
/// memory entry and its record, its events, a request, a chunk and a token.
fn rows(blob: &str) -> Vec<String> {
    vec![
        "INSERT INTO projects (key, head_revision, last_write_us, created_us) VALUES ('old', 3, 7, 5)".into(),
        format!(
            "INSERT INTO sessions VALUES ('s1', 'old', 1, 'conv', 'host', 'ana', '/w', 'main', 'goal', 4, \
             60000, 7, NULL, '', '', '', 0, NULL, NULL, '{{}}', 5, 7, 1, 1, 5, {blob}, 1, 5, {blob})"
        ),
        format!(
            "INSERT INTO memory VALUES ('m1', 'old', 'note', '', 'k', 'note::k', 'kept', '', {blob}, 2, 0, 6, FALSE)"
        ),
        format!("INSERT INTO records VALUES ('old', 'note::k', 2, 6, {blob})"),
        format!(
            "INSERT INTO events VALUES ('old', 1, 1, {blob}), ('old', 2, 2, {blob}), ('old', 3, 2, {blob})"
        ),
        format!("INSERT INTO requests VALUES ('old', 'r1', {blob}, {blob}, 6)"),
        format!("INSERT INTO chunks VALUES ('old', 'd1', {blob}, 0, 6)"),
        "INSERT INTO tokens VALUES ('t1', 'ci', 'writer', NULL, 'hash', 5, NULL, NULL)".into(),
    ]
}

const COUNTED: [&str; 8] =
    ["projects", "sessions", "memory", "records", "events", "requests", "chunks", "tokens"];

/// `SELECT count(*)` of each of `COUNTED`.
macro_rules! counts {
    ($pool:expr) => {{
        let mut counts = Vec::new();
        for table in COUNTED {
            let sql = format!("SELECT count(*) FROM {table}");
            let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_one($pool).await.unwrap();
            counts.push((table, n));
        }
        counts
    }};
}

/// What a written project shows after adoption: its head and log kept, a write going on.
async fn writes_go_on<S: Store>(store: &S) {
    assert_eq!(baton_server::store::head_revision(store, "old".into()).await.unwrap(), 3);
    put(store, ctx(None), note("old", "k2", "new")).await;
    assert_eq!(revisions(store, "old").await, [1, 2, 3, 4]);
}

const POSTGRES_SCHEMA: &str = "
    SELECT format('column %s.%s %s %s %s %s', table_name, column_name, ordinal_position, data_type,
                  is_nullable, coalesce(column_default, ''))
      FROM information_schema.columns WHERE table_schema = current_schema()
    UNION ALL SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
    UNION ALL SELECT format('constraint %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
      FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
    UNION ALL SELECT format('type %s (%s)', t.typname,
                  string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum))
      FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid AND c.relkind = 'c'
      JOIN pg_attribute a ON a.attrelid = c.oid
      WHERE t.typnamespace = current_schema()::regnamespace GROUP BY t.typname
    UNION ALL SELECT format('function %s', p.oid::regprocedure) FROM pg_proc p
      WHERE p.pronamespace = current_schema()::regnamespace
    UNION ALL SELECT 'extension ' || extname FROM pg_extension
    UNION ALL SELECT 'trigger ' || tgname FROM pg_trigger WHERE NOT tgisinternal
    UNION ALL SELECT 'sequence ' || sequencename FROM pg_sequences WHERE schemaname = current_schema()
    UNION ALL SELECT format('migration %s %s %s', version, description, success) FROM _sqlx_migrations
    ORDER BY 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_database_made_before_the_baseline_is_adopted() {
    let old = baton_tests::postgres::fresh_database().await.unwrap();
    let pool = sqlx::PgPool::connect(&old).await.unwrap();
    before("postgres", 0).await.run(&pool).await.unwrap();
    for statement in rows("'\\x0a'::bytea") {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&pool).await.unwrap();
    }
    let written = counts!(&pool);
    // Two servers started together adopt it once.
    let (a, b) =
        tokio::join!(PgStore::connect(&old, Wakers::default()), PgStore::connect(&old, Wakers::default()));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(counts!(&pool), written, "every row kept");
    writes_go_on(&a).await;
    a.close().await;
    b.close().await;

    let new = baton_tests::postgres::fresh_database().await.unwrap();
    let store = PgStore::connect(&new, Wakers::default()).await.unwrap();
    store.close().await;
    let fresh = sqlx::PgPool::connect(&new).await.unwrap();
    let schema = |pool| sqlx::query_scalar::<_, String>(POSTGRES_SCHEMA).fetch_all(pool);
    let (adopted, baseline) = (schema(&pool).await.unwrap(), schema(&fresh).await.unwrap());
    assert!(baseline.iter().any(|s| s.starts_with("function baton_apply_")), "{baseline:#?}");
    assert_eq!(adopted, baseline);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_history_that_stops_short_is_refused() {
    let old = baton_tests::postgres::fresh_database().await.unwrap();
    let pool = sqlx::PgPool::connect(&old).await.unwrap();
    before("postgres", 1).await.run(&pool).await.unwrap();
    let Err(refused) = PgStore::connect(&old, Wakers::default()).await else { panic!("adopted") };
    let says = refused.to_string();
    assert!(says.contains("the last 20261127000018") && says.contains("baton-server export"), "{says}");
    let recorded: i64 =
        sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations").fetch_one(&pool).await.unwrap();
    assert_eq!(recorded, 18, "left as it was");
}

/// `sqlite_master` with each text without comments and spaces that do not matter (a column
/// added by ALTER TABLE is spliced into the text of its CREATE TABLE), and every column.
const SQLITE_SCHEMA: &str = "
    SELECT type || ' ' || name || ' ' || tbl_name || ' ' || coalesce(sql, '') FROM sqlite_master
    UNION ALL SELECT 'column ' || m.name || ' ' || p.cid || ' ' || p.name || ' ' || p.type || ' '
                     || p.\"notnull\" || ' ' || coalesce(p.dflt_value, '') || ' ' || p.pk
      FROM sqlite_master m, pragma_table_xinfo(m.name) p WHERE m.type = 'table'
    UNION ALL SELECT 'migration ' || version || ' ' || description || ' ' || success FROM _sqlx_migrations";

fn plain(sql: &str) -> String {
    let text: String = sql.lines().map(|l| l.split("--").next().unwrap_or("")).collect::<Vec<_>>().join(" ");
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    words.replace(" (", "(").replace("( ", "(").replace(" )", ")").replace(" ,", ",").replace(", ", ",")
}

async fn sqlite_schema(pool: &sqlx::SqlitePool) -> Vec<String> {
    let rows: Vec<String> = sqlx::query_scalar(SQLITE_SCHEMA).fetch_all(pool).await.unwrap();
    let mut rows: Vec<String> = rows.iter().map(|r| plain(r)).collect();
    rows.sort();
    rows
}

async fn sqlite_pool(url: &str) -> sqlx::SqlitePool {
    let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
    sqlx::SqlitePool::connect_with(options.create_if_missing(true)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_database_made_before_the_baseline_is_adopted() {
    let dir = tempfile::tempdir().unwrap();
    let old = format!("sqlite://{}", dir.path().join("old.db").display());
    let pool = sqlite_pool(&old).await;
    before("sqlite", 0).await.run(&pool).await.unwrap();
    for statement in rows("x'0a'") {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&pool).await.unwrap();
    }
    let written = counts!(&pool);
    let store = SqliteStore::connect(&old, Wakers::default()).await.unwrap();
    assert_eq!(counts!(&pool), written, "every row kept");
    writes_go_on(&store).await;
    store.close().await;
    // Opened again: the baseline is its history now.
    let store = SqliteStore::connect(&old, Wakers::default()).await.unwrap();
    store.close().await;

    let new = format!("sqlite://{}", dir.path().join("new.db").display());
    SqliteStore::connect(&new, Wakers::default()).await.unwrap().close().await;
    let (adopted, baseline) = (sqlite_schema(&pool).await, sqlite_schema(&sqlite_pool(&new).await).await);
    assert!(baseline.iter().any(|s| s.starts_with("table search_fts_data")), "{baseline:#?}");
    assert_eq!(adopted, baseline);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_history_that_stops_short_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let old = format!("sqlite://{}", dir.path().join("old.db").display());
    let pool = sqlite_pool(&old).await;
    before("sqlite", 2).await.run(&pool).await.unwrap();
    let Err(refused) = SqliteStore::connect(&old, Wakers::default()).await else { panic!("adopted") };
    let says = refused.to_string();
    assert!(says.contains("the last 20261126000015") && says.contains("ebbec06"), "{says}");
    let recorded: i64 =
        sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations").fetch_one(&pool).await.unwrap();
    assert_eq!(recorded, 10, "left as it was");
}
