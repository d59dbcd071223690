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

/// Period of the epoch ticker: guests yield to the executor this often,
/// and deadlines are checked at this granularity.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);
