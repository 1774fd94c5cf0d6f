//! The targets of the write, checkpoint and resume rows: no row may fall more than 15%
//! behind the server before the write path was made plain (commit 1a7b6d9), as a same-run
//! A/B measured it. How each is derived, and the measured figures it comes from, are in
//! docs/performance.md ("What each row measures", and run R10 under "The plain write path").

use std::time::Duration;

use baton_tests::Backend;

/// One backend's targets.
pub struct Targets {
    /// Baton/floor throughput, one hot project and 100 projects.
    pub hot: f64,
    pub spread: f64,
    /// Baton/floor p99 of 50 KB checkpoint creates, at most.
    pub checkpoint_p99: f64,
    /// Resume's p99, at most.
    pub resume_p99: Duration,
    /// Baton/etcd throughput at 1, 8 and 32 clients.
    pub etcd: [f64; 3],
}

pub fn of(backend: Backend) -> Targets {
    match backend {
        Backend::Sqlite => Targets {
            hot: HOT_SQLITE,
            spread: SPREAD_SQLITE,
            checkpoint_p99: CKPT_SQLITE,
            resume_p99: Duration::from_millis(5),
            etcd: ETCD_SQLITE,
        },
        Backend::Postgres => Targets {
            hot: HOT_PG,
            spread: SPREAD_PG,
            checkpoint_p99: CKPT_PG,
            resume_p99: RESUME_PG,
            etcd: ETCD_PG,
        },
    }
}

// Derived from R10's medians of the server before (docs/performance.md).
const HOT_SQLITE: f64 = 1.02;
const SPREAD_SQLITE: f64 = 0.96;
const CKPT_SQLITE: f64 = 0.64;
const ETCD_SQLITE: [f64; 3] = [0.47, 0.30, 0.24];
const HOT_PG: f64 = 1.00;
const SPREAD_PG: f64 = 0.48;
const CKPT_PG: f64 = 0.28;
const RESUME_PG: Duration = Duration::from_micros(9810);
const ETCD_PG: [f64; 3] = [0.38, 0.23, 0.17];
