-- Reservations (ReservationService, server/src/core/reservation.rs): a session's hold on a
-- repository path or a task key, or its place in the queue for one. Live rows are HELD (2) or
-- WAITING (1) with expires_us still ahead; a write reads a project's live rows under the
-- project's lock and decides. Ended rows (statuses 3-7) stay a day, so that a holder can be
-- told how it lost one, then the reaper removes them.
CREATE TABLE reservations (
    id               TEXT PRIMARY KEY NOT NULL,
    project          TEXT NOT NULL,
    session_id       TEXT NOT NULL,
    -- The request that made it: a request's reservations are granted together.
    request          TEXT NOT NULL,
    -- 'path' or 'task'.
    kind             TEXT NOT NULL,
    target           TEXT NOT NULL,
    -- '' = project-wide.
    branch           TEXT NOT NULL,
    reason           TEXT NOT NULL,
    -- baton.v1.ReservationStatus.
    status           BIGINT NOT NULL,
    -- The holder's Actor (agent, host, user, token), encoded.
    holder           BYTEA NOT NULL,
    created_us       BIGINT NOT NULL,
    -- The revision that made it: the queue's order.
    created_revision BIGINT NOT NULL,
    granted_us       BIGINT NOT NULL,
    -- HELD: when it lapses unless renewed; WAITING: when the wait runs out.
    expires_us       BIGINT NOT NULL,
    ended_us         BIGINT NOT NULL,
    -- TAKEN_OVER: the session that took it.
    ended_by         TEXT NOT NULL,
    revision         BIGINT NOT NULL
);
CREATE INDEX reservations_live ON reservations (project) WHERE status IN (1, 2);
CREATE INDEX reservations_lapse ON reservations (expires_us) WHERE status IN (1, 2);
CREATE INDEX reservations_by_session ON reservations (session_id);
CREATE INDEX reservations_ended ON reservations (ended_us) WHERE status > 2;

-- A project's reservation settings (SetReservationSettings); a project without a row has the
-- defaults.
CREATE TABLE reservation_settings (
    project      TEXT PRIMARY KEY NOT NULL,
    ttl_seconds  BIGINT NOT NULL,
    -- baton.v1.ReservationEnforcement.
    enforcement  BIGINT NOT NULL,
    auto_reserve BIGINT NOT NULL,
    revision     BIGINT NOT NULL
);
