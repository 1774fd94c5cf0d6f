-- Event-log compaction: events below this revision were deleted (0 = none ever were).
ALTER TABLE projects ADD COLUMN events_from BIGINT NOT NULL DEFAULT 0;
