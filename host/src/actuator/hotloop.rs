//! Hot loops: a key whose reconciles are woken by the echo of its own
//! previous write, and write again each time.

use std::time::Duration;

/// When echo-woken writes of one key are a hot loop, and how long the host
/// then holds the key back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotLoopConfig {
    /// Consecutive echo-woken writing reconciles within `window` that
    /// declare a hot loop.
    pub writes: u32,
    /// The window they are counted in.
    pub window: Duration,
    /// How long the key is held back after its first hot loop.
    pub backoff: Duration,
    /// The longest hold-back (each hot loop resumed doubles the last).
    pub max_backoff: Duration,
}

impl Default for HotLoopConfig {
    fn default() -> Self {
        HotLoopConfig {
            writes: 10,
            window: Duration::from_secs(30),
            backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(30 * 60),
        }
    }
}
