//! The sandbox: one wasmtime [`Engine`] per server, one fresh [`Store`] per
//! call whose only capability is the task worktree, preopened as `/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{Config, Engine, Store, UpdateDeadline};
use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::disk_budget::{CallBudget, Totals, WorktreeUsage};
use crate::disk_guard::GuardedFs;
use crate::grants::{Filesystem, Grant};
use crate::limits::{Limits, StoreLimiter, EPOCH_TICK};
use crate::logpipe::LogPipe;

/// File operations run on the calling thread (which already runs the
/// guest) instead of a spawn_blocking round trip per operation; the
/// descriptors `disk_guard` opens itself say the same.
pub const ALLOW_BLOCKING_CURRENT_THREAD: bool = true;

/// Most bytes one `get-random-bytes` (or `get-insecure-random-bytes`) may
/// ask for; more traps the call. wasmtime-wasi's default, 64 MiB, was one
/// uninterruptible host call of ~330 ms, allocated on the host outside the
/// call's memory limit (eight calls looping on it held up other plugins'
/// calls for 2 s; a helper's find). Seeds, keys and UUIDs take bytes.
pub const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// Most WASI resources (descriptors, streams, pollables, listings, ...)
/// one call's guest may hold at once; the next traps the call. Each is
/// host memory the memory limit does not see (a pollable ~290 bytes), and
/// wasmtime's default allows a million. Files are bounded lower still
/// (`--max-open-files`).
pub const MAX_RESOURCES_PER_CALL: usize = 16_384;

/// How the worktree is mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsAccess {
    ReadOnly,
    ReadWrite,
}

/// What the guest's WASI clocks show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Clocks {
    /// The host's wall and monotonic clocks (WASI's defaults).
    #[default]
    Real,
    /// Wall clock frozen at the server's start (whole seconds), monotonic
    /// clock frozen at zero: a tool can neither read the time nor time
    /// anything. (The deadline still applies: it is enforced by the host.)
    Frozen,
}

/// Options that shape the engine and the stores made from it.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Use the pooling instance allocator (faster instantiation).
    pub pooling: bool,
    pub clocks: Clocks,
    /// Also build the baseline tier (Winch), so that a plugin missing from
    /// the compile cache is served before Cranelift has compiled it.
    pub baseline_tier: bool,
}

/// Which compiler made a plugin's code: Cranelift (optimized, what the
/// compile cache holds) or Winch (a single-pass baseline compiler, about
/// 5× faster to compile, slower code; tier 1 in wasmtime on x86_64, like
/// Cranelift). A plugin not in the cache starts on the baseline and moves
/// to optimized code once Cranelift has compiled it in the background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeTier {
    Optimized,
    Baseline,
}

/// An engine and the linker of everything a plugin may import.
struct Tier {
    engine: Engine,
    linker: Linker<StoreState>,
}

impl Tier {
    fn new(engine: Engine) -> Result<Tier> {
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(anyhow::Error::from)
            .context("adding WASI 0.2 to the linker")?;
        crate::disk_guard::add_to_linker(&mut linker, |s: &mut StoreState| GuardedFs {
            fs: WasiFilesystemCtxView {
                ctx: s.wasi.filesystem(),
                table: &mut s.table,
            },
            budget: &s.disk,
            empty_root: s.empty_root,
        })?;
        Ok(Tier { engine, linker })
    }
}

struct FrozenWall(std::time::Duration);

impl wasmtime_wasi::HostWallClock for FrozenWall {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }
    fn now(&self) -> std::time::Duration {
        self.0
    }
}

struct FrozenMonotonic;

impl wasmtime_wasi::HostMonotonicClock for FrozenMonotonic {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// State of one store: WASI context, its resource table and the limiter.
pub struct StoreState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: StoreLimiter,
    /// What this call may still add to the worktree.
    pub disk: CallBudget,
    pub stdout: LogPipe,
    pub stderr: LogPipe,
    /// The empty root preopened under a `none` or narrowed grant (its
    /// listing is refused, see `disk_guard`).
    pub empty_root: Option<DirId>,
    /// Past this the guest is interrupted (at its next epoch tick).
    deadline: Instant,
}

impl StoreState {
    /// The store's memory accounting (did the call hit its memory limit?).
    pub fn limiter(&self) -> &StoreLimiter {
        &self.limiter
    }
}

/// Gives the guest of `store` until `deadline` (a spare instance made
/// before its call gets the call's deadline this way), counting epoch
/// ticks from now.
pub fn set_deadline(store: &mut Store<StoreState>, deadline: Instant) {
    store.data_mut().deadline = deadline;
    store.set_epoch_deadline(1);
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Engine + linker + the policy every store is built from.
pub struct Sandbox {
    optimized: Tier,
    /// `None` unless [`EngineOptions::baseline_tier`] (and Winch is
    /// available on this machine).
    baseline: Option<Tier>,
    worktree: Option<PathBuf>,
    access: FsAccess,
    limits: Limits,
    /// What all calls together have added to the worktree.
    disk_usage: Arc<WorktreeUsage>,
    /// What each plugin's calls have added to it, by plugin name (kept
    /// across reloads, so a reloaded plugin does not get a fresh share).
    plugin_disk: Mutex<HashMap<String, Arc<Totals>>>,
    /// `Some(wall time)` when clocks are frozen.
    frozen_at: Option<std::time::Duration>,
    /// Preopened as `/` where a grant gives less than the whole worktree.
    empty_root: Option<EmptyRoot>,
    /// One permit per spare instance (`Limits::spare_instances`).
    spare_slots: Arc<Semaphore>,
    _ticker: EpochTicker,
}

/// A directory's identity (device, inode).
pub type DirId = (u64, u64);

/// An empty directory that can never hold anything: made in the temp dir,
/// opened, then removed (the kernel refuses to create entries in a removed
/// directory). Preopened read-only as `/` for a `none` grant, and below the
/// granted subdirectories of a narrowed one, so that a write anywhere a
/// grant does not reach is a host call through a read-only descriptor
/// (reported as `permission_denied`) instead of failing inside the guest,
/// where the host never sees it.
struct EmptyRoot {
    fd: std::os::fd::OwnedFd,
    id: DirId,
}

impl EmptyRoot {
    fn new() -> Result<EmptyRoot> {
        use std::os::unix::fs::MetadataExt;
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("wasm-mcp-empty-{}-{nanos}-{seq}", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        let opened = std::fs::File::open(&path);
        let removed = std::fs::remove_dir(&path);
        let file = opened?;
        removed?;
        let meta = file.metadata()?;
        Ok(EmptyRoot {
            id: (meta.dev(), meta.ino()),
            fd: file.into(),
        })
    }

    fn proc_path(&self) -> String {
        use std::os::fd::AsRawFd;
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }
}

impl Sandbox {
    /// `worktree: None` builds stores with no filesystem at all (used to
    /// read plugin metadata).
    pub fn new(
        worktree: Option<&Path>,
        access: FsAccess,
        limits: Limits,
        opts: &EngineOptions,
    ) -> Result<Self> {
        let optimized = Tier::new(build_engine(&limits, opts)?)?;
        let baseline = match opts.baseline_tier {
            true => baseline_engine().map(Tier::new).transpose()?,
            false => None,
        };
        let worktree = match worktree {
            Some(w) => Some(
                w.canonicalize()
                    .with_context(|| format!("worktree {} is not accessible", w.display()))?,
            ),
            None => None,
        };
        if let Some(w) = &worktree {
            anyhow::ensure!(w.is_dir(), "worktree {} is not a directory", w.display());
        }
        // Both engines' epochs: a baseline guest's deadline is enforced too.
        let engines = std::iter::once(&optimized)
            .chain(&baseline)
            .map(|t| t.engine.clone())
            .collect();
        let ticker = EpochTicker::start(engines);
        let frozen_at = (opts.clocks == Clocks::Frozen).then(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            std::time::Duration::from_secs(now.as_secs())
        });
        let empty_root = EmptyRoot::new()
            .inspect_err(|e| tracing::warn!("no empty root for narrowed grants: {e:#}"))
            .ok();
        Ok(Sandbox {
            optimized,
            baseline,
            worktree,
            access,
            spare_slots: Arc::new(Semaphore::new(limits.spare_instances)),
            limits,
            disk_usage: Arc::default(),
            plugin_disk: Default::default(),
            frozen_at,
            empty_root,
            _ticker: ticker,
        })
    }

    /// What the calls of the plugin named `name` have added to the
    /// worktree, over the server's life.
    pub fn plugin_disk_usage(&self, name: &str) -> Arc<Totals> {
        let mut all = self.plugin_disk.lock().unwrap_or_else(|e| e.into_inner());
        all.entry(name.to_owned()).or_default().clone()
    }

    /// Tells the disk budgets how many plugins publish a tool that may
    /// write to the worktree (see [`WorktreeUsage::note_writers`]).
    pub fn note_disk_writers(&self, n: usize) {
        self.disk_usage.note_writers(n);
    }

    /// The optimizing engine (Cranelift), whose code the compile cache holds.
    pub fn engine(&self) -> &Engine {
        &self.optimized.engine
    }

    /// The engine of `tier` (`None`: no baseline tier here).
    pub fn engine_of(&self, tier: CodeTier) -> Option<&Engine> {
        self.tier(tier).map(|t| &t.engine)
    }

    /// The optimizing engine's linker.
    pub fn linker(&self) -> &Linker<StoreState> {
        &self.optimized.linker
    }

    /// The linker of `tier`'s engine.
    pub fn linker_of(&self, tier: CodeTier) -> Option<&Linker<StoreState>> {
        self.tier(tier).map(|t| &t.linker)
    }

    fn tier(&self, tier: CodeTier) -> Option<&Tier> {
        match tier {
            CodeTier::Optimized => Some(&self.optimized),
            CodeTier::Baseline => self.baseline.as_ref(),
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The right to keep one spare instance, if one of the
    /// `--spare-instances` is free (held as long as the spare lives).
    pub fn spare_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.spare_slots.clone().try_acquire_owned().ok()
    }

    /// The most filesystem access any store gets (`--read-only` or not).
    pub fn max_filesystem(&self) -> Filesystem {
        match self.access {
            FsAccess::ReadOnly => Filesystem::ReadOnly,
            FsAccess::ReadWrite => Filesystem::ReadWrite,
        }
    }

    /// The server's own rights (what a plugin gets without a config file).
    pub fn server_grant(&self) -> Grant {
        Grant::server(&self.limits, self.max_filesystem())
    }

    /// A fresh store with the server's own rights: the worktree (if
    /// `with_fs`), the server's memory and disk limits.
    pub fn new_store(&self, with_fs: bool, deadline: Instant) -> Result<Store<StoreState>> {
        self.new_store_in(self.engine(), with_fs, deadline)
    }

    /// [`Sandbox::new_store`] in `engine` (one of this sandbox's tiers:
    /// the engine of the code to run in it).
    pub fn new_store_in(
        &self,
        engine: &Engine,
        with_fs: bool,
        deadline: Instant,
    ) -> Result<Store<StoreState>> {
        let grant = self.server_grant();
        let fs = with_fs.then_some(grant.filesystem);
        // Counted with no plugin's calls: the server's own rights.
        self.build_store(engine, &grant, fs, Arc::default(), deadline)
    }

    /// A fresh store under `grant`, whose filesystem is `fs` (the grant's,
    /// or less): no env, no args, no stdin, no network, bounded
    /// stdout/stderr, the grant's memory and disk limits, and the call's
    /// `deadline` for wasm code (host calls are bounded by the caller, see
    /// `plugin.rs`), in `engine` (the engine of the code to run in it).
    pub fn new_store_for(
        &self,
        engine: &Engine,
        grant: &Grant,
        fs: Filesystem,
        plugin_disk: &Arc<Totals>,
        deadline: Instant,
    ) -> Result<Store<StoreState>> {
        self.build_store(engine, grant, Some(fs), plugin_disk.clone(), deadline)
    }

    /// A store under `grant` with the filesystem `fs` (`None`: no
    /// preopened directory at all, as `list-tools` runs), whose writes are
    /// charged to `plugin_disk` too.
    fn build_store(
        &self,
        engine: &Engine,
        grant: &Grant,
        fs: Option<Filesystem>,
        plugin_disk: Arc<Totals>,
        deadline: Instant,
    ) -> Result<Store<StoreState>> {
        let stdout = LogPipe::new(self.limits.max_log_bytes);
        let stderr = LogPipe::new(self.limits.max_log_bytes);
        let mut b = WasiCtxBuilder::new();
        b.stdout(stdout.clone()).stderr(stderr.clone());
        b.allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        b.socket_addr_check(|_, _| Box::pin(async { false }));
        b.allow_blocking_current_thread(ALLOW_BLOCKING_CURRENT_THREAD);
        b.max_random_size(MAX_RANDOM_BYTES);
        if let Some(at) = self.frozen_at {
            b.wall_clock(FrozenWall(at))
                .monotonic_clock(FrozenMonotonic);
        }
        let empty_root = match fs {
            Some(fs) => self.preopen(&mut b, grant, fs.min(self.max_filesystem()))?,
            None => None,
        };
        let memory = grant.memory_bytes.min(self.limits.memory_bytes);
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES_PER_CALL);
        let state = StoreState {
            wasi: b.build(),
            table,
            limiter: StoreLimiter::new(memory, self.limits.per_component),
            disk: CallBudget::new(grant.disk, plugin_disk, self.disk_usage.clone()),
            stdout,
            stderr,
            empty_root,
            deadline,
        };
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limiter);
        // Every epoch tick the guest yields to the async executor (so a
        // long-running call never starves other requests on this worker
        // thread); past the call's deadline it is interrupted with a trap.
        // The yield is tokio's, which lets the runtime poll its I/O before
        // the guest runs again: a plain wake (`UpdateDeadline::Yield`) put
        // it straight back in the queue, and the connection's socket or pipe
        // was read only every 61st tick, so a `ping` waited ~270 ms behind
        // one spinning call (a helper's find).
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|store| {
            Ok(if Instant::now() >= store.data().deadline {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()))
            })
        });
        Ok(store)
    }
}

impl Sandbox {
    /// Preopens what `grant` gives with `fs`: the worktree (or its granted
    /// subdirectories) and, where that is less than the whole worktree,
    /// the empty root as `/` (whose id is returned).
    fn preopen(
        &self,
        b: &mut WasiCtxBuilder,
        grant: &Grant,
        fs: Filesystem,
    ) -> Result<Option<DirId>> {
        let Some(w) = &self.worktree else {
            return Ok(None);
        };
        let perms = fs_perms(fs);
        if let (Some(perms), None) = (perms, &grant.paths) {
            b.preopened_dir(w, "/", perms)
                .map_err(anyhow::Error::from)
                .context("preopening the worktree")?;
            return Ok(None);
        }
        let root = match &self.empty_root {
            Some(root) => {
                b.preopened_dir(root.proc_path(), "/", FsPerms::ReadOnly)
                    .map_err(anyhow::Error::from)
                    .context("preopening the empty root")?;
                Some(root.id)
            }
            None => None,
        };
        if let (Some(perms), Some(paths)) = (perms, &grant.paths) {
            preopen_paths(b, w, paths, perms)?;
        }
        Ok(root)
    }
}

fn fs_perms(fs: Filesystem) -> Option<FsPerms> {
    match fs {
        Filesystem::None => None,
        Filesystem::ReadOnly => Some(FsPerms::ReadOnly),
        Filesystem::ReadWrite => Some(FsPerms::ReadWrite),
    }
}

/// Preopens each of a narrowed grant's subdirectories at its own path
/// (`/src`, ...), so tools see the same paths as in the worktree and
/// nothing beside them. A subdirectory is opened from the worktree one component at a time
/// without following symlinks (a `src` swapped for a link to `/` is not
/// granted; a missing one is skipped), and that very directory is
/// preopened through `/proc/self/fd`: no path is resolved twice.
fn preopen_paths(
    b: &mut WasiCtxBuilder,
    worktree: &Path,
    paths: &[String],
    perms: FsPerms,
) -> Result<()> {
    for rel in paths {
        match open_beneath(worktree, rel) {
            Ok(fd) => {
                use std::os::fd::AsRawFd;
                let proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
                b.preopened_dir(&proc, format!("/{rel}"), perms)
                    .map_err(anyhow::Error::from)
                    .with_context(|| format!("preopening {rel}"))?;
            }
            Err(e) => tracing::debug!(path = %rel, "granted subdirectory not preopened: {e}"),
        }
    }
    Ok(())
}

/// Opens the directory `rel` (normal components only, checked by the
/// grant) below `root`, refusing a symlink at any component.
fn open_beneath(root: &Path, rel: &str) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open(root, flags, Mode::empty())?;
    for comp in rel.split('/').filter(|c| !c.is_empty()) {
        dir = rustix::fs::openat(&dir, comp, flags | OFlags::NOFOLLOW, Mode::empty())?;
    }
    Ok(dir)
}

/// What every engine of the sandbox is configured with.
fn base_config() -> Config {
    let mut cfg = Config::new();
    cfg.wasm_component_model(true);
    cfg.epoch_interruption(true);
    // Guests get a bounded native stack too.
    cfg.max_wasm_stack(1 << 20);
    // For profiling guests with `perf`: JIT code symbols in /tmp/perf-PID.map.
    if std::env::var_os("WASM_MCP_PERFMAP").is_some() {
        cfg.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    cfg
}

/// An engine that compiles code `tier`'s engine can load (a compile
/// child's: [`crate::compile_child`]): the same configuration, less the
/// instance allocator, which compiled code does not depend on.
pub fn compile_engine(tier: CodeTier) -> Result<Engine> {
    let mut cfg = base_config();
    if tier == CodeTier::Baseline {
        cfg.strategy(wasmtime::Strategy::Winch);
    }
    Engine::new(&cfg)
        .map_err(anyhow::Error::from)
        .context("creating the compiler's engine")
}

/// The baseline tier's engine: Winch, with on-demand allocation (it runs
/// only the calls made before Cranelift's code is ready, so it reserves no
/// pool); the same limits apply (memory through the store's limiter, the
/// epoch deadline, the wasm stack). `None` where Winch cannot run.
fn baseline_engine() -> Option<Engine> {
    let mut cfg = base_config();
    cfg.strategy(wasmtime::Strategy::Winch);
    match Engine::new(&cfg) {
        Ok(engine) => Some(engine),
        Err(e) => {
            tracing::warn!(
                "no baseline compiler ({e:#}): plugins not in the compile cache wait for Cranelift"
            );
            None
        }
    }
}

fn build_engine(limits: &Limits, opts: &EngineOptions) -> Result<Engine> {
    let mut cfg = base_config();
    if opts.pooling {
        cfg.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool_config(
            limits,
        )));
        match Engine::new(&cfg) {
            Ok(engine) => return Ok(engine),
            Err(e) => {
                tracing::warn!("pooling allocator unavailable ({e:#}); using on-demand allocation");
                cfg.allocation_strategy(wasmtime::InstanceAllocationStrategy::OnDemand);
            }
        }
    }
    Engine::new(&cfg)
        .map_err(anyhow::Error::from)
        .context("creating the wasmtime engine")
}

/// Bytes of each pooled linear memory kept resident between calls: enough
/// for a small call of the workspace plugin to find its pages there next
/// time (it touches at most 16 pages, exactly this much: at this size its
/// resets decommit nothing, at 32 KiB every one does; a plugin whose small
/// calls touch more pays a `madvise` and the faults of the rest at each).
/// Without userfaultfd write protection, `PAGEMAP_SCAN` reports every
/// present page as written, so a freed slot `memset`s its resident
/// pages up to this much on every reset, whatever the call touched, and
/// decommits the rest: once one large call has filled a slot's quota with
/// its own pages, every later small call in that slot pays the whole
/// `memset`, a `madvise` (with its TLB shootdown) and the faults of its
/// pages past the quota. With 8 MiB, one 1.9 MB read left ~5 MB resident
/// (small calls after it, in process 27 → 219 µs; served p50 0.193 →
/// 0.414 ms, the bench's "again" row). With 256 KiB, one large read took
/// small calls from ~600 to ~350–400 resets per 100 ms (served 0.158 →
/// 0.248 ms in that run); with 64 KiB 541–586 → 485–535 (0.173 → 0.182
/// ms), and six A/B runs of the sequential section, the two sizes taking
/// turns: small p50 0.160 / 0.166 ms, small after large 0.168 / 0.184 ms,
/// 1.9 MB 5.93 / 5.95 ms (64 / 256 KiB); in process both the same (call
/// 20.2–20.9 µs, instantiation 8.9–9.0 µs). At 32 KiB a small call's own
/// pages no longer fit: a `madvise` at every reset. A large call faults
/// in what it touches past this, and a slot keeps at most this much.
const KEEP_RESIDENT_BYTES: usize = 64 << 10;

/// Bytes of each pooled table kept resident between calls.
const KEEP_RESIDENT_TABLE_BYTES: usize = 64 << 10;

/// The instance pool, sized so that every call and load slot can hold one
/// component of the largest admitted shape at once: admitted calls never
/// find it exhausted.
fn pool_config(limits: &Limits) -> wasmtime::PoolingAllocationConfig {
    let slots = limits.instance_slots();
    let per = limits.per_component;
    let mut pool = wasmtime::PoolingAllocationConfig::default();
    pool.total_component_instances(slots)
        .max_core_instances_per_component(per.core_instances)
        .max_memories_per_component(per.memories)
        .max_tables_per_component(per.tables)
        .total_core_instances(slots * per.core_instances)
        .total_memories(slots * per.memories)
        .total_tables(slots * per.tables)
        .total_stacks(slots)
        .max_memory_size(limits.memory_bytes)
        // A freed slot's first present pages, up to KEEP_RESIDENT_BYTES,
        // are reset with memset instead of madvise (kernel ≥ 6.7: found by
        // PAGEMAP_SCAN, present pages only, whichever call touched them):
        // the next small call of the same plugin starts without page
        // faults.
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(KEEP_RESIDENT_TABLE_BYTES)
        .pagemap_scan(wasmtime::Enabled::Auto);
    pool
}

/// Background thread that advances the engine's epoch every [`EPOCH_TICK`].
/// Dropping it stops the thread and waits for it (like wasmtime's
/// `EpochThread`), so no ticker outlives its sandbox.
struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engines: Vec<Engine>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("epoch-ticker".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    for engine in &engines {
                        engine.increment_epoch();
                    }
                }
            })
            .expect("spawning the epoch ticker");
        EpochTicker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
