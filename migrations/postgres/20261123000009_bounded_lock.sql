-- baton_lock with a bounded wait: p_wait_ms > 0 gives up on the project's row lock after
-- that long (SQLSTATE 55P03, lock_not_available). A batch of writes that already holds
-- other projects' locks uses it, so batches of different server instances that lock the
-- same projects in another order cannot wait for each other for good; the write then
-- starts again at the head of a batch of its own (server/src/store/writer.rs).
-- An overload: instances still running the previous version keep calling the 3-argument one.
CREATE FUNCTION baton_lock(p_project TEXT, p_request_id TEXT, p_memory BOOLEAN, p_wait_ms INTEGER)
RETURNS TABLE (out_revision BIGINT, out_now_us BIGINT, out_caps TEXT, out_hash BYTEA, out_reply BYTEA)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_timeout TEXT;
BEGIN
    IF p_wait_ms > 0 THEN
        v_timeout := current_setting('lock_timeout');
        PERFORM set_config('lock_timeout', p_wait_ms || 'ms', true);
    END IF;
    INSERT INTO projects AS p (key, head_revision, last_write_us, created_us, memory_revision)
    VALUES (p_project, 1, baton_now_us(), baton_now_us(), CASE WHEN p_memory THEN 1 ELSE 0 END)
    ON CONFLICT (key) DO UPDATE
        -- The clock is read once the row lock is held: never earlier than the previous write.
        SET head_revision = p.head_revision + 1, last_write_us = GREATEST(p.last_write_us, baton_now_us()),
            memory_revision = CASE WHEN p_memory THEN p.head_revision + 1 ELSE p.memory_revision END
    RETURNING p.head_revision, p.last_write_us, p.memory_caps INTO out_revision, out_now_us, out_caps;
    IF p_wait_ms > 0 THEN
        PERFORM set_config('lock_timeout', v_timeout, true);
    END IF;
    IF p_request_id IS NOT NULL THEN
        SELECT r.request_hash, r.reply INTO out_hash, out_reply
        FROM requests r WHERE r.project = p_project AND r.request_id = p_request_id;
    END IF;
    RETURN NEXT;
END
$$;
