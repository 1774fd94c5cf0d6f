-- The revision of the last write that changed the project's memory: the brief keeps its
-- memory section while this is unchanged (set by the project lock of such writes).
ALTER TABLE projects ADD COLUMN memory_revision INTEGER NOT NULL DEFAULT 0;
