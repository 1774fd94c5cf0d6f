-- Commit links (CommitService, server/src/core/commit.rs): a git commit linked to a session
-- that made it, one row per (commit, session), kept while the project keeps them (they
-- outlive branches and the checkpoints retention prunes).
CREATE TABLE commit_links (
    project         TEXT NOT NULL,
    commit_id       TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    -- '' = the session had no checkpoint yet.
    checkpoint_id   TEXT NOT NULL,
    -- '' = none (a merge, an empty commit).
    patch_id        TEXT NOT NULL,
    -- baton.v1.CommitMadeBy, baton.v1.CommitSeenBy.
    made_by         INTEGER NOT NULL,
    seen_by         INTEGER NOT NULL,
    ambiguous       INTEGER NOT NULL,
    branch          TEXT NOT NULL,
    subject         TEXT NOT NULL,
    committed_us    INTEGER NOT NULL,
    -- The paths it changed, a JSON array of strings.
    files           TEXT NOT NULL,
    prompt          TEXT NOT NULL,
    task            TEXT NOT NULL,
    lines           INTEGER NOT NULL,
    lines_truncated INTEGER NOT NULL,
    created_us      INTEGER NOT NULL,
    revision        INTEGER NOT NULL,
    -- The recording write's Actor, encoded.
    author          BLOB NOT NULL,
    PRIMARY KEY (project, commit_id, session_id)
);
CREATE INDEX commit_links_patch ON commit_links (project, patch_id) WHERE patch_id <> '';
CREATE INDEX commit_links_session ON commit_links (project, session_id, committed_us);
CREATE INDEX commit_links_committed ON commit_links (project, committed_us);
-- Retention finds the links recorded before --commit-link-days.
CREATE INDEX commit_links_created ON commit_links (created_us);

-- The fingerprints of the lines a linked commit added (the CommitService comment says how
-- one is made): a line is found by them after its commit is gone (a squash merge).
CREATE TABLE commit_lines (
    project     TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    commit_id   TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    PRIMARY KEY (project, fingerprint, commit_id, session_id)
);
CREATE INDEX commit_lines_link ON commit_lines (project, commit_id, session_id);
