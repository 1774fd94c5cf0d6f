//! The batching writer (`baton_server::store::writer`), its cases run on both backends:
//! writes batched in one transaction keep and roll back alone, answered only once their
//! batch commits; locks bounded for projects a batch does not hold, and a write whose
//! bounded lock runs out started again in a batch of its own; what kept writes leave to run
//! on commit; a body that panics; writes that take no lock; the lane's connection closed on
//! close. Postgres alone can have the writer's connection terminated under it.

mod postgres;
mod sqlite;
