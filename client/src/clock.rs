//! The wall clock as the client stamps writes and ages with it.

/// Now, in µs since the Unix epoch.
pub fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}
