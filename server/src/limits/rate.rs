//! Request rates, checked by authentication (`auth::Auth`) with `governor`'s GCRA limiters:
//! - per *authenticated* token (its id): however the `authorization` header is spelled,
//!   one token is one bucket, and a request that does not authenticate never makes one;
//! - per client address, for failed authentications (a missing, unknown or revoked token):
//!   an address over its limit is refused before any token lookup until the limit allows
//!   one again, so guessing and floods of made-up tokens are slowed down before they reach
//!   the database (a valid token seen in the last `auth::TTL` still passes).
//!
//! Requests on an open hub (no token exists) are not limited: it listens on loopback by
//! default and has no token to tell callers apart.
//!
//! Both tables are bounded: idle keys are forgotten every minute, and a table that grows
//! past `MAX_KEYS` is pruned at once (and emptied if pruning is not enough).

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::error::Error;

/// Keys one table may hold before it is pruned.
const MAX_KEYS: usize = 65_536;

/// Where a request comes from, for the failed-authentication limit: an IPv4 address, or
/// the /64 of an IPv6 one (one host usually holds a whole /64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    V4(u32),
    /// The first 64 bits.
    V6(u64),
    Unknown,
}

impl Origin {
    pub fn of(ip: Option<IpAddr>) -> Self {
        match ip.map(|ip| ip.to_canonical()) {
            Some(IpAddr::V4(v4)) => Self::V4(u32::from(v4)),
            Some(IpAddr::V6(v6)) => Self::V6((u128::from(v6) >> 64) as u64),
            None => Self::Unknown,
        }
    }
}

/// A wait as a client is told it: seconds, one decimal, at least 0.1.
fn seconds(wait: Duration) -> String {
    format!("{:.1}", wait.as_secs_f64().max(0.1))
}

/// One keyed limiter, replaced by an empty one when pruning cannot bound it.
struct Table<K: std::hash::Hash + Eq + Clone> {
    limiter: RwLock<DefaultKeyedRateLimiter<K>>,
    quota: Quota,
    per_second: u32,
    burst: u32,
}

impl<K: std::hash::Hash + Eq + Clone> Table<K> {
    fn new(per_second: u32, burst: u32) -> Option<Self> {
        let rate = NonZeroU32::new(per_second)?;
        let burst = burst.max(per_second);
        let quota = Quota::per_second(rate).allow_burst(NonZeroU32::new(burst).unwrap_or(rate));
        Some(Self { limiter: RwLock::new(governor::RateLimiter::keyed(quota)), quota, per_second, burst })
    }

    /// One request of `key`: `Err(how long to wait)` when over the limit.
    fn check(&self, key: &K) -> Result<(), Duration> {
        let result = self.limiter.read().unwrap_or_else(PoisonError::into_inner).check_key(key);
        if self.len() > MAX_KEYS {
            self.bound();
        }
        result.map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// Forgets idle keys; empties a table that is still over `MAX_KEYS` (only a flood of
    /// distinct keys gets there, and forgetting them costs each honest client at most one
    /// full burst).
    fn bound(&self) {
        let mut limiter = self.limiter.write().unwrap_or_else(PoisonError::into_inner);
        limiter.retain_recent();
        limiter.shrink_to_fit();
        if limiter.len() > MAX_KEYS {
            tracing::warn!(keys = limiter.len(), "rate limiter table full: emptied");
            *limiter = governor::RateLimiter::keyed(self.quota);
        }
    }

    fn len(&self) -> usize {
        self.limiter.read().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// The limiters and what to tell a client that hits one.
pub struct RateLimits {
    tokens: Option<Table<String>>,
    failures: Option<Table<Origin>>,
    /// Addresses over their failure limit, until when: refused before any lookup.
    blocked: Mutex<HashMap<Origin, Instant>>,
}

impl RateLimits {
    /// `per_second` sustained requests per token with bursts up to `burst` (0 = off), and
    /// `failures_per_second` / `failure_burst` authentication attempts per client address.
    pub fn new(per_second: u32, burst: u32, failures_per_second: u32, failure_burst: u32) -> Self {
        Self {
            tokens: Table::new(per_second, burst),
            failures: Table::new(failures_per_second, failure_burst),
            blocked: Mutex::default(),
        }
    }

    /// No limits (admin commands, tests of other parts).
    pub fn off() -> Self {
        Self { tokens: None, failures: None, blocked: Mutex::default() }
    }

    /// Forgets idle keys; run every minute.
    pub fn prune(&self) {
        if let Some(t) = &self.tokens {
            t.bound();
        }
        if let Some(t) = &self.failures {
            t.bound();
        }
        let now = Instant::now();
        self.blocked.lock().unwrap_or_else(PoisonError::into_inner).retain(|_, until| *until > now);
    }

    /// One request of an authenticated token.
    pub fn token(&self, token_id: &str, name: &str) -> Result<(), Error> {
        let Some(table) = &self.tokens else {
            return Ok(());
        };
        table.check(&token_id.to_owned()).map_err(|wait| {
            Error::ResourceExhausted(format!(
                "rate limit exceeded: token {name:?} may send {} requests/s (bursts of {}; \
                 --rate-limit, --rate-burst); retry in {} s or slow down",
                table.per_second,
                table.burst,
                seconds(wait)
            ))
        })
    }

    fn too_many(table: &Table<Origin>, wait: Duration) -> Error {
        Error::ResourceExhausted(format!(
            "too many failed authentications from this address: {}/s are allowed (bursts of {}; \
             --auth-failure-rate, --auth-failure-burst); check the token, then retry in {} s",
            table.per_second,
            table.burst,
            seconds(wait)
        ))
    }

    /// A failed authentication from `origin`; `Err` once the address is over its limit,
    /// which then also blocks its lookups (`blocked`) until the limit allows one again.
    pub fn failed(&self, origin: Origin) -> Result<(), Error> {
        let Some(table) = &self.failures else {
            return Ok(());
        };
        table.check(&origin).map_err(|wait| {
            let mut blocked = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
            if blocked.len() >= MAX_KEYS {
                let now = Instant::now();
                blocked.retain(|_, until| *until > now);
            }
            if blocked.len() < MAX_KEYS {
                blocked.insert(origin, Instant::now() + wait);
            }
            Self::too_many(table, wait)
        })
    }

    /// Refuses an address that is over its failure limit (before a token lookup).
    pub fn blocked(&self, origin: Origin) -> Result<(), Error> {
        let Some(table) = &self.failures else {
            return Ok(());
        };
        let mut blocked = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        match blocked.get(&origin) {
            Some(until) if *until > Instant::now() => {
                Err(Self::too_many(table, until.saturating_duration_since(Instant::now())))
            }
            Some(_) => {
                blocked.remove(&origin);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Keys held, per table (tests).
    pub fn keys(&self) -> (usize, usize) {
        (self.tokens.as_ref().map_or(0, Table::len), self.failures.as_ref().map_or(0, Table::len))
    }
}

/// Prunes the tables every minute until the server stops.
pub async fn prune_every_minute(
    limits: std::sync::Arc<RateLimits>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut every = tokio::time::interval(Duration::from_mins(1));
    loop {
        tokio::select! {
            _ = every.tick() => limits.prune(),
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_hosts_share_their_64() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap_or(IpAddr::from([0u8; 4]));
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap_or(IpAddr::from([0u8; 4]));
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap_or(IpAddr::from([0u8; 4]));
        assert_eq!(Origin::of(Some(a)), Origin::of(Some(b)));
        assert_ne!(Origin::of(Some(a)), Origin::of(Some(c)));
        let v4: IpAddr = "10.0.0.1".parse().unwrap_or(IpAddr::from([0u8; 4]));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap_or(IpAddr::from([0u8; 4]));
        assert_eq!(Origin::of(Some(v4)), Origin::of(Some(mapped)));
    }

    #[test]
    fn tables_stay_bounded() {
        let limits = RateLimits::new(1, 1, 1, 1);
        for i in 0..(u32::try_from(MAX_KEYS).unwrap() + 5_000) {
            let _ = limits.failed(Origin::of(Some(IpAddr::from(i.to_be_bytes()))));
        }
        assert!(limits.keys().1 <= MAX_KEYS + 1024, "{:?}", limits.keys());
    }

    #[test]
    fn a_token_over_its_rate_is_refused_naming_the_flags() {
        let limits = RateLimits::new(1, 3, 0, 0);
        for _ in 0..3 {
            assert!(limits.token("id-1", "ci").is_ok());
        }
        let refused = limits.token("id-1", "ci").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(refused.contains("--rate-limit") && refused.contains("\"ci\""), "{refused}");
        // Another token is not affected.
        assert!(limits.token("id-2", "alice").is_ok());
    }
}
