-- A search's work is bounded by its own project: the full-text index is on (project,
-- words), so a search's `project = $2 AND words @@ query` is one index scan that skips
-- every other project's documents (a GIN index over words alone gave every match in every
-- project, filtered afterwards). `btree_gin` (in Postgres's contrib, a trusted extension)
-- lets a GIN index hold the project key.
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE INDEX search_docs_project_words ON search_docs USING GIN (project, words)
    WITH (fastupdate = on, gin_pending_list_limit = 256);
DROP INDEX search_docs_words;
