//! Per-call resource limits of the sandbox.

use std::time::Duration;

use crate::disk_budget::DiskLimits;

/// Default result cap: 5 MiB, so 5 + 2 × 5 (worst-case escaping of the text
/// block) stays below a 16 MiB frame.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 5 << 20;

/// Plugin loads (`list-tools`) running at once. They have their own
/// instance slots, so loading never takes a slot from a call.
pub const LOAD_SLOTS: usize = 4;

/// Background tier-ups (Cranelift compiles of plugins loaded on baseline
/// code) running at once: one, in its own lane, so loads never wait behind
/// them (Cranelift spreads one compile over the cores itself). Compiles at
/// once are at most `LOAD_SLOTS + TIER_UP_SLOTS`, however many cold
/// plugins a directory holds.
pub const TIER_UP_SLOTS: usize = 1;

/// Spare instances (see `spare.rs`) alive at once by default: at most one
/// per plugin and filesystem, each in its own instance slot.
pub const DEFAULT_SPARE_INSTANCES: usize = 8;

/// The most spare instances a server may keep (each reserves an instance
/// slot: its address space and its slot's kept-resident pages).
pub const MAX_SPARE_INSTANCES: usize = 256;

/// What one component instance may contain. Instantiating a component with
/// more fails (the plugin is refused at load). The pooling allocator is
/// sized as `(max_concurrency + LOAD_SLOTS + spare_instances) ×` these, so
/// calls admitted by the concurrency limits can never exhaust it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComponentMax {
    pub core_instances: u32,
    pub memories: u32,
    pub tables: u32,
}

impl Default for ComponentMax {
    fn default() -> Self {
        // A componentized Rust plugin has about 5 core instances, 2 memories
        // and 2 tables (module, WASI adapter, shims).
        ComponentMax {
            core_instances: 16,
            memories: 4,
            tables: 16,
        }
    }
}

/// Limits applied to every tool call (and to `list-tools` at load time).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall-clock deadline of one call, from its arrival (waiting for a slot
    /// included) to its end, wherever the guest is (wasm code or a host call).
    pub timeout: Duration,
    /// Deadline of one plugin's `list-tools` at load or reload (its wait for a
    /// load slot is bounded by the same budget per scan).
    pub load_timeout: Duration,
    /// Memory of one call's store: all its linear memories and tables
    /// together (tables count pointer-sized elements), in bytes.
    pub memory_bytes: usize,
    /// Maximum size of a tool's JSON result, in bytes. The default keeps a
    /// whole `tools/call` response (the result twice: `structuredContent`
    /// and an escaped text block) under the 16 MiB frame limit of common
    /// stdio transports (rmcp's included).
    pub max_output_bytes: usize,
    /// Bytes of guest stdout/stderr kept for the log (the rest is dropped).
    pub max_log_bytes: usize,
    /// Tool calls running at once; further calls wait (until their deadline).
    pub max_concurrency: usize,
    /// Calls of one plugin running at once (`None`: half of
    /// `max_concurrency`, rounded up), so one plugin cannot take every slot.
    pub max_concurrency_per_plugin: Option<usize>,
    /// What one component may contain (sizes the instance pool).
    pub per_component: ComponentMax,
    /// Instances made ahead of calls, at most one per plugin and filesystem (0: none;
    /// every call instantiates its own).
    pub spare_instances: usize,
    /// What tools may add to the worktree, per call and in total.
    pub disk: DiskLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(10),
            load_timeout: Duration::from_secs(5),
            memory_bytes: 256 << 20,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_log_bytes: 64 << 10,
            max_concurrency: 16,
            max_concurrency_per_plugin: None,
            per_component: ComponentMax::default(),
            spare_instances: DEFAULT_SPARE_INSTANCES,
            disk: DiskLimits::default(),
        }
    }
}

impl Limits {
    /// Calls of one plugin that may run at once (at least 1, at most
    /// `max_concurrency`).
    pub fn plugin_share(&self) -> usize {
        let max = self.max_concurrency.max(1);
        self.max_concurrency_per_plugin
            .unwrap_or(max.div_ceil(2))
            .clamp(1, max)
    }

    /// Component instances alive at once: one per call slot, load slot
    /// and spare.
    pub fn instance_slots(&self) -> u32 {
        (self.max_concurrency.max(1) + LOAD_SLOTS + self.spare_instances) as u32
    }

    /// Open files the server may need: every instance slot holding its
    /// call's most (`--max-open-files`) plus its preopens, and a reserve
    /// for the server itself (plugin files, the compile cache, logs,
    /// connections).
    pub fn open_files_needed(&self) -> u64 {
        const PREOPENS_AND_STDIO: u64 = 8;
        const SERVER_RESERVE: u64 = 512;
        let per_slot = self.disk.call_open_files + PREOPENS_AND_STDIO;
        u64::from(self.instance_slots()) * per_slot + SERVER_RESERVE
    }
}

/// Raises the process's soft limit on open files to its hard limit (as
/// servers holding many descriptors do) and returns the limit now in force,
/// so that calls held to `--max-open-files` together stay under it.
pub fn raise_open_file_limit() -> std::io::Result<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        setrlimit(Resource::Nofile, limit)?;
    }
    Ok(limit.current.unwrap_or(u64::MAX))
}

/// Period of the epoch ticker: guests yield to the executor this often,
/// and deadlines are checked at this granularity.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The memory budget of one store (one call): every linear memory and table
/// of every core instance of the call counts against one total, including
/// the initial allocations made at instantiation. Going over traps, and
/// [`StoreLimiter::exceeded`] tells the memory limit apart from other traps.
#[derive(Debug)]
pub struct StoreLimiter {
    budget: usize,
    used: usize,
    /// The most `used` has been.
    peak: usize,
    /// The last charge, refunded if wasmtime reports that growth failed.
    last: usize,
    exceeded: bool,
    per_component: ComponentMax,
}

/// Bytes a table element takes in wasmtime (pointer-sized).
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

impl StoreLimiter {
    pub fn new(budget: usize, per_component: ComponentMax) -> Self {
        StoreLimiter {
            budget,
            used: 0,
            peak: 0,
            last: 0,
            exceeded: false,
            per_component,
        }
    }

    /// Did the call try to go over its memory budget?
    pub fn exceeded(&self) -> bool {
        self.exceeded
    }

    /// Bytes of memories and tables the store holds now.
    pub fn used(&self) -> usize {
        self.used
    }

    /// The most memory and tables the store held at once.
    pub fn peak(&self) -> usize {
        self.peak
    }

    fn charge(&mut self, bytes: usize) -> wasmtime::Result<bool> {
        match self.used.checked_add(bytes) {
            Some(total) if total <= self.budget => {
                self.used = total;
                self.peak = self.peak.max(total);
                self.last = bytes;
                Ok(true)
            }
            _ => {
                self.exceeded = true;
                wasmtime::bail!(
                    "memory limit: the call's memories and tables would take more than {} bytes",
                    self.budget
                )
            }
        }
    }

    fn refund_last(&mut self) {
        self.used -= std::mem::take(&mut self.last);
    }
}

impl wasmtime::ResourceLimiter for StoreLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.charge(desired.saturating_sub(current))
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.refund_last();
        Ok(())
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let elements = desired.saturating_sub(current);
        self.charge(elements.saturating_mul(TABLE_ELEMENT_BYTES))
    }

    fn table_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.refund_last();
        Ok(())
    }

    fn instances(&self) -> usize {
        self.per_component.core_instances as usize
    }

    fn memories(&self) -> usize {
        self.per_component.memories as usize
    }

    fn tables(&self) -> usize {
        self.per_component.tables as usize
    }
}

/// Runs `fut` until `deadline`: its output, or `None` when the deadline
/// passed first (the future is then dropped wherever it was). The one
/// deadline rule behind call slots, load slots and the call itself.
pub async fn before<F: std::future::Future>(
    deadline: std::time::Instant,
    fut: F,
) -> Option<F::Output> {
    let at = tokio::time::Instant::from_std(deadline);
    tokio::time::timeout_at(at, fut).await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn a_plugin_gets_half_the_slots_unless_told_otherwise() {
        let with = |max, per| Limits {
            max_concurrency: max,
            max_concurrency_per_plugin: per,
            ..Limits::default()
        };
        assert_eq!(with(16, None).plugin_share(), 8);
        assert_eq!(with(3, None).plugin_share(), 2);
        assert_eq!(with(1, None).plugin_share(), 1);
        assert_eq!(with(4, Some(1)).plugin_share(), 1);
        assert_eq!(with(4, Some(9)).plugin_share(), 4);
        assert_eq!(with(4, Some(0)).plugin_share(), 1);
        let slots = 4 + LOAD_SLOTS + DEFAULT_SPARE_INSTANCES;
        assert_eq!(with(4, None).instance_slots(), slots as u32);
        let no_spares = Limits {
            spare_instances: 0,
            ..with(4, None)
        };
        assert_eq!(no_spares.instance_slots(), (4 + LOAD_SLOTS) as u32);
    }

    #[test]
    fn memories_and_tables_share_one_budget() {
        let mut l = StoreLimiter::new(1 << 20, ComponentMax::default());
        assert!(l.memory_growing(0, 512 << 10, None).unwrap());
        assert!(l.table_growing(0, 1024, None).unwrap());
        assert_eq!(l.used(), (512 << 10) + 1024 * TABLE_ELEMENT_BYTES);
        // A failed growth is refunded.
        assert!(l.memory_growing(0, 256 << 10, None).unwrap());
        l.memory_grow_failed(wasmtime::format_err!("no")).unwrap();
        assert_eq!(l.used(), (512 << 10) + 1024 * TABLE_ELEMENT_BYTES);
        assert!(!l.exceeded());
        // Another memory that alone would fit does not fit with the rest.
        assert!(l.memory_growing(0, 512 << 10, None).is_err());
        assert!(l.exceeded());
    }
}
