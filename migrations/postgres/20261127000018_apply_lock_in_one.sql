-- `baton_apply_lock` with `baton_apply`'s body in it (the one of the migration
-- `apply_project_row_and_record_docs`), instead of a call of it: a PL/pgSQL function called
-- from another is a second function to enter, with its own copy of every argument and a
-- result set to hand back: `baton-bench`'s "small writes over 100 projects", whose lanes
-- keep Postgres busy (README, Performance: "One function for a write's changes").
--
-- With `l_project` NULL it applies the changes alone (`store::postgres::sql::APPLY`): the
-- server now calls this function for every write's changes, so their SQL is in one place.
-- `baton_apply` stays, unchanged, for servers of the previous version during a rolling
-- upgrade; they call this one as before, with a lock.
CREATE OR REPLACE FUNCTION baton_apply_lock(p_project TEXT, p_head BIGINT, p_now_us BIGINT, p_memory_revision BIGINT,
    p_caps TEXT, p_deleted_records TEXT[], p_deleted_entries TEXT[], p_evicted TEXT[],
    p_entries baton_entry[], p_versions baton_record_version[], p_added_sessions baton_session[],
    p_put_sessions baton_session[], p_events baton_event[], p_conflicts baton_conflict[],
    p_request_id TEXT, p_request_hash BYTEA, p_reply BYTEA, p_checkpoints baton_checkpoint[],
    p_search_edits baton_search_edit[], p_search_docs baton_search_doc[],
    l_project TEXT, l_request_id TEXT, l_record TEXT, l_bounded BOOLEAN)
RETURNS TABLE (out_code TEXT, out_message TEXT, fresh BOOLEAN, out_revision BIGINT, out_now_us BIGINT,
    out_caps TEXT, out_hash BYTEA, out_reply BYTEA, record_revision BIGINT, record_written_us BIGINT,
    record_author BYTEA, m_id TEXT, m_category TEXT, m_branch TEXT, m_key TEXT, m_content TEXT,
    m_rationale TEXT, m_author BYTEA, m_revision BIGINT, m_seq BIGINT, m_created_us BIGINT)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_record TEXT;
    v_edit baton_search_edit;
BEGIN
    BEGIN
        -- A memory record's documents, while its entries are still there.
        FOREACH v_edit IN ARRAY p_search_edits LOOP
            IF v_edit.op = 2 THEN
                DELETE FROM search_docs WHERE project = p_project AND kind = 1 AND record_id IN
                    (SELECT id FROM memory WHERE project = p_project AND record = v_edit.record);
            END IF;
        END LOOP;
        -- One record at a time, by equality: with `record = ANY(...)` the planner, knowing
        -- nothing of a new project, filtered the project's entries through another index.
        FOREACH v_record IN ARRAY p_deleted_records LOOP
            DELETE FROM memory WHERE project = p_project AND record = v_record;
        END LOOP;
        IF cardinality(p_deleted_entries) > 0 THEN
            DELETE FROM memory WHERE project = p_project AND id = ANY(p_deleted_entries);
        END IF;
        IF cardinality(p_evicted) > 0 THEN
            UPDATE memory SET evicted = TRUE WHERE project = p_project AND id = ANY(p_evicted);
        END IF;
        IF cardinality(p_entries) > 0 THEN
            INSERT INTO memory (id, project, category, branch, key, record, content, rationale, author, revision,
                seq, created_us, evicted)
            SELECT e.id, p_project, e.category, e.branch, e.key, e.record, e.content, e.rationale, e.author,
                e.revision, e.seq, e.created_us, e.evicted FROM unnest(p_entries) e;
        END IF;
        IF cardinality(p_versions) > 0 THEN
            INSERT INTO records (project, record, revision, written_us, author)
            SELECT p_project, v.record, v.revision, v.written_us, v.author FROM unnest(p_versions) v
            ON CONFLICT (project, record) DO UPDATE SET revision = excluded.revision,
                written_us = excluded.written_us, author = excluded.author;
        END IF;
        IF cardinality(p_added_sessions) > 0 THEN
            INSERT INTO sessions (id, project, agent, agent_session_id, host, user_name, cwd, branch, goal, status,
                lease_ttl_ms, last_seen_us, head_checkpoint_id, git_base, git_head, summary, tool_count,
                resumed_from, resumed_by, metadata, created_us, updated_us, revision, written_us, author,
                head_revision, head_written_us, head_author, start_revision)
            SELECT s.id, p_project, s.agent, s.agent_session_id, s.host, s.user_name, s.cwd, s.branch, s.goal,
                s.status, s.lease_ttl_ms, s.last_seen_us, s.head_checkpoint_id, s.git_base, s.git_head, s.summary,
                s.tool_count, s.resumed_from, s.resumed_by, s.metadata, s.created_us, s.updated_us, s.revision,
                s.written_us, s.author, s.head_revision, s.head_written_us, s.head_author, s.revision
            FROM unnest(p_added_sessions) s;
        END IF;
        IF cardinality(p_checkpoints) > 0 THEN
            INSERT INTO checkpoints (id, session_id, project, parent_id, kind, reason, state, payload,
                payload_content_type, compression, size_bytes, digest, state_digest, created_us, revision, author,
                blobs)
            SELECT c.id, c.session_id, p_project, c.parent_id, c.kind, c.reason, c.state, c.payload,
                c.payload_content_type, c.compression, c.size_bytes, c.digest, c.state_digest, c.created_us,
                c.revision, c.author, c.blobs
            FROM unnest(p_checkpoints) c;
        END IF;
        IF cardinality(p_put_sessions) > 0 THEN
            -- Liveness only forward: heartbeats move it without the project's lock.
            UPDATE sessions t SET agent_session_id = s.agent_session_id, branch = s.branch, goal = s.goal,
                status = s.status, last_seen_us = GREATEST(t.last_seen_us, s.last_seen_us),
                head_checkpoint_id = s.head_checkpoint_id, git_head = s.git_head, summary = s.summary,
                tool_count = GREATEST(t.tool_count, s.tool_count), resumed_by = s.resumed_by,
                metadata = s.metadata, updated_us = s.updated_us, revision = s.revision,
                written_us = s.written_us, author = s.author, head_revision = s.head_revision,
                head_written_us = s.head_written_us, head_author = s.head_author
            FROM unnest(p_put_sessions) s WHERE t.id = s.id AND t.project = p_project;
        END IF;
        INSERT INTO events (project, revision, kind, body)
        SELECT p_project, e.revision, e.kind, e.body FROM unnest(p_events) e;
        IF cardinality(p_conflicts) > 0 THEN
            INSERT INTO conflicts (id, project, revision, body)
            SELECT c.id, p_project, c.revision, c.body FROM unnest(p_conflicts) c;
        END IF;
        IF p_request_id IS NOT NULL THEN
            INSERT INTO requests (project, request_id, request_hash, reply, created_us)
            VALUES (p_project, p_request_id, p_request_hash, p_reply, p_now_us);
        END IF;
        -- The index's other changes: 1 drops a document, 3 replaces a document's text (a
        -- purge's mask).
        FOREACH v_edit IN ARRAY p_search_edits LOOP
            IF v_edit.op = 1 THEN
                DELETE FROM search_docs WHERE project = p_project AND kind = v_edit.kind
                    AND record_id = v_edit.record_id;
            ELSIF v_edit.op = 3 THEN
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
        RETURN;
    END;
    -- Outside the subtransaction, in the transaction that took the row's lock: only once
    -- every other change is made, so a write that fails leaves the row as it was.
    UPDATE projects SET head_revision = GREATEST(head_revision, p_head),
        last_write_us = GREATEST(last_write_us, p_now_us),
        memory_revision = COALESCE(p_memory_revision, memory_revision),
        memory_caps = COALESCE(p_caps, memory_caps)
    WHERE key = p_project;
    IF l_project IS NULL THEN
        RETURN;
    END IF;
    -- The lock first, as a statement of its own: the read after it, with a snapshot of its
    -- own, sees every write that committed while this one waited (so `fresh` always).
    IF l_bounded THEN
        PERFORM 1 FROM projects p WHERE p.key = l_project FOR UPDATE SKIP LOCKED;
    ELSE
        PERFORM 1 FROM projects p WHERE p.key = l_project FOR UPDATE;
    END IF;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH earlier AS (SELECT q.request_hash, q.reply FROM requests q
        WHERE q.project = l_project AND q.request_id = l_request_id)
    SELECT NULL::TEXT, NULL::TEXT, TRUE, p.head_revision + 1, GREATEST(p.last_write_us, baton_now_us()),
        p.memory_caps, request_hash, reply, r.revision, r.written_us, r.author, m.id, m.category,
        m.branch, m.key, m.content, m.rationale, m.author, m.revision, m.seq, m.created_us
    FROM projects p LEFT JOIN earlier ON TRUE
    LEFT JOIN records r ON r.project = l_project AND r.record = l_record
    LEFT JOIN memory m ON m.project = l_project AND m.record = l_record AND m.evicted = FALSE
    WHERE p.key = l_project
    ORDER BY m.revision, m.seq;
END;
$$;
