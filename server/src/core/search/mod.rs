//! Full-text search, the part both backends share: how text becomes words
//! (`tokens`), how a query is read (`query`) and written for each engine, what of a record
//! is indexed (`doc`), and the snippet shown for a hit (`snippet`).
//!
//! Baton tokenizes itself, so SQLite's FTS5 and Postgres's `tsvector` index the very same
//! words: FTS5 gets them space-separated under its `ascii` tokenizer (which splits at ASCII
//! punctuation and spaces only, and our words hold none), Postgres gets them as a `tsvector`
//! literal with their positions, so neither engine's own parser, stemming or stop words
//! ever applies. Queries are parsed here too, and reach an engine only as a valid query.

pub mod doc;
pub mod query;
pub mod rank;
pub mod snippet;
pub mod tokens;

/// The matches ranked for a query: the newest this many. Ranking every match of a common
/// term missed the search targets on either engine (the search rows of `baton-bench`; the
/// figures are in docs/performance.md); taking the newest matches in index
/// order and ranking those does not.
pub const RANKED: i64 = 1000;

/// What every word of `project`'s documents starts with in SQLite's full-text index, and
/// every word its searches ask for (`tokens::fts5_text`, `Query::fts5`): twelve hex digits
/// of the key's sha256. FTS5's index is one table; this makes each word's list of
/// documents a project's own, so a search's work is bounded by its project however many
/// documents of another match. Not a filter (the project column is): two keys with the
/// same prefix would only share lists.
pub fn project_prefix(project: &str) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(project.as_bytes())[..6])
}
