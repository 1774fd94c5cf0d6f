-- A search's work is bounded by its own project: every word of a document is indexed
-- behind its project's prefix (`core::search::project_prefix`), and a search asks for its
-- words behind its project's, so FTS5 reads the project's own lists of documents only.
-- The documents written before are dropped (the index with them, all at once) and their
-- projects listed for the background indexing (`jobs::search`), which writes them again
-- after start-up; their searches say `partial` until then.
INSERT OR IGNORE INTO search_backfill (project) SELECT DISTINCT project FROM search_docs;
DROP TRIGGER search_docs_dropped;
INSERT INTO search_fts (search_fts) VALUES ('delete-all');
DELETE FROM search_docs;
CREATE TRIGGER search_docs_dropped AFTER DELETE ON search_docs BEGIN
    INSERT INTO search_fts (search_fts, rowid, words) VALUES ('delete', old.id, old.words);
END;
