//! Crash and idleness detection: sessions with a lease whose TTL ran out become crashed,
//! sessions without one become idle after the inactivity window. The store makes each
//! change with a conditional update under the project lock, so several instances running
//! this job change a session exactly once. Reservations whose time ran out are ended the
//! same way (`service::reservation::reap`), so that watchers see the lapse.

use std::time::Duration;

use tokio::sync::watch;

use crate::store::{Expiry, Store};

pub async fn run<S: Store>(
    store: S,
    expiry: Expiry,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
        match crate::service::session::expire(&store, expiry).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(sessions = n, "marked sessions idle or crashed"),
            Err(e) => tracing::warn!(error = %e, "session expiry failed; will retry"),
        }
        match crate::service::reservation::reap(&store).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(projects = n, "ended lapsed reservations"),
            Err(e) => tracing::warn!(error = %e, "reservation expiry failed; will retry"),
        }
    }
}
