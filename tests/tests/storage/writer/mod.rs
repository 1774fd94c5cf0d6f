//! The batching writer (`baton_server::store::writer`), its cases run on both backends:
//! writes batched in one transaction keep and roll back alone, writes of their own share
//! batches with savepoint writes, leases are bounded for projects a batch does not hold,
//! writes that open their own savepoints, BEGIN riding with the first opening sent, an
//! opening that never ran abandoning its batch, and the lane's connection given back on
//! close. SQLite alone lets the writer send a write's last statements with its own.

mod postgres;
mod sqlite;
