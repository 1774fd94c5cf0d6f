-- A digest over a checkpoint's header and structured state, without its payload: lists and
-- the brief verify what they return with it, never reading payloads. Existing rows get it
-- at start-up (the server decompresses and verifies them; SQL cannot), found through the
-- partial index, which is empty once they all have it.
ALTER TABLE checkpoints ADD COLUMN state_digest TEXT;
CREATE INDEX checkpoints_state_digest_missing ON checkpoints (id) WHERE state_digest IS NULL;
