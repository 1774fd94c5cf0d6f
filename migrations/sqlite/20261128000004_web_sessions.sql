-- The web view's signed-in browsers (server/src/web): one row per sign-in, kept in the
-- database so that every server over it knows them. Only the sha256 of the cookie's secret
-- is stored; the token is named by its own secret's hash (NULL: signed in to an open hub, no
-- tokens). A row lives until its browser signs out or it expires; a revoked token's rows stop
-- working at once (each use checks the token) and are removed when they expire.
CREATE TABLE web_sessions (
    secret_hash  TEXT PRIMARY KEY NOT NULL,
    token_hash   TEXT,
    created_us   INTEGER NOT NULL,
    expires_us   INTEGER NOT NULL
);
CREATE INDEX web_sessions_by_expiry ON web_sessions (expires_us);
