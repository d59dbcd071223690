//! Loading tool plugins (components exporting `wasm-mcp:tool/tool`) and
//! calling them, each call in a fresh sandboxed instance.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use wasmtime::component::Component;
use wasmtime::Trap;

use crate::cache::{sha256_hex, CacheOutcome, ComponentCache};
use crate::disk_budget::Exceeded;
use crate::sandbox::{Sandbox, StoreState};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "tool-plugin",
    imports: { default: async | trappable },
    exports: { default: async },
});

use exports::wasm_mcp::tool::tool as wit;

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
    Tool { code: String, message: String },
    /// The call ran past its deadline.
    Timeout { seconds: f64 },
    /// The instance tried to grow memory past the limit.
    MemoryLimit { bytes: usize },
    /// The result was larger than the output cap.
    OutputTooLarge { bytes: usize, cap: usize },
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
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Tool { code, message } => write!(f, "{code}: {message}"),
            CallError::Timeout { seconds } => write!(
                f,
                "tool timed out: exceeded its deadline of {seconds:.1}s and was stopped"
            ),
            CallError::MemoryLimit { bytes } => write!(
                f,
                "tool exceeded its memory limit of {} MiB and was stopped",
                bytes >> 20
            ),
            CallError::OutputTooLarge { bytes, cap } => write!(
                f,
                "tool output of {bytes} bytes exceeds the cap of {cap} bytes"
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
            CallError::Trap(m) => write!(f, "tool crashed (trap): {m}"),
            CallError::Host(m) => write!(f, "host error: {m}"),
        }
    }
}

impl CallError {
    /// Short machine-readable kind, used in logs and `_meta`.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Tool { .. } => "tool_error",
            CallError::Timeout { .. } => "timeout",
            CallError::MemoryLimit { .. } => "memory_limit",
            CallError::OutputTooLarge { .. } => "output_too_large",
            CallError::QuotaExceeded { .. } => "quota_exceeded",
            CallError::Trap(_) => "trap",
            CallError::Host(_) => "host_error",
        }
    }
}

/// One loaded plugin: its compiled component, pre-linked for fast
/// instantiation, and the tools it declared.
pub struct Plugin {
    pub path: PathBuf,
    pub digest: String,
    pub cache: CacheOutcome,
    pre: ToolPluginPre<StoreState>,
    pub tools: Vec<RawTool>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("digest", &self.digest)
            .finish()
    }
}

impl Plugin {
    /// Compile (or load from cache), link and ask the plugin for its tools.
    /// A file that is not a component, or a component that does not export
    /// the tool world, is refused with an error naming the file.
    pub async fn load(
        sandbox: &Sandbox,
        cache: &ComponentCache,
        path: &Path,
    ) -> Result<Arc<Plugin>> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        Self::from_bytes(sandbox, cache, path, &bytes).await
    }

    pub async fn from_bytes(
        sandbox: &Sandbox,
        cache: &ComponentCache,
        path: &Path,
        bytes: &[u8],
    ) -> Result<Arc<Plugin>> {
        let name = path.display();
        if !wasmparser::Parser::is_component(bytes) {
            if wasmparser::Parser::is_core_wasm(bytes) {
                anyhow::bail!("{name}: is a core wasm module, not a component (componentize it with the WASI preview1 adapter)");
            }
            anyhow::bail!("{name}: is not a WebAssembly component");
        }
        let digest = sha256_hex(bytes);
        let (component, outcome) = cache
            .load(sandbox.engine(), bytes, &digest)
            .with_context(|| format!("{name}: failed to compile"))?;
        let pre = link(sandbox, &component).with_context(|| format!("{name}: cannot be linked"))?;
        let mut plugin = Plugin {
            path: path.to_owned(),
            digest,
            cache: outcome,
            pre,
            tools: Vec::new(),
        };
        plugin.tools = plugin
            .list_tools(sandbox)
            .await
            .map_err(|e| anyhow::anyhow!("{name}: list-tools failed: {e}"))?;
        Ok(Arc::new(plugin))
    }

    async fn list_tools(&self, sandbox: &Sandbox) -> Result<Vec<RawTool>, CallError> {
        let mut store = fresh_store(sandbox, false)?;
        let result = async {
            let inst = self.pre.instantiate_async(&mut store).await?;
            inst.wasm_mcp_tool_tool().call_list_tools(&mut store).await
        }
        .await;
        let tools = result.map_err(|e| classify_trap(e, sandbox))?;
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
        let mut store = fresh_store(sandbox, true)?;
        self.pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| classify_trap(e, sandbox))?;
        Ok(())
    }

    /// Run one tool call in a fresh instance. Returns the JSON text result.
    pub async fn call(
        &self,
        sandbox: &Sandbox,
        tool: &str,
        args_json: &str,
    ) -> Result<String, CallError> {
        let mut store = fresh_store(sandbox, true)?;
        let result = async {
            let inst = self.pre.instantiate_async(&mut store).await?;
            inst.wasm_mcp_tool_tool()
                .call_call(&mut store, tool, args_json)
                .await
        }
        .await;
        let (out, dropped_out) = store.data().stdout.take();
        let (err, dropped_err) = store.data().stderr.take();
        if !out.is_empty() || !err.is_empty() {
            tracing::debug!(tool, stdout = %out, stderr = %err, dropped = dropped_out + dropped_err, "guest output");
        }
        if let Some(e) = quota_error(store.data(), &result) {
            return Err(e);
        }
        match result {
            Ok(Ok(text)) => {
                let cap = sandbox.limits().max_output_bytes;
                if text.len() > cap {
                    return Err(CallError::OutputTooLarge {
                        bytes: text.len(),
                        cap,
                    });
                }
                Ok(text)
            }
            Ok(Err(e)) => Err(CallError::Tool {
                code: error_code_name(e.code).into(),
                message: e.message,
            }),
            Err(e) => Err(match classify_trap(e, sandbox) {
                // A panic message on stderr is the most useful part of a trap.
                CallError::Trap(m) if !err.trim().is_empty() => {
                    CallError::Trap(format!("{m}; guest stderr: {}", tail(err.trim(), 800)))
                }
                other => other,
            }),
        }
    }
}

/// A call that ran into a disk budget ends as `quota_exceeded` whatever it
/// returned (keeping the start of the tool's own error message).
fn quota_error<T>(
    state: &StoreState,
    result: &wasmtime::Result<Result<T, wit::ToolError>>,
) -> Option<CallError> {
    let exceeded = state.disk.exceeded()?;
    let tool_said = match result {
        Ok(Err(e)) => Some(e.message.chars().take(300).collect()),
        _ => None,
    };
    Some(CallError::QuotaExceeded {
        exceeded,
        tool_said,
    })
}

/// The last `max` bytes of `s` (on a char boundary).
fn tail(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// A new store for one call; failing to build one is the host's fault.
fn fresh_store(sandbox: &Sandbox, with_fs: bool) -> Result<wasmtime::Store<StoreState>, CallError> {
    sandbox
        .new_store(with_fs)
        .map_err(|e| CallError::Host(format!("{e:#}")))
}

fn link(sandbox: &Sandbox, component: &Component) -> Result<ToolPluginPre<StoreState>> {
    let pre = sandbox.linker().instantiate_pre(component)?;
    Ok(ToolPluginPre::new(pre)?)
}

fn error_code_name(c: wit::ErrorCode) -> &'static str {
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

fn classify_trap(e: wasmtime::Error, sandbox: &Sandbox) -> CallError {
    let limits = sandbox.limits();
    if let Some(trap) = e.downcast_ref::<Trap>() {
        if *trap == Trap::Interrupt {
            return CallError::Timeout {
                seconds: limits.timeout.as_secs_f64(),
            };
        }
    }
    let text = format!("{e:#}");
    if text.contains("forcing trap when growing memory")
        || text.contains("memory allocation") && text.contains("limit")
    {
        return CallError::MemoryLimit {
            bytes: limits.memory_bytes,
        };
    }
    // The wasm backtrace is noise for the model but useful in the log.
    tracing::debug!("trap detail: {text}");
    match e.downcast_ref::<Trap>() {
        Some(trap) => CallError::Trap(trap.to_string()),
        None => CallError::Trap(e.root_cause().to_string().chars().take(500).collect()),
    }
}
