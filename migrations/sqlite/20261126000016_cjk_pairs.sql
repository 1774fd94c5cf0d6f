-- Text written without spaces between words (Chinese, Japanese, Korean) is indexed as
-- overlapping pairs of characters now (`core::search::tokens`), where it was one word per
-- run: a word inside a sentence is found. The documents holding such text (the ranges of
-- `tokens::is_cjk`, as GLOB ranges) are dropped and their projects listed for the background indexing
-- (`jobs::search`), which writes them again with the new words after start-up; their
-- searches say `partial` until then.
INSERT OR IGNORE INTO search_backfill (project)
SELECT DISTINCT project FROM search_docs WHERE body GLOB '*[ᄀ-ᇿ぀-ヿ㄰-㆏ㇰ-ㇿ㐀-䶿一-鿿가-힯豈-﫿ｦ-ﾝ𠀀-𯿿]*';
DELETE FROM search_docs WHERE body GLOB '*[ᄀ-ᇿ぀-ヿ㄰-㆏ㇰ-ㇿ㐀-䶿一-鿿가-힯豈-﫿ｦ-ﾝ𠀀-𯿿]*';
