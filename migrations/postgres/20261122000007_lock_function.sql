-- The start of every write in one round trip: lock the project row (allocating the next
-- revision and reading the write's time and the memory caps), then look up the request id.
-- A function because each statement of a VOLATILE function takes a fresh snapshot: the
-- lookup runs after the lock is held, so it sees a duplicate request committed while this
-- one waited for the lock (a single INSERT … RETURNING with a subquery would not).
CREATE FUNCTION baton_now_us() RETURNS BIGINT LANGUAGE sql VOLATILE
AS $$ SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT) $$;

CREATE FUNCTION baton_lock(p_project TEXT, p_request_id TEXT)
RETURNS TABLE (out_revision BIGINT, out_now_us BIGINT, out_caps TEXT, out_hash BYTEA, out_reply BYTEA)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    INSERT INTO projects AS p (key, head_revision, last_write_us, created_us)
    VALUES (p_project, 1, baton_now_us(), baton_now_us())
    ON CONFLICT (key) DO UPDATE
        -- The clock is read once the row lock is held: never earlier than the previous write.
        SET head_revision = p.head_revision + 1, last_write_us = GREATEST(p.last_write_us, baton_now_us())
    RETURNING p.head_revision, p.last_write_us, p.memory_caps INTO out_revision, out_now_us, out_caps;
    IF p_request_id IS NOT NULL THEN
        SELECT r.request_hash, r.reply INTO out_hash, out_reply
        FROM requests r WHERE r.project = p_project AND r.request_id = p_request_id;
    END IF;
    RETURN NEXT;
END
$$;
