-- Content-addressed chunks of large blobs (agent transcripts), shared by checkpoints.
CREATE TABLE chunks (
    project     TEXT NOT NULL,
    digest      TEXT NOT NULL,
    data        BYTEA NOT NULL,
    size_bytes  BIGINT NOT NULL,
    created_us  BIGINT NOT NULL,
    PRIMARY KEY (project, digest)
);

-- The blobs a checkpoint refers to (encoded baton.v1.BlobRef list; empty = none).
ALTER TABLE checkpoints ADD COLUMN blobs BYTEA NOT NULL DEFAULT '\x';
