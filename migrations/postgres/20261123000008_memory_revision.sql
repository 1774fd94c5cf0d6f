-- The revision of the last write that changed the project's memory: the brief keeps its
-- memory section while this is unchanged. Set by the project lock of such writes, so it
-- costs them no statement.
ALTER TABLE projects ADD COLUMN memory_revision BIGINT NOT NULL DEFAULT 0;

DROP FUNCTION baton_lock(TEXT, TEXT);

-- As in 20261122000007_lock_function, plus p_memory: the write changes the project's memory.
CREATE FUNCTION baton_lock(p_project TEXT, p_request_id TEXT, p_memory BOOLEAN)
RETURNS TABLE (out_revision BIGINT, out_now_us BIGINT, out_caps TEXT, out_hash BYTEA, out_reply BYTEA)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    INSERT INTO projects AS p (key, head_revision, last_write_us, created_us, memory_revision)
    VALUES (p_project, 1, baton_now_us(), baton_now_us(), CASE WHEN p_memory THEN 1 ELSE 0 END)
    ON CONFLICT (key) DO UPDATE
        -- The clock is read once the row lock is held: never earlier than the previous write.
        SET head_revision = p.head_revision + 1, last_write_us = GREATEST(p.last_write_us, baton_now_us()),
            memory_revision = CASE WHEN p_memory THEN p.head_revision + 1 ELSE p.memory_revision END
    RETURNING p.head_revision, p.last_write_us, p.memory_caps INTO out_revision, out_now_us, out_caps;
    IF p_request_id IS NOT NULL THEN
        SELECT r.request_hash, r.reply INTO out_hash, out_reply
        FROM requests r WHERE r.project = p_project AND r.request_id = p_request_id;
    END IF;
    RETURN NEXT;
END
$$;
