-- A write in two round trips, each write's changes in a subtransaction of its own
-- (server/src/store/postgres/): `baton_begin*` takes the project's lock and reads what the
-- write reads first, with a snapshot taken once the lock is held (each statement of a
-- VOLATILE function takes its own, so a change committed while the write waited is seen);
-- `baton_apply` makes all its changes inside an exception block, which Postgres runs as a
-- subtransaction: a write whose changes fail rolls back alone and the batch it shares with
-- other writes carries on, as with a savepoint, without a round trip for one.

-- The lock without a change: locks the project's row (creating the project on first use)
-- and gives the write's revision (head + 1), its time (never before the project's last
-- write), the memory caps and an earlier reply to the request id; then what the write
-- reads first: a memory record's LWW version and live entries in order, one row per entry
-- (p_record), or a session of the project (p_session), in columns NULL when absent. A
-- write that is refused or fails before `baton_apply` has changed nothing.
--
-- A bounded lock (p_bounded: the batch already holds other projects' locks) does not wait
-- for a row locked elsewhere (another instance's batch, an open psql) nor for a project
-- that does not exist yet (another instance's batch may be creating it): it says so
-- (out_ran_out) and the write starts again in a batch of its own, so batches of different
-- instances never wait for each other in a cycle. (An error, such as lock_timeout's,
-- would end the whole batch's transaction.)
CREATE FUNCTION baton_begin(p_project TEXT, p_request_id TEXT, p_bounded BOOLEAN, p_record TEXT,
    p_session TEXT)
RETURNS TABLE (out_ran_out BOOLEAN, out_revision BIGINT, out_now_us BIGINT, out_caps TEXT, out_hash BYTEA,
    out_reply BYTEA,
    record_revision BIGINT, record_written_us BIGINT, record_author BYTEA, m_id TEXT, m_category TEXT,
    m_branch TEXT, m_key TEXT, m_content TEXT, m_rationale TEXT, m_author BYTEA, m_revision BIGINT,
    m_seq BIGINT, m_created_us BIGINT,
    id TEXT, project TEXT, agent INTEGER, agent_session_id TEXT, host TEXT, user_name TEXT, cwd TEXT,
    branch TEXT, goal TEXT, status INTEGER, lease_ttl_ms BIGINT, last_seen_us BIGINT,
    head_checkpoint_id TEXT, git_base TEXT, git_head TEXT, summary TEXT, tool_count BIGINT,
    resumed_from TEXT, resumed_by TEXT, metadata TEXT, created_us BIGINT, updated_us BIGINT,
    revision BIGINT, written_us BIGINT, author BYTEA, head_revision BIGINT, head_written_us BIGINT,
    head_author BYTEA)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_head BIGINT;
    v_last BIGINT;
    v_caps TEXT;
    v_hash BYTEA;
    v_reply BYTEA;
BEGIN
    IF p_bounded THEN
        SELECT p.head_revision, p.last_write_us, p.memory_caps INTO v_head, v_last, v_caps
        FROM projects p WHERE p.key = p_project FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            -- Every other column NULL.
            out_ran_out := TRUE;
            RETURN NEXT;
            RETURN;
        END IF;
    ELSE
        SELECT p.head_revision, p.last_write_us, p.memory_caps INTO v_head, v_last, v_caps
        FROM projects p WHERE p.key = p_project FOR UPDATE;
    END IF;
    IF v_head IS NULL THEN
        INSERT INTO projects (key, head_revision, last_write_us, created_us, memory_revision)
        VALUES (p_project, 0, baton_now_us(), baton_now_us(), 0) ON CONFLICT (key) DO NOTHING;
        SELECT p.head_revision, p.last_write_us, p.memory_caps INTO v_head, v_last, v_caps
        FROM projects p WHERE p.key = p_project FOR UPDATE;
    END IF;
    IF p_request_id IS NOT NULL THEN
        SELECT r.request_hash, r.reply INTO v_hash, v_reply
        FROM requests r WHERE r.project = p_project AND r.request_id = p_request_id;
    END IF;
    -- The clock is read once the row lock is held.
    out_ran_out := FALSE;
    out_revision := v_head + 1;
    out_now_us := GREATEST(v_last, baton_now_us());
    out_caps := v_caps;
    out_hash := v_hash;
    out_reply := v_reply;
    IF p_record IS NOT NULL THEN
        RETURN QUERY
        SELECT FALSE, out_revision, out_now_us, v_caps, v_hash, v_reply, r.revision, r.written_us, r.author,
               m.id, m.category, m.branch, m.key, m.content, m.rationale, m.author, m.revision, m.seq,
               m.created_us, NULL::TEXT, NULL::TEXT, NULL::INTEGER, NULL::TEXT, NULL::TEXT, NULL::TEXT,
               NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::INTEGER, NULL::BIGINT, NULL::BIGINT, NULL::TEXT,
               NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::BIGINT, NULL::TEXT, NULL::TEXT, NULL::TEXT,
               NULL::BIGINT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT, NULL::BYTEA, NULL::BIGINT, NULL::BIGINT,
               NULL::BYTEA
        FROM (SELECT 1 AS one) k
        LEFT JOIN records r ON r.project = p_project AND r.record = p_record
        LEFT JOIN memory m ON m.project = p_project AND m.record = p_record AND m.evicted = FALSE
        ORDER BY m.revision, m.seq;
    ELSIF p_session IS NOT NULL THEN
        SELECT s.id, s.project, s.agent, s.agent_session_id, s.host, s.user_name, s.cwd, s.branch, s.goal,
               s.status, s.lease_ttl_ms, s.last_seen_us, s.head_checkpoint_id, s.git_base, s.git_head,
               s.summary, s.tool_count, s.resumed_from, s.resumed_by, s.metadata, s.created_us, s.updated_us,
               s.revision, s.written_us, s.author, s.head_revision, s.head_written_us, s.head_author
        INTO id, project, agent, agent_session_id, host, user_name, cwd, branch, goal, status, lease_ttl_ms,
             last_seen_us, head_checkpoint_id, git_base, git_head, summary, tool_count, resumed_from,
             resumed_by, metadata, created_us, updated_us, revision, written_us, author, head_revision,
             head_written_us, head_author
        FROM sessions s WHERE s.id = p_session AND s.project = p_project;
        RETURN NEXT;
    ELSE
        RETURN NEXT;
    END IF;
END
$$;

-- The rows a write adds or writes back, as `baton_apply` takes them.
CREATE TYPE baton_entry AS (id TEXT, category TEXT, branch TEXT, key TEXT, record TEXT, content TEXT,
    rationale TEXT, author BYTEA, revision BIGINT, seq BIGINT, created_us BIGINT, evicted BOOLEAN);
CREATE TYPE baton_record_version AS (record TEXT, revision BIGINT, written_us BIGINT, author BYTEA);
CREATE TYPE baton_session AS (id TEXT, agent INTEGER, agent_session_id TEXT, host TEXT, user_name TEXT,
    cwd TEXT, branch TEXT, goal TEXT, status INTEGER, lease_ttl_ms BIGINT, last_seen_us BIGINT,
    head_checkpoint_id TEXT, git_base TEXT, git_head TEXT, summary TEXT, tool_count BIGINT,
    resumed_from TEXT, resumed_by TEXT, metadata TEXT, created_us BIGINT, updated_us BIGINT,
    revision BIGINT, written_us BIGINT, author BYTEA, head_revision BIGINT, head_written_us BIGINT,
    head_author BYTEA);
CREATE TYPE baton_event AS (revision BIGINT, kind INTEGER, body BYTEA);
CREATE TYPE baton_conflict AS (id TEXT, revision BIGINT, body BYTEA);

-- A write's changes, then its log and the project's new head, time, memory revision (when
-- it changed memory) and caps (when given), in a subtransaction of its own. The changes
-- never touch a row twice and are applied in this order. Returns no row when applied, or
-- the SQLSTATE and message of what failed (everything of the write undone).
CREATE FUNCTION baton_apply(p_project TEXT, p_head BIGINT, p_now_us BIGINT, p_memory_revision BIGINT,
    p_caps TEXT, p_deleted_records TEXT[], p_deleted_entries TEXT[], p_evicted TEXT[],
    p_entries baton_entry[], p_versions baton_record_version[], p_added_sessions baton_session[],
    p_put_sessions baton_session[], p_events baton_event[], p_conflicts baton_conflict[],
    p_request_id TEXT, p_request_hash BYTEA, p_reply BYTEA)
RETURNS TABLE (out_code TEXT, out_message TEXT)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_record TEXT;
BEGIN
    BEGIN
        -- One record at a time, by equality: with `record = ANY(...)` the planner, knowing
        -- nothing of a new project, filtered the project's entries through another index
        -- (1.1 ms a write at 6,000 entries, auto_explain on baton-bench's etcd rows).
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
        UPDATE projects SET head_revision = GREATEST(head_revision, p_head),
            last_write_us = GREATEST(last_write_us, p_now_us),
            memory_revision = COALESCE(p_memory_revision, memory_revision),
            memory_caps = COALESCE(p_caps, memory_caps)
        WHERE key = p_project;
    EXCEPTION WHEN OTHERS THEN
        out_code := SQLSTATE;
        out_message := SQLERRM;
        RETURN NEXT;
    END;
END
$$;
