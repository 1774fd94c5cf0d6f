-- Full-text search (server/src/core/search): one document per memory entry, checkpoint and
-- session, written by the write that changes the record. Baton splits text into words
-- itself and sends them as a `tsvector` literal with their positions, so no parser,
-- dictionary or stemming of Postgres applies: the words are exactly the ones SQLite's index
-- holds.
CREATE TABLE search_docs (
    id BIGSERIAL PRIMARY KEY,
    project TEXT NOT NULL,
    kind SMALLINT NOT NULL,
    record_id TEXT NOT NULL,
    record TEXT NOT NULL,
    session_id TEXT NOT NULL,
    branch TEXT NOT NULL,
    author TEXT NOT NULL,
    created_us BIGINT NOT NULL,
    revision BIGINT NOT NULL,
    body TEXT NOT NULL,
    words TSVECTOR NOT NULL,
    UNIQUE (project, kind, record_id)
);
-- A small pending list: a search reads the index's pending list whole, and at the default
-- 4 MB a burst of writes made a rare term's search several milliseconds slower (baton-bench's
-- search rows); without one, every write pays for its own words in the index (a fifth of
-- the small-write rows' throughput).
CREATE INDEX search_docs_words ON search_docs USING GIN (words)
    WITH (fastupdate = on, gin_pending_list_limit = 256);
CREATE INDEX search_docs_record ON search_docs (project, record) WHERE kind = 1;

-- Projects that existed before search: the server indexes their records after start-up, a
-- batch at a time under the project's lock, and takes each off this list when done.
CREATE TABLE search_backfill (project TEXT PRIMARY KEY);
INSERT INTO search_backfill (project) SELECT key FROM projects;

-- A document to add (or to replace, when its text or branch changed).
CREATE TYPE baton_search_doc AS (kind SMALLINT, record_id TEXT, record TEXT, session_id TEXT, branch TEXT,
    author TEXT, created_us BIGINT, revision BIGINT, body TEXT, words TEXT);
-- Any other change of the index: op 1 drops a document, 2 a memory record's documents,
-- 3 replaces a document's text (a purge's mask).
CREATE TYPE baton_search_edit AS (op SMALLINT, kind SMALLINT, record_id TEXT, record TEXT, body TEXT,
    words TEXT);

-- `baton_apply` with the index: the writes of the one before, then the index's changes,
-- in the same transaction. The ones before stay, for servers of the previous version
-- during a rolling upgrade (their writes are not indexed until the next backfill).
CREATE FUNCTION baton_apply(p_project TEXT, p_head BIGINT, p_now_us BIGINT, p_memory_revision BIGINT,
    p_caps TEXT, p_deleted_records TEXT[], p_deleted_entries TEXT[], p_evicted TEXT[],
    p_entries baton_entry[], p_versions baton_record_version[], p_added_sessions baton_session[],
    p_put_sessions baton_session[], p_events baton_event[], p_conflicts baton_conflict[],
    p_request_id TEXT, p_request_hash BYTEA, p_reply BYTEA, p_checkpoints baton_checkpoint[],
    p_search_edits baton_search_edit[], p_search_docs baton_search_doc[])
RETURNS TABLE (out_code TEXT, out_message TEXT)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_edit baton_search_edit;
BEGIN
    RETURN QUERY SELECT * FROM baton_apply(p_project, p_head, p_now_us, p_memory_revision, p_caps,
        p_deleted_records, p_deleted_entries, p_evicted, p_entries, p_versions, p_added_sessions, p_put_sessions,
        p_events, p_conflicts, p_request_id, p_request_hash, p_reply, p_checkpoints);
    IF FOUND THEN
        RETURN;
    END IF;
    BEGIN
        FOREACH v_edit IN ARRAY p_search_edits LOOP
            IF v_edit.op = 1 THEN
                DELETE FROM search_docs WHERE project = p_project AND kind = v_edit.kind
                    AND record_id = v_edit.record_id;
            ELSIF v_edit.op = 2 THEN
                DELETE FROM search_docs WHERE project = p_project AND kind = 1 AND record = v_edit.record;
            ELSE
                UPDATE search_docs SET body = v_edit.body, words = v_edit.words::tsvector
                WHERE project = p_project AND kind = v_edit.kind AND record_id = v_edit.record_id;
            END IF;
        END LOOP;
        IF cardinality(p_search_docs) > 0 THEN
            INSERT INTO search_docs AS t (project, kind, record_id, record, session_id, branch, author, created_us,
                revision, body, words)
            SELECT p_project, d.kind, d.record_id, d.record, d.session_id, d.branch, d.author, d.created_us,
                d.revision, d.body, d.words::tsvector FROM unnest(p_search_docs) d
            ON CONFLICT (project, kind, record_id) DO UPDATE SET record = excluded.record,
                session_id = excluded.session_id, branch = excluded.branch, author = excluded.author,
                revision = excluded.revision, body = excluded.body, words = excluded.words
            WHERE t.body <> excluded.body OR t.branch <> excluded.branch OR t.author <> excluded.author;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        out_code := SQLSTATE;
        out_message := SQLERRM;
        RETURN NEXT;
    END;
END
$$;
