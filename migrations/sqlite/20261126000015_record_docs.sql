-- A memory record's search documents are found through its entries (`INDEX_DROP_RECORD`),
-- before they are deleted, instead of through an index of the documents by record, which
-- every memory write had to update.
DROP INDEX search_docs_record;
