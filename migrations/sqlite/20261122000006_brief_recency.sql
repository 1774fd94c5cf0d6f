-- The brief's session lookups, each an index range instead of a scan of the project's
-- sessions: other active sessions by last activity, the latest completed session, and the
-- caller's previous session on the same host and user.
CREATE INDEX sessions_project_status_seen ON sessions (project, status, last_seen_us);
CREATE INDEX sessions_project_status_id ON sessions (project, status, id);
CREATE INDEX sessions_project_host_user ON sessions (project, host, user_name, id);
