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
/// figures are in the README's performance section); taking the newest matches in index
/// order and ranking those does not.
pub const RANKED: i64 = 1000;

/// The word every search document of `project` is indexed with on SQLite (its triggers add
/// it, see the search-by-project migration) and every search there asks for: `p` and the
/// key's UTF-8 bytes in lower-case hex, one word to FTS5's `ascii` tokenizer. A search's
/// work is then bounded by its own project's matches. Not a filter: the project column is.
pub fn project_term(project: &str) -> String {
    format!("p{}", hex::encode(project.as_bytes()))
}
