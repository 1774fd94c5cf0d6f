-- One round trip for a write's changes and the next write's lock (`store::postgres::write`,
-- `store::writer`'s hand-over): in a batch, a kept write's `baton_apply` is sent by the write
-- after it, in front of its lock, as one call of this function.
--
-- It applies the first write's changes (`baton_apply`, in its subtransaction). If they
-- fail, it returns their SQLSTATE and message in one row and takes no lock: the next write
-- then locks with a statement of its own. Else it takes the next write's lock and reads what
-- `LOCK`'s record variant (`store::postgres::sql`) reads, with the same columns: the
-- project's row, an earlier reply to the request id and the memory record the write reads
-- first (none if `l_record` is NULL). Each statement of a VOLATILE function takes its own
-- snapshot and command id, so the read sees the changes just made and every write that
-- committed while the lock waited, which one plain statement calling `baton_apply` could
-- not. `l_bounded`: the lock does not wait (`SKIP LOCKED`); no row if it is taken
-- elsewhere, or if the project has no row.
CREATE FUNCTION baton_apply_lock(p_project TEXT, p_head BIGINT, p_now_us BIGINT, p_memory_revision BIGINT,
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
    v_code TEXT;
    v_message TEXT;
BEGIN
    SELECT a.out_code, a.out_message INTO v_code, v_message
    FROM baton_apply(p_project, p_head, p_now_us, p_memory_revision, p_caps, p_deleted_records,
        p_deleted_entries, p_evicted, p_entries, p_versions, p_added_sessions, p_put_sessions, p_events,
        p_conflicts, p_request_id, p_request_hash, p_reply, p_checkpoints, p_search_edits, p_search_docs) a;
    IF v_code IS NOT NULL THEN
        out_code := v_code;
        out_message := v_message;
        RETURN NEXT;
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
