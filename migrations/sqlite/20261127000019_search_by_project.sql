-- A search's work is bounded by its own project: FTS5 indexes each document with one more
-- word, `p` and the document's project key in hex (`core::search::project_term`), and a
-- search asks for that word AND its query, so FTS5 steps only through the project's own
-- matches. The word is added by the triggers that keep the index in step with
-- `search_docs` (and given back to them on delete), not stored in `words`; the index is
-- written again once, here.
DROP TRIGGER search_docs_added;
DROP TRIGGER search_docs_dropped;
DROP TRIGGER search_docs_changed;
CREATE TRIGGER search_docs_added AFTER INSERT ON search_docs BEGIN
    INSERT INTO search_fts (rowid, words) VALUES (new.id, 'p' || lower(hex(new.project)) || ' ' || new.words);
END;
CREATE TRIGGER search_docs_dropped AFTER DELETE ON search_docs BEGIN
    INSERT INTO search_fts (search_fts, rowid, words)
    VALUES ('delete', old.id, 'p' || lower(hex(old.project)) || ' ' || old.words);
END;
CREATE TRIGGER search_docs_changed AFTER UPDATE OF project, words ON search_docs BEGIN
    INSERT INTO search_fts (search_fts, rowid, words)
    VALUES ('delete', old.id, 'p' || lower(hex(old.project)) || ' ' || old.words);
    INSERT INTO search_fts (rowid, words) VALUES (new.id, 'p' || lower(hex(new.project)) || ' ' || new.words);
END;
INSERT INTO search_fts (search_fts) VALUES ('delete-all');
INSERT INTO search_fts (rowid, words) SELECT id, 'p' || lower(hex(project)) || ' ' || words FROM search_docs;
