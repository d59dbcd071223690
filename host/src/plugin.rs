//! Loading tool plugins (components exporting `wasm-mcp:tool/tool`) and
//! calling them, each call in a fresh sandboxed instance.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use anyhow::{Context, Result};
use tokio::sync::Semaphore;
use wasm_mcp_protocol::schema_limits::DEFAULT_MAX_SCHEMA_BYTES;
use wasm_mcp_protocol::text::{display_clipped, head_chars, tail_bytes, LOG_DETAIL_BYTES};
use wasm_mcp_protocol::{ErrorKind, Lane, Validation};
use wasmtime::component::Component;
use wasmtime::{PoolConcurrencyLimitError, Store, Trap};

use crate::cache::{sha256_hex, CacheOutcome, ComponentCache};
use crate::catalog::{PluginTools, MAX_TOOLS_PER_PLUGIN};
use crate::disk_budget::{Exceeded, Totals};
use crate::grants::{Filesystem, Grant};
use crate::limits::before;
use crate::sandbox::{self, CodeTier, Sandbox, StoreState};
use crate::spare::{self, Spares};
use crate::trust::{Admitted, TrustPolicy};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "tool-plugin",
    imports: { default: async | trappable },
    exports: { default: async },
});

use exports::wasm_mcp::tool::tool as wit;
pub use exports::wasm_mcp::tool::tool::ErrorCode;

/// A tool descriptor as a plugin reported it (schemas still as text).
#[derive(Debug, Clone)]
pub struct RawTool {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub input_schema: String,
    pub output_schema: Option<String>,
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

/// The error of a tool call, classified for the MCP result.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The tool returned `tool-error`.
    Tool { code: ErrorCode, message: String },
    /// The call ran past its deadline.
    Timeout { seconds: f64 },
    /// The instance tried to grow memory past the limit.
    MemoryLimit { bytes: usize },
    /// The result's parsed form would be over the call's memory limit
    /// (`parsed`: [`wasm_mcp_protocol::parsed_bytes`] of its `text` bytes);
    /// refused before it is parsed.
    ResultOverMemory {
        text: usize,
        parsed: usize,
        limit: usize,
    },
    /// The result was larger than the output cap: `bytes` long, or
    /// (`None`) refused in guest memory, unread, for being over the call's
    /// transfer limit ([`transfer_limit`]).
    OutputTooLarge { bytes: Option<usize>, cap: usize },
    /// The call ran into a disk budget (its outcome is replaced by this);
    /// `tool_said` is the start of the tool's own error, if it returned one.
    QuotaExceeded {
        exceeded: Exceeded,
        tool_said: Option<String>,
    },
    /// Any other trap (panic, unreachable, stack overflow, ...).
    Trap(String),
    /// The host could not set up the call (instantiate failed, ...).
    Host(String),
    /// No slot for the call freed up before its deadline; nothing ran.
    Busy(Slot),
    /// The tool tried to change the worktree where its grant allows no
    /// writes: read-only, `none`, or outside its granted subdirectories
    /// (its outcome is replaced by this, whatever it returned).
    PermissionDenied { tool_said: Option<String> },
    /// A plugin's `list-tools` handed the host more than
    /// [`TOOL_LIST_TRANSFER_BYTES`] at once (at load; calls never see this).
    ToolListTooLarge,
}

/// The capacity a call (or load) waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The plugin's own share of the call slots (`--max-concurrency-per-plugin`).
    PluginShare(usize),
    /// The server's call slots (`--max-concurrency`).
    Server(usize),
    /// A plugin-load slot (`list-tools` at load or reload).
    Load,
    /// The instance pool had no free slot.
    InstancePool,
}

impl std::fmt::Display for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Slot::PluginShare(n) => write!(
                f,
                "this plugin already runs its maximum of {n} calls at once"
            ),
            Slot::Server(n) => write!(f, "all {n} call slots of the server are taken"),
            Slot::Load => f.write_str("all plugin-load slots are taken"),
            Slot::InstancePool => f.write_str("the instance pool has no free slot"),
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Tool { code, message } => {
                write!(f, "{}: {message}", error_code_name(*code))
            }
            CallError::Timeout { seconds } => write!(
                f,
                "tool timed out: exceeded its deadline of {seconds:.1}s and was stopped"
            ),
            CallError::MemoryLimit { bytes } => write!(
                f,
                "tool exceeded its memory limit of {} MiB and was stopped",
                bytes >> 20
            ),
            CallError::ResultOverMemory {
                text,
                parsed,
                limit,
            } => write!(
                f,
                "tool result of {text} bytes of JSON would take up to {} MiB of host memory once parsed, over the call's memory limit of {} MiB (--memory-mb, or the plugin grant's memory_mb), and was refused unparsed: return fewer, larger values (each JSON value costs the host tens of bytes, each object hundreds)",
                parsed.div_ceil(1 << 20),
                limit >> 20
            ),
            CallError::OutputTooLarge {
                bytes: Some(bytes),
                cap,
            } => write!(
                f,
                "tool output of {bytes} bytes exceeds the cap of {cap} bytes"
            ),
            CallError::OutputTooLarge { bytes: None, cap } => write!(
                f,
                "tool output exceeds the cap of {cap} bytes: the tool handed the host more than {} bytes at once (refused before it was copied)",
                transfer_limit(*cap)
            ),
            CallError::QuotaExceeded {
                exceeded,
                tool_said,
            } => {
                write!(
                    f,
                    "tool exceeded its disk quota and was refused: {exceeded}"
                )?;
                match tool_said {
                    Some(m) => write!(f, "; the tool reported: {m}"),
                    None => Ok(()),
                }
            }
            CallError::PermissionDenied { tool_said } => {
                f.write_str("permission denied: the tool tried to change the worktree where its grant allows no writes (read-only, no filesystem, or outside its granted paths), and the change was refused")?;
                match tool_said {
                    Some(m) => write!(f, "; the tool reported: {m}"),
                    None => Ok(()),
                }
            }
            CallError::Trap(m) => write!(f, "tool crashed (trap): {m}"),
            CallError::Host(m) => write!(f, "host error: {m}"),
            CallError::Busy(slot) => write!(
                f,
                "server busy: {slot}, and none freed up before the call's deadline; the tool did not run, try again later"
            ),
            CallError::ToolListTooLarge => write!(
                f,
                "it handed the host more than {TOOL_LIST_TRANSFER_BYTES} bytes at once while listing its tools (its tool list, or one WASI call), the most the host reads from a plugin at load (refused while it was copied)"
            ),
        }
    }
}

impl CallError {
    /// The machine-readable kind, used in logs and `_meta`.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CallError::Tool { .. } => ErrorKind::ToolError,
            CallError::Timeout { .. } => ErrorKind::Timeout,
            CallError::MemoryLimit { .. } | CallError::ResultOverMemory { .. } => {
                ErrorKind::MemoryLimit
            }
            CallError::OutputTooLarge { .. } | CallError::ToolListTooLarge => {
                ErrorKind::OutputTooLarge
            }
            CallError::QuotaExceeded { .. } => ErrorKind::QuotaExceeded,
            CallError::Trap(_) => ErrorKind::Trap,
            CallError::Host(_) => ErrorKind::HostError,
            CallError::Busy(_) => ErrorKind::Busy,
            CallError::PermissionDenied { .. } => ErrorKind::PermissionDenied,
        }
    }
}

/// One loaded plugin: its compiled component, pre-linked for fast
/// instantiation, and the tools it declared.
pub struct Plugin {
    pub path: PathBuf,
    /// Its name: the file stem (what lock, grants and audit log call it).
    pub name: String,
    pub digest: String,
    /// What it may touch and spend.
    pub grant: Arc<Grant>,
    pub cache: CacheOutcome,
    /// Its code, pre-linked; replaced once when a baseline plugin moves to
    /// optimized code (a call uses the code it started with).
    code: RwLock<Arc<ToolPluginPre<StoreState>>>,
    /// The admitted bytes of a plugin on baseline code, for Cranelift to
    /// compile (taken by [`Plugin::tier_up`]).
    source: Mutex<Option<Arc<[u8]>>>,
    pub tools: Vec<RawTool>,
    /// Its tools as the catalog builds them (schemas compiled), built by
    /// the first catalog that includes this plugin and reused by every
    /// rebuild after it.
    pub(crate) built_tools: OnceLock<PluginTools>,
    /// This plugin's share of the call slots.
    share: Semaphore,
    /// Its share of the validation threads: its results and its tools'
    /// arguments are checked there, so checks slow to run hold only this
    /// past their deadline.
    validation_lane: Lane,
    /// Its next instance, made ahead of the call that will use it.
    pub(crate) spares: Spares,
    /// What its calls have added to the worktree (its disk share).
    pub(crate) disk_usage: Arc<Totals>,
}

/// A component compiled by the sandbox's engine (or loaded from the
/// cache), not yet linked.
pub struct Compiled {
    pub path: PathBuf,
    /// Hex SHA-256 of the file.
    pub digest: String,
    pub cache: CacheOutcome,
    pub component: Component,
    /// The bytes, kept when the code is the baseline tier's.
    source: Option<Arc<[u8]>>,
    /// Instantiating it runs guest code (a start function): no spares.
    runs_code_at_instantiation: bool,
}

impl Compiled {
    /// Refuses a file that is not a component (naming what it is instead),
    /// then compiles it.
    pub async fn new(
        sandbox: &Sandbox,
        cache: &ComponentCache,
        path: &Path,
        bytes: &[u8],
    ) -> Result<Compiled> {
        let name = path.display();
        if !wasmparser::Parser::is_component(bytes) {
            if wasmparser::Parser::is_core_wasm(bytes) {
                anyhow::bail!("{name}: is a core wasm module, not a component (componentize it with the WASI preview1 adapter)");
            }
            anyhow::bail!("{name}: is not a WebAssembly component");
        }
        let digest = sha256_hex(bytes);
        let (component, outcome) = compile(sandbox, cache, bytes, &digest)
            .await
            .with_context(|| format!("{name}: failed to compile"))?;
        Ok(Compiled {
            path: path.to_owned(),
            runs_code_at_instantiation: spare::runs_code_at_instantiation(bytes),
            digest,
            source: (outcome == CacheOutcome::Baseline).then(|| Arc::from(bytes)),
            cache: outcome,
            component,
        })
    }
}

/// Why a plugin did not load.
#[derive(Debug)]
pub enum LoadError {
    /// The plugin is unusable as it is (not a tool component, list-tools
    /// trapped or ran past its deadline, ...): refused until its file changes.
    Refused(anyhow::Error),
    /// A transient condition (no free load or instance slot): retry later.
    Busy(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Refused(e) if f.alternate() => write!(f, "{e:#}"),
            LoadError::Refused(e) => write!(f, "{e}"),
            LoadError::Busy(m) => write!(f, "{m} (will retry)"),
        }
    }
}

impl std::error::Error for LoadError {}

impl From<anyhow::Error> for LoadError {
    fn from(e: anyhow::Error) -> Self {
        LoadError::Refused(e)
    }
}

/// The largest component file the host reads (`serve` and `inspect`):
/// the Python and JavaScript samples, interpreter included, are under 20 MB.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// Reads the component file at `path`, refusing one over
/// [`MAX_COMPONENT_BYTES`] before reading it; never reads more than that,
/// even from a file that grows meanwhile. Opened without blocking and
/// refused unless a regular file: a plugin file swapped for a FIFO between
/// the directory scan and the open blocked the open, and with it every
/// later reload, for good (a helper's find).
pub fn read_component(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let reading = || format!("reading {}", path.display());
    let file = crate::operator_paths::open_without_blocking(path).with_context(reading)?;
    let meta = file.metadata().with_context(reading)?;
    anyhow::ensure!(meta.is_file(), "{}: not a regular file", path.display());
    let len = meta.len();
    let too_large = || {
        anyhow::anyhow!(
            "{}: over {} MiB, the largest component this host reads",
            path.display(),
            MAX_COMPONENT_BYTES >> 20
        )
    };
    if len > MAX_COMPONENT_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(MAX_COMPONENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(reading)?;
    if bytes.len() as u64 > MAX_COMPONENT_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("digest", &self.digest)
            .finish()
    }
}

/// What a call's store ended with, for the audit log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallStats {
    pub bytes_written: u64,
    pub files_created: u64,
    pub peak_memory_bytes: usize,
}

impl Plugin {
    /// Compile (or load from cache), link and ask the plugin for its tools,
    /// within `--load-timeout-ms`. A file that is not a component, or a
    /// component that does not export the tool world, is refused with an
    /// error naming the file. Runs with the server's rights (no pinning,
    /// no signature, no config).
    pub async fn load(
        sandbox: &Sandbox,
        cache: &ComponentCache,
        path: &Path,
    ) -> Result<Arc<Plugin>, LoadError> {
        Self::load_trusted(sandbox, cache, &TrustPolicy::server_rights(sandbox), path).await
    }

    /// [`Plugin::load`] under `policy`: the bytes read are checked against
    /// the lock and the trusted keys before anything else, and the plugin
    /// gets its grant.
    pub async fn load_trusted(
        sandbox: &Sandbox,
        cache: &ComponentCache,
        policy: &TrustPolicy,
        path: &Path,
    ) -> Result<Arc<Plugin>, LoadError> {
        let bytes = read_component(path)?;
        Self::from_bytes_trusted(sandbox, cache, policy, path, &bytes).await
    }

    pub async fn from_bytes(
        sandbox: &Sandbox,
        cache: &ComponentCache,
        path: &Path,
        bytes: &[u8],
    ) -> Result<Arc<Plugin>, LoadError> {
        let policy = TrustPolicy::server_rights(sandbox);
        Self::from_bytes_trusted(sandbox, cache, &policy, path, bytes).await
    }

    /// Admit the plugin by the trust policy (pinning, signature, grant),
    /// then compile, link and ask it for its tools.
    pub async fn from_bytes_trusted(
        sandbox: &Sandbox,
        cache: &ComponentCache,
        policy: &TrustPolicy,
        path: &Path,
        bytes: &[u8],
    ) -> Result<Arc<Plugin>, LoadError> {
        let digest = sha256_hex(bytes);
        let admitted = policy
            .admit(path, bytes, &digest)
            .with_context(|| format!("{}: refused by the trust policy", path.display()))?;
        let compiled = Compiled::new(sandbox, cache, path, bytes).await?;
        Self::from_compiled(sandbox, compiled, admitted).await
    }

    /// Link a compiled component admitted with `admitted`'s name and grant,
    /// and ask it for its tools.
    pub async fn from_compiled(
        sandbox: &Sandbox,
        c: Compiled,
        admitted: Admitted,
    ) -> Result<Arc<Plugin>, LoadError> {
        let name = c.path.display().to_string();
        let pre = link(sandbox, c.cache.tier(), &c.component)
            .with_context(|| format!("{name}: cannot be linked"))?;
        let disk_usage = sandbox.plugin_disk_usage(&admitted.name);
        let mut plugin = Plugin {
            path: c.path,
            name: admitted.name,
            digest: c.digest,
            share: Semaphore::new(admitted.grant.max_concurrency),
            validation_lane: Validation::shared().lane(),
            grant: admitted.grant,
            cache: c.cache,
            code: RwLock::new(Arc::new(pre)),
            source: Mutex::new(c.source),
            tools: Vec::new(),
            built_tools: OnceLock::new(),
            spares: Spares::new(!c.runs_code_at_instantiation),
            disk_usage,
        };
        plugin.tools = match plugin.list_tools(sandbox).await {
            Ok(tools) => tools,
            Err(e @ CallError::Busy(_)) => return Err(LoadError::Busy(format!("{name}: {e}"))),
            Err(e) => return Err(anyhow::anyhow!("{name}: list-tools failed: {e}").into()),
        };
        Ok(Arc::new(plugin))
    }

    /// This plugin's share of the call slots.
    pub fn share(&self) -> &Semaphore {
        &self.share
    }

    /// This plugin's share of the validation threads.
    pub fn validation_lane(&self) -> &Lane {
        &self.validation_lane
    }

    /// The code calls start with now.
    pub(crate) fn pre(&self) -> Arc<ToolPluginPre<StoreState>> {
        self.code.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The compiler of the code calls run now.
    pub fn tier(&self) -> CodeTier {
        match self
            .source
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
        {
            true => CodeTier::Baseline,
            false => CodeTier::Optimized,
        }
    }

    /// Moves a plugin on baseline code to Cranelift's: compiles the bytes
    /// it was admitted with (writing the compile cache, so the next start
    /// is warm) on the blocking pool, links them, and swaps them in. Calls
    /// running finish on the code they started with. Does nothing for a
    /// plugin already on optimized code.
    pub async fn tier_up(&self, sandbox: &Sandbox, cache: &ComponentCache) -> Result<()> {
        let source = self
            .source
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some(bytes) = source else { return Ok(()) };
        let started = Instant::now();
        let (engine, cache) = (sandbox.engine().clone(), cache.clone());
        let digest = self.digest.clone();
        let (component, _) =
            tokio::task::spawn_blocking(move || cache.load(&engine, &bytes, &digest))
                .await
                .context("the compile task failed")??;
        let pre = link(sandbox, CodeTier::Optimized, &component)?;
        *self.code.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(pre);
        *self.source.lock().unwrap_or_else(|e| e.into_inner()) = None;
        tracing::info!(plugin = %self.name, ms = started.elapsed().as_millis() as u64, "optimized code in use (Cranelift)");
        Ok(())
    }

    async fn list_tools(&self, sandbox: &Sandbox) -> Result<Vec<RawTool>, CallError> {
        let deadline = Instant::now() + sandbox.limits().load_timeout;
        let pre = self.pre();
        let mut store = fresh_store(sandbox, pre.engine(), false, deadline)?;
        store.set_hostcall_fuel(TOOL_LIST_TRANSFER_BYTES);
        let run = async {
            let inst = pre.instantiate_async(&mut store).await?;
            inst.wasm_mcp_tool_tool().call_list_tools(&mut store).await
        };
        let result = until(deadline, run).await;
        let grant = Grant {
            timeout: sandbox.limits().load_timeout,
            ..sandbox.server_grant()
        };
        let tools = result.map_err(|e| match over_transfer_limit(&e) {
            true => CallError::ToolListTooLarge,
            false => classify_trap(e, &store, &grant),
        })?;
        Ok(tools
            .into_iter()
            .map(|t| RawTool {
                name: t.name,
                title: t.title,
                description: t.description,
                input_schema: t.input_schema,
                output_schema: t.output_schema,
                read_only: t.annotations.read_only,
                destructive: t.annotations.destructive,
                idempotent: t.annotations.idempotent,
                open_world: t.annotations.open_world,
            })
            .collect())
    }

    /// Build a store and instantiate without calling anything: the fixed
    /// cost every call pays (used by the benchmarks).
    pub async fn instantiate_only(&self, sandbox: &Sandbox) -> Result<(), CallError> {
        let deadline = Instant::now() + sandbox.limits().timeout;
        let pre = self.pre();
        let mut store = fresh_store(sandbox, pre.engine(), true, deadline)?;
        let result = until(deadline, pre.instantiate_async(&mut store)).await;
        result.map_err(|e| classify_trap(e, &store, &sandbox.server_grant()))?;
        Ok(())
    }

    /// Run one tool call in a fresh instance, with the server's rights and
    /// the full `--timeout-ms`. Returns the JSON text result.
    pub async fn call(
        &self,
        sandbox: &Sandbox,
        tool: &str,
        args_json: &str,
    ) -> Result<String, CallError> {
        let deadline = Instant::now() + sandbox.limits().timeout;
        let grant = sandbox.server_grant();
        let (result, _) = self
            .call_until(sandbox, &grant, grant.filesystem, tool, args_json, deadline)
            .await;
        result
    }

    /// Run one tool call in a fresh instance under `grant` with the
    /// filesystem `fs`, that ends by `deadline`, wherever the guest is then
    /// (wasm code or an async host call: clocks, poll, streams); its store
    /// and instance are dropped. (File operations run synchronously on this
    /// thread: see the README's sandbox table.) Also returns what the call
    /// wrote and its peak memory.
    pub async fn call_until(
        &self,
        sandbox: &Sandbox,
        grant: &Grant,
        fs: Filesystem,
        tool: &str,
        args_json: &str,
        deadline: Instant,
    ) -> (Result<String, CallError>, CallStats) {
        let pre = self.pre();
        let (mut store, spare) = match self.spare_for(&pre, grant, fs) {
            Some((mut store, instance)) => {
                sandbox::set_deadline(&mut store, deadline);
                (store, Some(instance))
            }
            None => {
                match sandbox.new_store_for(pre.engine(), grant, fs, &self.disk_usage, deadline) {
                    Ok(store) => (store, None),
                    Err(e) => {
                        return (Err(CallError::Host(format!("{e:#}"))), CallStats::default())
                    }
                }
            }
        };
        store.set_hostcall_fuel(transfer_limit(grant.max_output_bytes));
        let run = async {
            let inst = match spare {
                Some(instance) => instance,
                None => pre.instantiate_async(&mut store).await?,
            };
            inst.wasm_mcp_tool_tool()
                .call_call(&mut store, tool, args_json)
                .await
        };
        let result = until(deadline, run).await;
        let (out, dropped_out) = store.data().stdout.take();
        let (err, dropped_err) = store.data().stderr.take();
        if !out.is_empty() || !err.is_empty() {
            let (stdout, stderr) = (
                display_clipped(&out, LOG_DETAIL_BYTES),
                display_clipped(&err, LOG_DETAIL_BYTES),
            );
            let dropped = dropped_out + dropped_err;
            tracing::debug!(tool, %stdout, %stderr, dropped, "guest output");
        }
        let written = store.data().disk.written();
        let stats = CallStats {
            bytes_written: written.bytes,
            files_created: written.entries,
            peak_memory_bytes: store.data().limiter().peak(),
        };
        if let Some(e) = enforced_error(store.data(), &result) {
            return (Err(e), stats);
        }
        let outcome = match result {
            Ok(Ok(text)) => result_within(text, grant),
            Ok(Err(e)) => Err(CallError::Tool {
                code: e.code,
                message: e.message,
            }),
            Err(e) if over_transfer_limit(&e) => Err(CallError::OutputTooLarge {
                bytes: None,
                cap: grant.max_output_bytes,
            }),
            Err(e) => Err(match classify_trap(e, &store, grant) {
                // A panic message on stderr is the most useful part of a trap.
                CallError::Trap(m) if !err.trim().is_empty() => CallError::Trap(format!(
                    "{m}; guest stderr: {}",
                    tail_bytes(err.trim(), 800)
                )),
                other => other,
            }),
        };
        (outcome, stats)
    }

    /// A call as the server makes it: [`Plugin::call_until`] under this
    /// plugin's own grant, on its spare instance if one is ready for `fs`;
    /// the next spare is built in the background after it (see
    /// `spare.rs`), off the call's path.
    pub async fn call_served(
        self: &Arc<Self>,
        sandbox: &Arc<Sandbox>,
        fs: Filesystem,
        tool: &str,
        args_json: &str,
        deadline: Instant,
    ) -> (Result<String, CallError>, CallStats) {
        let grant = &self.grant;
        let ran = self
            .call_until(sandbox, grant, fs, tool, args_json, deadline)
            .await;
        self.prepare_spare(sandbox, fs);
        ran
    }
}

/// A returned result as the host takes it: at most the grant's output cap
/// in bytes, and at most its memory limit once parsed (weighed before: a
/// result of one-member objects takes ~100 times its size as
/// `serde_json::Value`s).
fn result_within(text: String, grant: &Grant) -> Result<String, CallError> {
    let cap = grant.max_output_bytes;
    if text.len() > cap {
        return Err(CallError::OutputTooLarge {
            bytes: Some(text.len()),
            cap,
        });
    }
    let parsed = wasm_mcp_protocol::parsed_bytes(text.as_bytes());
    if parsed > grant.memory_bytes {
        return Err(CallError::ResultOverMemory {
            text: text.len(),
            parsed,
            limit: grant.memory_bytes,
        });
    }
    Ok(text)
}

/// The most a call's guest may hand the host at once, in bytes: its result
/// (or tool error) as it returns, or the data of one WASI call. Set as
/// wasmtime's hostcall fuel, which is checked before anything is copied, so
/// a result far over the output cap costs the host nothing (one between
/// the cap and this is copied, then refused by the cap). At least
/// [`MIN_TRANSFER_BYTES`], for WASI calls of tools with a small cap.
pub fn transfer_limit(max_output_bytes: usize) -> usize {
    max_output_bytes
        .saturating_add(TRANSFER_SLACK_BYTES)
        .max(MIN_TRANSFER_BYTES)
}

/// The most a plugin's `list-tools` may hand the host at once (its tool
/// list, copied once at load; or one WASI call it makes meanwhile): every
/// tool the catalog keeps ([`MAX_TOOLS_PER_PLUGIN`]) with both schemas at
/// their size limit and 64 KiB for its name, title, description and the
/// list's own bytes (48 MiB; wasmtime's own default is 128 MiB). Counted on
/// everything the plugin declares, each string by its guest bytes and each
/// list by its host size (so 500,000 tools with empty texts are over it
/// too): lifting stops there and the plugin is refused whole.
pub const TOOL_LIST_TRANSFER_BYTES: usize =
    MAX_TOOLS_PER_PLUGIN * (2 * DEFAULT_MAX_SCHEMA_BYTES + (64 << 10));

/// Room over the output cap for the result's transfer (the cap is checked
/// on the copied text, which says by how much it was over).
const TRANSFER_SLACK_BYTES: usize = 1 << 20;

/// The transfer limit of a call with a small output cap.
const MIN_TRANSFER_BYTES: usize = 16 << 20;

/// How wasmtime (48) says a transfer ran out of hostcall fuel; its error
/// type is private (`tests/wire.rs` holds a test of this).
const HOSTCALL_FUEL_EXHAUSTED: &str =
    "too much data is being copied between the host and the guest";

/// Whether `e` is a transfer refused for running out of hostcall fuel:
/// over [`transfer_limit`] on a call, [`TOOL_LIST_TRANSFER_BYTES`] at load.
fn over_transfer_limit(e: &wasmtime::Error) -> bool {
    e.chain()
        .any(|c| c.to_string().starts_with(HOSTCALL_FUEL_EXHAUSTED))
}

/// A call that the host refused something: a disk budget
/// (`quota_exceeded`) or a write under a read-only grant
/// (`permission_denied`) ends so whatever it returned (keeping the start
/// of the tool's own error message).
fn enforced_error<T>(
    state: &StoreState,
    result: &wasmtime::Result<Result<T, wit::ToolError>>,
) -> Option<CallError> {
    if let Some(e) = quota_error(state, result) {
        return Some(e);
    }
    state.disk.denied().then(|| CallError::PermissionDenied {
        tool_said: tool_said(result),
    })
}

fn tool_said<T>(result: &wasmtime::Result<Result<T, wit::ToolError>>) -> Option<String> {
    match result {
        Ok(Err(e)) => Some(head_chars(&e.message, 300).to_string()),
        _ => None,
    }
}

/// A call that ran into a disk budget ends as `quota_exceeded` whatever it
/// returned (keeping the start of the tool's own error message).
fn quota_error<T>(
    state: &StoreState,
    result: &wasmtime::Result<Result<T, wit::ToolError>>,
) -> Option<CallError> {
    let exceeded = state.disk.exceeded()?;
    Some(CallError::QuotaExceeded {
        exceeded,
        tool_said: tool_said(result),
    })
}

/// A new store for one call; failing to build one is the host's fault.
fn fresh_store(
    sandbox: &Sandbox,
    engine: &wasmtime::Engine,
    with_fs: bool,
    deadline: Instant,
) -> Result<Store<StoreState>, CallError> {
    sandbox
        .new_store_in(engine, with_fs, deadline)
        .map_err(|e| CallError::Host(format!("{e:#}")))
}

/// Runs `fut` (work in a store) until `deadline`. Past it the future is
/// dropped wherever the guest is (wasmtime's async fibers are safe to drop)
/// and the result is an interrupt trap, like the epoch deadline's.
pub(crate) async fn until<T>(
    deadline: Instant,
    fut: impl Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    before(deadline, fut)
        .await
        .unwrap_or_else(|| Err(wasmtime::Error::new(Trap::Interrupt)))
}

/// Compiles on the blocking pool (Cranelift can take seconds), so loads
/// run in parallel and never stall the async workers. Cranelift's code
/// from the cache when it is there; else, with a baseline tier, Winch's
/// now (the caller moves the plugin up later), else Cranelift's now.
async fn compile(
    sandbox: &Sandbox,
    cache: &ComponentCache,
    bytes: &[u8],
    digest: &str,
) -> Result<(Component, CacheOutcome)> {
    let (engine, cache) = (sandbox.engine().clone(), cache.clone());
    let baseline = sandbox.engine_of(CodeTier::Baseline).cloned();
    let (bytes, digest) = (bytes.to_vec(), digest.to_owned());
    tokio::task::spawn_blocking(move || match baseline {
        Some(quick) => match cache.lookup(&engine, &digest) {
            Some(c) => Ok((c, CacheOutcome::Hit)),
            None => cache
                .compile_baseline(&quick, &bytes)
                .map(|c| (c, CacheOutcome::Baseline)),
        },
        None => cache.load(&engine, &bytes, &digest),
    })
    .await
    .context("the compile task failed")?
}

fn link(
    sandbox: &Sandbox,
    tier: CodeTier,
    component: &Component,
) -> Result<ToolPluginPre<StoreState>> {
    let linker = sandbox
        .linker_of(tier)
        .context("no engine for this code tier")?;
    let pre = linker.instantiate_pre(component)?;
    Ok(ToolPluginPre::new(pre)?)
}

fn error_code_name(c: ErrorCode) -> &'static str {
    match c {
        wit::ErrorCode::InvalidArguments => "invalid_arguments",
        wit::ErrorCode::UnknownTool => "unknown_tool",
        wit::ErrorCode::NotFound => "not_found",
        wit::ErrorCode::PermissionDenied => "permission_denied",
        wit::ErrorCode::TooLarge => "too_large",
        wit::ErrorCode::Io => "io",
        wit::ErrorCode::Internal => "internal",
    }
}

/// Classifies a failed call: its deadline (the grant's timeout after its
/// start) passed, memory limit (the store's limiter says so), instance
/// pool exhausted, or a trap of the guest.
fn classify_trap(e: wasmtime::Error, store: &Store<StoreState>, grant: &Grant) -> CallError {
    if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return CallError::Timeout {
            seconds: grant.timeout.as_secs_f64(),
        };
    }
    if store.data().limiter().exceeded() {
        return CallError::MemoryLimit {
            bytes: grant.memory_bytes,
        };
    }
    if e.downcast_ref::<PoolConcurrencyLimitError>().is_some() {
        return CallError::Busy(Slot::InstancePool);
    }
    // The wasm backtrace is noise for the model but useful in the log.
    // Bounded: frame names come from the component's name section.
    tracing::debug!(
        "trap detail: {}",
        display_clipped(&format_args!("{e:#}"), LOG_DETAIL_BYTES)
    );
    match e.downcast_ref::<Trap>() {
        Some(trap) => CallError::Trap(trap.to_string()),
        None => CallError::Trap(head_chars(&e.root_cause().to_string(), 500).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO where a plugin file was is refused at once: opening it for
    /// reading waited for a writer, and held every later reload with it.
    #[test]
    fn a_fifo_in_place_of_a_plugin_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("x.wasm");
        let mode = rustix::fs::Mode::from_raw_mode(0o644);
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, mode, 0).unwrap();
        let (done, read) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(read_component(&fifo).map(|_| ())));
        let read = read.recv_timeout(std::time::Duration::from_secs(5));
        let e = read.expect("reading the FIFO blocked").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e:#}");
    }
}
