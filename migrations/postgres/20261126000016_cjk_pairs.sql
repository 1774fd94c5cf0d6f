-- Text written without spaces between words (Chinese, Japanese, Korean) is indexed as
-- overlapping pairs of characters now (`core::search::tokens`), where it was one word per
-- run: a word inside a sentence is found. The documents holding such text (the ranges of
-- `tokens::is_cjk`) are dropped and their projects listed for the background indexing
-- (`jobs::search`), which writes them again with the new words after start-up; their
-- searches say `partial` until then.
INSERT INTO search_backfill (project)
SELECT DISTINCT project FROM search_docs WHERE body ~ '[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9d\U00020000-\U0002ffff]'
ON CONFLICT (project) DO NOTHING;
DELETE FROM search_docs WHERE body ~ '[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9d\U00020000-\U0002ffff]';
