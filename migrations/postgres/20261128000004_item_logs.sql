-- Item logs (ItemLogService): an ordered log of opaque items under the caller's key, what
-- agent frameworks keep a conversation in. A log's row carries its counts, its last change
-- and the caller's summary; its items are numbered by `seq`, never reused within the log.
-- Keys are compared by their bytes (prefix listings), whatever the database's collation.
CREATE TABLE item_logs (
    project          TEXT NOT NULL,
    key              TEXT COLLATE "C" NOT NULL,
    items            BIGINT NOT NULL,
    bytes            BIGINT NOT NULL,
    -- The seq of the newest item ever appended (0: none).
    last_seq         BIGINT NOT NULL,
    created_us       BIGINT NOT NULL,
    updated_us       BIGINT NOT NULL,
    revision         BIGINT NOT NULL,
    author           BYTEA NOT NULL,
    -- The caller's summary (a JSON value), the revision that set it and when (0: never).
    summary          TEXT,
    summary_revision BIGINT NOT NULL,
    summary_us       BIGINT NOT NULL,
    PRIMARY KEY (project, key)
);
-- Retention finds the logs idle past --item-log-days.
CREATE INDEX item_logs_updated ON item_logs (updated_us);

CREATE TABLE items (
    project      TEXT NOT NULL,
    log_key      TEXT COLLATE "C" NOT NULL,
    seq          BIGINT NOT NULL,
    -- The caller's id for the item (NULL: none), unique in its log.
    item_key     TEXT,
    content_type TEXT NOT NULL,
    value        BYTEA NOT NULL,
    revision     BIGINT NOT NULL,
    created_us   BIGINT NOT NULL,
    PRIMARY KEY (project, log_key, seq)
);
CREATE UNIQUE INDEX items_key ON items (project, log_key, item_key) WHERE item_key IS NOT NULL;
