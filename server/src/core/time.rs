//! Times as Baton stores them (µs since the Unix epoch) and as the API carries them.

use prost_types::Timestamp;

/// Timestamp from µs since the epoch.
pub fn ts(us: i64) -> Timestamp {
    Timestamp {
        seconds: us.div_euclid(1_000_000),
        nanos: i32::try_from(us.rem_euclid(1_000_000) * 1000).unwrap_or(0),
    }
}

/// µs since the epoch from a timestamp (saturating).
pub fn us(ts: &Timestamp) -> i64 {
    ts.seconds.saturating_mul(1_000_000).saturating_add(i64::from(ts.nanos) / 1000)
}

/// Now by this machine's clock, in µs since the epoch (for rows whose time is not a
/// write's: tokens, chunks).
pub fn now_us() -> i64 {
    us(&Timestamp::from(std::time::SystemTime::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for v in [0, 1, 1_700_000_000_123_456, -1] {
            assert_eq!(us(&ts(v)), v);
        }
    }
}
