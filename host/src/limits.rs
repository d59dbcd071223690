//! Per-call resource limits of the sandbox.

use std::time::Duration;

/// Limits applied to every tool call (and to `list-tools` at load time).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall-clock deadline of one call, enforced with epoch interruption.
    pub timeout: Duration,
    /// Maximum linear memory of one instance, in bytes (StoreLimits).
    pub memory_bytes: usize,
    /// Maximum size of a tool's JSON result, in bytes.
    pub max_output_bytes: usize,
    /// Bytes of guest stdout/stderr kept for the log (the rest is dropped).
    pub max_log_bytes: usize,
    /// Tool calls running at once; further calls wait.
    pub max_concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(10),
            memory_bytes: 256 << 20,
            max_output_bytes: 8 << 20,
            max_log_bytes: 64 << 10,
            max_concurrency: 16,
        }
    }
}

/// Granularity of the epoch ticker: deadlines are rounded up to this.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

impl Limits {
    /// The timeout as a number of epoch ticks (at least one).
    pub fn epoch_ticks(&self) -> u64 {
        let ticks = self.timeout.as_nanos().div_ceil(EPOCH_TICK.as_nanos());
        (ticks as u64).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_round_up_and_never_zero() {
        let l = Limits { timeout: Duration::from_millis(12), ..Limits::default() };
        assert_eq!(l.epoch_ticks(), 3);
        let l = Limits { timeout: Duration::ZERO, ..Limits::default() };
        assert_eq!(l.epoch_ticks(), 1);
    }
}
