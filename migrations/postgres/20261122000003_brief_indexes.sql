-- The brief reads a project's newest live memory entries and its sessions by status.
CREATE INDEX memory_project_revision ON memory (project, revision);
CREATE INDEX sessions_project_status ON sessions (project, status, updated_us);
