//! Per-call resource limits of the sandbox.

use std::time::Duration;

use crate::disk_budget::DiskLimits;

/// Default result cap: 5 MiB, so 5 + 2 × 5 (worst-case escaping of the text
/// block) stays below a 16 MiB frame.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 5 << 20;

/// Limits applied to every tool call (and to `list-tools` at load time).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall-clock deadline of one call, enforced with epoch interruption.
    pub timeout: Duration,
    /// Maximum linear memory of one instance, in bytes (StoreLimits).
    pub memory_bytes: usize,
    /// Maximum size of a tool's JSON result, in bytes. The default keeps a
    /// whole `tools/call` response (the result twice: `structuredContent`
    /// and an escaped text block) under the 16 MiB frame limit of common
    /// stdio transports (rmcp's included).
    pub max_output_bytes: usize,
    /// Bytes of guest stdout/stderr kept for the log (the rest is dropped).
    pub max_log_bytes: usize,
    /// Tool calls running at once; further calls wait.
    pub max_concurrency: usize,
    /// What tools may add to the worktree, per call and in total.
    pub disk: DiskLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(10),
            memory_bytes: 256 << 20,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_log_bytes: 64 << 10,
            max_concurrency: 16,
            disk: DiskLimits::default(),
        }
    }
}

/// Period of the epoch ticker: guests yield to the executor this often,
/// and deadlines are checked at this granularity.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);
