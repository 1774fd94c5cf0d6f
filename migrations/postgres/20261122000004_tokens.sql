-- Access tokens: only the sha256 of the secret is stored.
CREATE TABLE tokens (
    id            TEXT PRIMARY KEY NOT NULL,
    name          TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL,
    project       TEXT,
    secret_hash   TEXT NOT NULL UNIQUE,
    created_us    BIGINT NOT NULL,
    last_used_us  BIGINT,
    revoked_us    BIGINT
);
