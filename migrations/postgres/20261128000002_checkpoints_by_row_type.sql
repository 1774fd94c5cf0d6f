-- The write function takes new checkpoints as the table's own row type, so a new column
-- of `checkpoints` needs nothing more here. The composite type that restated its columns
-- goes, and with it the write functions of the servers before this one, which took it.
DROP TYPE baton_checkpoint CASCADE;
