//! The batching writer (`baton_server::store::writer`), its cases run on both backends:
//! writes batched in one transaction keep and roll back alone, writes of their own share
//! batches with savepoint writes, leases are bounded for projects a batch does not hold,
//! writes that open their own savepoints, BEGIN riding with the first opening sent, an
//! opening that never ran abandoning its batch, the lane's connection given back on close,
//! a COMMIT that begins the next transaction, what kept writes leave to run on commit, and a
//! kept write's last statement handed to the write after it (`handover.rs`). SQLite alone lets the writer send a
//! write's last statements with its own; Postgres alone shows a transaction begun ahead in
//! `pg_stat_activity`, and can have its connection terminated under it.

mod postgres;
mod sqlite;
