-- Full-text search (server/src/core/search): one document per memory entry, checkpoint and
-- session, written in the transaction of the write that changes the record. Baton splits
-- text into words itself: FTS5 indexes them with its `ascii` tokenizer, which splits at
-- spaces and ASCII punctuation only, so the words are exactly Baton's. The FTS5 table takes
-- its text from `search_docs` (external content), kept in step by the triggers.
CREATE TABLE search_docs (
    id INTEGER PRIMARY KEY,
    project TEXT NOT NULL,
    kind INTEGER NOT NULL,
    record_id TEXT NOT NULL,
    record TEXT NOT NULL,
    session_id TEXT NOT NULL,
    branch TEXT NOT NULL,
    author TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    body TEXT NOT NULL,
    words TEXT NOT NULL,
    UNIQUE (project, kind, record_id)
);
CREATE INDEX search_docs_record ON search_docs (project, record) WHERE kind = 1;

CREATE VIRTUAL TABLE search_fts USING fts5(words, content = 'search_docs', content_rowid = 'id',
    tokenize = 'ascii');

CREATE TRIGGER search_docs_added AFTER INSERT ON search_docs BEGIN
    INSERT INTO search_fts (rowid, words) VALUES (new.id, new.words);
END;
CREATE TRIGGER search_docs_dropped AFTER DELETE ON search_docs BEGIN
    INSERT INTO search_fts (search_fts, rowid, words) VALUES ('delete', old.id, old.words);
END;
CREATE TRIGGER search_docs_changed AFTER UPDATE OF words ON search_docs BEGIN
    INSERT INTO search_fts (search_fts, rowid, words) VALUES ('delete', old.id, old.words);
    INSERT INTO search_fts (rowid, words) VALUES (new.id, new.words);
END;

-- Projects that existed before search: the server indexes their records after start-up
-- (SQL cannot split text as Baton does), a batch at a time under the project's lock, and
-- takes each off this list when done. Until then their searches say the index is partial.
CREATE TABLE search_backfill (project TEXT PRIMARY KEY);
INSERT INTO search_backfill (project) SELECT key FROM projects;
