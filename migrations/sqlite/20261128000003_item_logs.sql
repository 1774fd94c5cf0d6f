-- Item logs (ItemLogService): an ordered log of opaque items under the caller's key, what
-- agent frameworks keep a conversation in. A log's row carries its counts, its last change
-- and the caller's summary; its items are numbered by `seq`, never reused within the log.
CREATE TABLE item_logs (
    project          TEXT NOT NULL,
    key              TEXT NOT NULL,
    items            INTEGER NOT NULL,
    bytes            INTEGER NOT NULL,
    -- The seq of the newest item ever appended (0: none).
    last_seq         INTEGER NOT NULL,
    created_us       INTEGER NOT NULL,
    updated_us       INTEGER NOT NULL,
    revision         INTEGER NOT NULL,
    author           BLOB NOT NULL,
    -- The caller's summary (a JSON value), the revision that set it and when (0: never).
    summary          TEXT,
    summary_revision INTEGER NOT NULL,
    summary_us       INTEGER NOT NULL,
    PRIMARY KEY (project, key)
);
-- Retention finds the logs idle past --item-log-days.
CREATE INDEX item_logs_updated ON item_logs (updated_us);

CREATE TABLE items (
    project      TEXT NOT NULL,
    log_key      TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    -- The caller's id for the item (NULL: none), unique in its log.
    item_key     TEXT,
    content_type TEXT NOT NULL,
    value        BLOB NOT NULL,
    revision     INTEGER NOT NULL,
    created_us   INTEGER NOT NULL,
    PRIMARY KEY (project, log_key, seq)
);
CREATE UNIQUE INDEX items_key ON items (project, log_key, item_key) WHERE item_key IS NOT NULL;
