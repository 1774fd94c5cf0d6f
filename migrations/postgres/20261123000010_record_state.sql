-- A memory record's state as a write about to change it needs it: the record's LWW version
-- (NULL columns if it was never written) and its live entries in order (NULL entry columns
-- if it has none), one row per entry. The writer calls it in the same round trip as
-- baton_lock, after it (server/src/store/postgres.rs, lock_project): a PL/pgSQL function,
-- so the query's plan is prepared once per connection although the call itself is sent as
-- a simple query.
CREATE FUNCTION baton_record_state(p_project TEXT, p_record TEXT)
RETURNS TABLE (
    record_revision BIGINT, record_written_us BIGINT, record_author BYTEA,
    id TEXT, category TEXT, branch TEXT, key TEXT, content TEXT, rationale TEXT,
    author BYTEA, revision BIGINT, created_us BIGINT
)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT r.revision, r.written_us, r.author,
           m.id, m.category, m.branch, m.key, m.content, m.rationale, m.author, m.revision, m.created_us
    FROM (SELECT 1 AS one) k
    LEFT JOIN records r ON r.project = p_project AND r.record = p_record
    LEFT JOIN memory m ON m.project = p_project AND m.record = p_record AND m.evicted = FALSE
    ORDER BY m.revision, m.seq;
END
$$;
