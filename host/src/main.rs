//! `wasm-mcp`: serve WASI component tools over MCP (stdio or Streamable
//! HTTP), or inspect them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use rmcp::ServiceExt;
use wasm_mcp_host::audit::AuditLog;
use wasm_mcp_host::cache::ComponentCache;
use wasm_mcp_host::compile_child::{self, ChildCompiler};
use wasm_mcp_host::disk_budget::{DiskLimits, Share};
use wasm_mcp_host::grants::Grants;
use wasm_mcp_host::http::{auth, HttpOptions};
use wasm_mcp_host::limits::{DEFAULT_SPARE_INSTANCES, MAX_SPARE_INSTANCES};
use wasm_mcp_host::pinning::{lock_path, PluginLock};
use wasm_mcp_host::progress::DEFAULT_PROGRESS_AFTER;
use wasm_mcp_host::registry::{Outcome, Registry, Trust};
use wasm_mcp_host::sandbox::{Clocks, EngineOptions, FsAccess, Sandbox};
use wasm_mcp_host::server::{McpServer, DEFAULT_PAGE_SIZE};
use wasm_mcp_host::signing::{self, TrustedKey};
use wasm_mcp_host::trust::TrustPolicy;
use wasm_mcp_host::wire_limits::{DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TEXT_MIRROR_BYTES};
use wasm_mcp_host::Limits;

#[derive(Parser)]
#[command(
    name = "wasm-mcp",
    version,
    about = "MCP server whose tools are sandboxed WASI 0.2 components"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the plugins' tools over MCP on stdin/stdout, or over HTTP with `--http`.
    Serve(Box<ServeArgs>),
    /// Load the plugins and print the published tools as JSON.
    Tools(CommonArgs),
    /// Pin every plugin of the plugin dir in the lock file (sha256 each).
    Lock {
        /// Directory of plugin components (`*.wasm`).
        #[arg(long)]
        plugins: PathBuf,
        /// Lock file [default: plugins.lock in the plugin dir].
        #[arg(long)]
        lock: Option<PathBuf>,
        /// Also trust this minisign public key (a file or the base64 key;
        /// repeatable): under `--locked` every plugin must be signed by a
        /// key of the lock.
        #[arg(long = "key", value_name = "KEY")]
        keys: Vec<String>,
    },
    /// Write a new minisign key pair without a password (tests, automation).
    Keygen {
        #[arg(long)]
        secret: PathBuf,
        #[arg(long)]
        public: PathBuf,
    },
    /// Sign plugins with a minisign secret key: writes `<plugin>.minisig`.
    Sign {
        /// Unencrypted minisign secret key file (see `keygen`).
        #[arg(long)]
        key: PathBuf,
        /// Plugin files to sign.
        #[arg(required = true)]
        plugins: Vec<PathBuf>,
    },
    /// Call one tool directly (no MCP) and print the outcome as JSON.
    Call {
        #[command(flatten)]
        common: CommonArgs,
        /// Tool name.
        tool: String,
        /// Arguments as a JSON object.
        #[arg(default_value = "{}")]
        args: String,
    },
    /// Describe a component: sha256, imports (and any this host lacks),
    /// whether the host can run it, its tools with schemas and annotations.
    /// Exits non-zero when the host cannot run it.
    Inspect {
        /// The component file.
        plugin: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Compiled-component cache dir [default: $XDG_CACHE_HOME/wasm-mcp or ~/.cache/wasm-mcp].
        #[arg(long)]
        cache_dir: Option<PathBuf>,
        /// Do not read or write the compile cache.
        #[arg(long)]
        no_cache: bool,
    },
    /// Scaffold a plugin project: `./build.sh` builds NAME.wasm, `./test.sh`
    /// calls its tool through `wasm-mcp call`.
    New {
        /// Project, tool and component name: [a-z][a-z0-9_-]{0,63}.
        name: String,
        /// Template language (those built in: see the error for another).
        #[arg(long, default_value = "rust")]
        lang: String,
        /// Directory to create [default: ./NAME]; must not exist or be empty.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Internal: compile the component on stdin for a server (TIER is
    /// `baseline` or `optimized`), writing its code to OUT.
    #[command(name = "compile-worker", hide = true)]
    CompileWorker { tier: String, out: PathBuf },
    /// Turn a wasm32-wasip1 core module into a tool component (WASI
    /// preview1 adapter) or validate one: IN OUT [--adapter
    /// reactor|command|none] [--export NAME] [--list-imports] (`none`: no
    /// adapter, the module must import no preview1 function; `--export`:
    /// the export required instead of the tool interface, e.g. `func
    /// read-file`).
    Componentize {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Allocator {
    Pooling,
    OnDemand,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ClockArg {
    Real,
    Frozen,
}

#[derive(Args, Clone)]
struct CommonArgs {
    /// The task worktree: the only directory tools can see (as `/`).
    #[arg(long)]
    worktree: PathBuf,
    /// Directory of plugin components (`*.wasm`).
    #[arg(long)]
    plugins: PathBuf,
    /// Publish only these tools (comma-separated).
    #[arg(long, value_delimiter = ',')]
    allow: Option<Vec<String>>,
    /// Compiled-component cache dir [default: $XDG_CACHE_HOME/wasm-mcp or ~/.cache/wasm-mcp].
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Do not read or write the compile cache.
    #[arg(long)]
    no_cache: bool,
    /// Per-call deadline in milliseconds (waiting for a slot included).
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Deadline of one plugin's `list-tools` at load/reload, in milliseconds.
    #[arg(long, default_value_t = 5_000)]
    load_timeout_ms: u64,
    /// Deadline of compiling one plugin (in a child process, killed past
    /// it), in milliseconds.
    #[arg(long, default_value_t = compile_child::DEFAULT_COMPILE_TIMEOUT.as_millis() as u64)]
    compile_timeout_ms: u64,
    /// Address space of the child process compiling one plugin, in MiB.
    #[arg(long, default_value_t = compile_child::DEFAULT_COMPILE_MEMORY_MB)]
    compile_memory_mb: u64,
    /// Memory limit of one call in MiB: all its memories and tables together.
    #[arg(long, default_value_t = 256)]
    memory_mb: usize,
    /// Largest tool result in bytes.
    #[arg(long, default_value_t = wasm_mcp_host::limits::DEFAULT_MAX_OUTPUT_BYTES)]
    max_output_bytes: usize,
    /// Tool calls running at once.
    #[arg(long, default_value_t = 16)]
    max_concurrency: usize,
    /// Calls of one plugin running at once [default: half of --max-concurrency, rounded up].
    #[arg(long)]
    max_concurrency_per_plugin: Option<usize>,
    /// Instances made ahead of calls, at most one per plugin and
    /// filesystem, so a call does not wait for its instance (each is still
    /// used by one call only). 0: every call instantiates its own.
    #[arg(long, default_value_t = DEFAULT_SPARE_INSTANCES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(..=MAX_SPARE_INSTANCES as u64))]
    spare_instances: usize,
    /// Bytes one call may write to the worktree (holes in sparse files count).
    #[arg(long, default_value_t = DiskLimits::default().call_bytes)]
    max_write_bytes: u64,
    /// Files, directories and links one call may create.
    #[arg(long, default_value_t = DiskLimits::default().call_entries)]
    max_files_created: u64,
    /// Files and directory listings one call may hold open at once (each
    /// file is a descriptor of this process, whose limit all plugins share).
    #[arg(long, default_value_t = DiskLimits::default().call_open_files,
          value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_open_files: u64,
    /// Largest size a call may give a file (by writing or truncating it up).
    #[arg(long, default_value_t = DiskLimits::default().max_file_size)]
    max_file_size: u64,
    /// Bytes all calls of this server may write to the worktree together.
    #[arg(long, default_value_t = DiskLimits::default().worktree_bytes)]
    worktree_write_bytes: u64,
    /// Entries all calls of this server may create in the worktree together.
    #[arg(long, default_value_t = DiskLimits::default().worktree_entries)]
    worktree_files_created: u64,
    /// Bytes each plugin's calls may write to the worktree together (a
    /// grant's plugin_write_bytes sets its plugin's own), at most
    /// --worktree-write-bytes [default: an even part of it: divided by the
    /// most plugins that have published a tool that may write there,
    /// rounded up; alone, all of it].
    #[arg(long)]
    plugin_write_bytes: Option<u64>,
    /// Entries each plugin's calls may create in the worktree together (a
    /// grant's plugin_files_created sets its plugin's own), at most
    /// --worktree-files-created [default: an even part of it: divided by
    /// the most plugins that have published a tool that may write there,
    /// rounded up; alone, all of it].
    #[arg(long)]
    plugin_files_created: Option<u64>,
    /// Mount the worktree read-only.
    #[arg(long)]
    read_only: bool,
    /// Instance allocator: `pooling` (pre-reserved slots, fastest
    /// instantiation; falls back to on-demand if the reservation fails) or
    /// `on-demand`.
    #[arg(long, value_enum, default_value_t = Allocator::Pooling)]
    allocator: Allocator,
    /// Guest clocks: `real` (WASI defaults) or `frozen` (wall clock fixed at
    /// server start, monotonic clock fixed at zero).
    #[arg(long, value_enum, default_value_t = ClockArg::Real)]
    clocks: ClockArg,
    #[command(flatten)]
    trust: TrustArgs,
}

#[derive(Args)]
struct ServeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Tools per `tools/list` page.
    #[arg(long, default_value_t = DEFAULT_PAGE_SIZE)]
    page_size: usize,
    /// Largest serialized response written (bytes); a bigger tool result
    /// becomes an `output_too_large` error. Keep it under the client's frame
    /// limit (16 MiB for rmcp).
    #[arg(long, default_value_t = DEFAULT_MAX_RESPONSE_BYTES)]
    max_response_bytes: usize,
    /// Longest text block of a successful result (bytes). The block mirrors
    /// the structured result in full up to this size; beyond it, the whole
    /// result is sent once, in `structuredContent`, and the text block holds
    /// its head and a note.
    #[arg(long, default_value_t = DEFAULT_TEXT_MIRROR_BYTES)]
    text_mirror_bytes: usize,
    /// For a `tools/call` with a progress token: how long (ms) the call
    /// runs before it is reported as running (then as done). A call that
    /// ends sooner is answered with no progress; one that waits for a slot
    /// is reported at once. 0 reports every call.
    #[arg(long, default_value_t = DEFAULT_PROGRESS_AFTER.as_millis() as u64)]
    progress_after_ms: u64,
    /// Rescan the plugin dir this often (ms); 0 disables.
    #[arg(long, default_value_t = 1000)]
    watch_ms: u64,
    /// Capacity to ask for on stdout when it is a pipe (bytes; 0 leaves it
    /// as it is): large results then pass in a few fills instead of dozens.
    /// The kernel charges it to the user's pipe quota (see README).
    #[arg(long, default_value_t = wasm_mcp_host::stdio::PIPE_BYTES)]
    stdout_pipe_bytes: usize,
    /// Compile a plugin missing from the compile cache with Cranelift
    /// before serving it. By default it is served at once on code from
    /// Winch (wasmtime's baseline compiler) and moved to Cranelift's code,
    /// compiled in the background and written to the cache, when ready.
    #[arg(long)]
    no_baseline_compiler: bool,
    #[command(flatten)]
    http: HttpArgs,
}

/// `serve --http`: Streamable HTTP instead of stdio.
#[derive(Args)]
struct HttpArgs {
    /// Serve MCP over Streamable HTTP at `http://ADDR/mcp` (e.g.
    /// `127.0.0.1:8080`; port 0 picks one) instead of stdio. The bound
    /// address is printed on stderr: `wasm-mcp: listening on http://.../mcp`.
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// Require `Authorization: Bearer <token>` with the token in this file.
    #[arg(long, requires = "http", conflicts_with = "auth_token_env")]
    auth_token_file: Option<PathBuf>,
    /// Require `Authorization: Bearer <token>` with the token in this env var.
    #[arg(long, requires = "http", value_name = "NAME")]
    auth_token_env: Option<String>,
    /// Accept OAuth 2.1 JWT access tokens: TOML with `issuer`, `audience`,
    /// `jwks` (local JWKS file) and `[tool_scopes]` (tool = "scope").
    #[arg(long, requires = "http", value_name = "FILE")]
    oauth_config: Option<PathBuf>,
    /// Also accept this `Host` name (repeatable; loopback names and the bound IP always are).
    #[arg(long, requires = "http", value_name = "NAME")]
    allowed_host: Vec<String>,
    /// Also accept this browser `Origin`, e.g. `https://app.example.com`, and
    /// answer its pages' CORS preflights (repeatable).
    #[arg(long, requires = "http", value_name = "ORIGIN")]
    allowed_origin: Vec<String>,
    /// `scheme://host[:port]` clients use to reach this server (for the
    /// resource metadata) [default: http://ADDR].
    #[arg(long, requires = "http", value_name = "URL")]
    public_url: Option<String>,
    /// Largest HTTP request body in bytes (bigger → 413).
    #[arg(long, requires = "http", default_value_t = wasm_mcp_host::http::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// HTTP requests handled at once (more → 503).
    #[arg(long, requires = "http", default_value_t = wasm_mcp_host::http::DEFAULT_MAX_IN_FLIGHT)]
    max_in_flight: usize,
    /// HTTP connections open at once (more are closed as accepted; an idle
    /// one is closed after 10 s).
    #[arg(long, requires = "http", default_value_t = wasm_mcp_host::http::listener::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// 2025-11-25 sessions open at once (more `initialize` → 503).
    #[arg(long, requires = "http", default_value_t = wasm_mcp_host::http::DEFAULT_MAX_SESSIONS)]
    max_sessions: usize,
    /// A 2025-11-25 session with no request for this long ends, unless its
    /// client holds its GET stream open (seconds, at least 1).
    #[arg(long, requires = "http", value_parser = clap::value_parser!(u64).range(1..),
          default_value_t = wasm_mcp_host::http::DEFAULT_SESSION_IDLE.as_secs())]
    session_idle_secs: u64,
    /// Serve a non-loopback address without authentication anyway.
    #[arg(long, requires = "http")]
    allow_unauthenticated_remote: bool,
}

impl HttpArgs {
    fn options(&self, addr: std::net::SocketAddr) -> Result<HttpOptions> {
        let token = match (&self.auth_token_file, &self.auth_token_env) {
            (Some(f), _) => Some(auth::token_from_file(f)?),
            (None, Some(name)) => Some(auth::token_from_env(name)?),
            (None, None) => None,
        };
        let oauth = self
            .oauth_config
            .as_deref()
            .map(auth::OAuthConfig::load)
            .transpose()?;
        Ok(HttpOptions {
            addr,
            token,
            oauth,
            allowed_hosts: self.allowed_host.clone(),
            allowed_origins: self.allowed_origin.clone(),
            public_url: self.public_url.clone(),
            max_body_bytes: self.max_body_bytes,
            max_in_flight: self.max_in_flight,
            max_connections: self.max_connections,
            max_sessions: self.max_sessions,
            session_idle: std::time::Duration::from_secs(self.session_idle_secs),
            allow_unauthenticated_remote: self.allow_unauthenticated_remote,
        })
    }
}

/// Raises the open-file limit as far as the system lets this process, and
/// warns when calls holding their most at once could still reach it.
fn check_open_file_limit(limits: &Limits) {
    let needed = limits.open_files_needed();
    match wasm_mcp_host::limits::raise_open_file_limit() {
        Ok(have) if have < needed => tracing::warn!(
            have,
            needed,
            "the open-file limit (ulimit -n) is below what calls holding --max-open-files \
             each at once may need; lower --max-open-files or --max-concurrency, or raise the limit"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot raise the open-file limit: {e}"),
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(base.join("wasm-mcp"))
}

/// The registry of `c`'s plugin dir; `baseline_tier`: see
/// `--no-baseline-compiler` (only `serve`, which lives long enough to
/// move plugins to Cranelift's code, uses it).
async fn open_registry(c: &CommonArgs, baseline_tier: bool) -> Result<Arc<Registry>> {
    wasm_mcp_protocol::schema::warm_up_in_background();
    let limits = Limits {
        timeout: Duration::from_millis(c.timeout_ms),
        memory_bytes: c.memory_mb << 20,
        max_output_bytes: c.max_output_bytes,
        max_concurrency: c.max_concurrency.max(1),
        max_concurrency_per_plugin: c.max_concurrency_per_plugin,
        spare_instances: c.spare_instances,
        load_timeout: Duration::from_millis(c.load_timeout_ms),
        disk: DiskLimits {
            call_bytes: c.max_write_bytes,
            call_entries: c.max_files_created,
            max_file_size: c.max_file_size,
            worktree_bytes: c.worktree_write_bytes,
            worktree_entries: c.worktree_files_created,
            plugin_bytes: Share::told(c.plugin_write_bytes),
            plugin_entries: Share::told(c.plugin_files_created),
            call_open_files: c.max_open_files,
        },
        ..Limits::default()
    };
    check_open_file_limit(&limits);
    let access = if c.read_only {
        FsAccess::ReadOnly
    } else {
        FsAccess::ReadWrite
    };
    let sandbox = Sandbox::new(
        Some(&c.worktree),
        access,
        limits,
        &EngineOptions {
            pooling: c.allocator == Allocator::Pooling,
            clocks: if c.clocks == ClockArg::Frozen {
                Clocks::Frozen
            } else {
                Clocks::Real
            },
            baseline_tier,
        },
    )?;
    let cache_dir = if c.no_cache {
        None
    } else {
        c.cache_dir.clone().or_else(default_cache_dir)
    };
    if let Some(dir) = &cache_dir {
        wasm_mcp_host::cache::check_outside(dir, &c.worktree)?;
    }
    let compiler = ChildCompiler {
        memory_bytes: c.compile_memory_mb << 20,
        timeout: Duration::from_millis(c.compile_timeout_ms),
        ..ChildCompiler::this_binary()?
    };
    let cache = ComponentCache::new(cache_dir).compiling_in(compiler);
    let trust = trust(c, &sandbox)?;
    Registry::open_trusted(sandbox, cache, &c.plugins, c.allow.clone(), trust).await
}

async fn inspect(plugin: &Path, json: bool, cache: ComponentCache) -> Result<()> {
    // No filesystem at all: list-tools never gets one.
    let sandbox = Sandbox::new(
        None,
        FsAccess::ReadOnly,
        Limits::default(),
        &EngineOptions::default(),
    )?;
    let report = wasm_mcp_host::inspect::inspect(&sandbox, &cache, plugin).await?;
    if json {
        println!("{}", wasm_mcp_host::inspect::pretty_or_compact(&report));
    } else {
        print!("{}", wasm_mcp_host::inspect::render(&report));
    }
    match &report.cannot_run {
        None => Ok(()),
        Some(why) => anyhow::bail!("{}: the host cannot run it: {why}", plugin.display()),
    }
}

// ---- Trust: pinning, signatures, grants, audit (README "Trust model") ----

#[derive(Args, Clone, Default)]
struct TrustArgs {
    /// Load only plugins pinned in the lock file with their exact sha256.
    #[arg(long)]
    locked: bool,
    /// Lock file [default: plugins.lock in the plugin dir].
    #[arg(long)]
    lock: Option<PathBuf>,
    /// Load only plugins whose `<plugin>.minisig` verifies against this
    /// minisign public key (a file or the base64 key); repeatable.
    #[arg(long = "verify", value_name = "KEY")]
    verify: Vec<String>,
    /// Per-plugin grants (TOML); without it every plugin gets the server's rights.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Append one JSON line per tool call to this file.
    #[arg(long)]
    audit_log: Option<PathBuf>,
}

/// The trust policy and audit log the command line asks for.
fn trust(c: &CommonArgs, sandbox: &Sandbox) -> Result<Trust> {
    let t = &c.trust;
    let max_fs = sandbox.max_filesystem();
    let grants = match &t.config {
        Some(path) => Grants::from_file(path, sandbox.limits(), max_fs)?,
        None => Grants::server_only(sandbox.limits(), max_fs),
    };
    let mut policy = TrustPolicy::open(grants);
    policy.keys = t
        .verify
        .iter()
        .map(|k| TrustedKey::load(k))
        .collect::<Result<_>>()?;
    if t.locked {
        let path = lock_path(t.lock.as_deref(), &c.plugins);
        let lock = PluginLock::read(&path)?;
        policy.keys.extend(lock.trusted_keys(&path)?);
        policy.lock = Some(lock);
    }
    let audit = AuditLog::open(t.audit_log.as_deref(), &c.worktree)?;
    warn_of_trust_files_tools_can_write(c);
    Ok(Trust { policy, audit })
}

/// Logs each file the trust policy is read from (`--config`, the lock of
/// `--locked`, a `--verify` key file) that lies inside the writable
/// worktree: a tool can rewrite it, and the next start reads the grants,
/// pins or keys it wrote. Not refused: the authoring guide serves
/// `--worktree .`, where a project keeps its own config.
fn warn_of_trust_files_tools_can_write(c: &CommonArgs) {
    if c.read_only {
        return;
    }
    let t = &c.trust;
    let lock = t.locked.then(|| lock_path(t.lock.as_deref(), &c.plugins));
    let keys = t.verify.iter().map(PathBuf::from).filter(|k| k.is_file());
    let files = (t.config.iter().map(|p| ("--config", p.clone())))
        .chain(lock.map(|p| ("--lock", p)))
        .chain(keys.map(|p| ("--verify", p)));
    for (what, file) in files {
        let why = "tools can write";
        if wasm_mcp_host::operator_paths::outside_worktree(&file, &c.worktree, why).is_err() {
            tracing::warn!(
                file = %file.display(),
                "the {what} file is inside the writable worktree: a tool can rewrite it, and \
                 the next start trusts what it wrote; keep it outside the worktree"
            );
        }
    }
}

fn lock(plugins: &Path, lock: Option<&Path>, keys: &[String]) -> Result<()> {
    let path = lock_path(lock, plugins);
    let mut pins = if path.is_file() {
        PluginLock::read(&path)?
    } else {
        PluginLock::default()
    };
    for k in keys {
        pins.trust_key(&TrustedKey::load(k)?);
    }
    for name in pins.pin_dir(plugins)? {
        eprintln!("pinned {name} {}", pins.plugins[&name].sha256);
    }
    pins.write(&path)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn sign_all(key: &Path, plugins: &[PathBuf]) -> Result<()> {
    for p in plugins {
        let sig = signing::sign(p, key)?;
        eprintln!("wrote {}", sig.display());
    }
    Ok(())
}

// ---- end of trust ----

/// Whether tools may write where the plugins are: a plugin dir inside a
/// writable worktree (the authoring guide serves `--worktree .
/// --plugins plugins`). Then the dir is not watched, and the log says why:
/// a plugin writing there replaced another plugin, which a reload then
/// published under that plugin's name and grant (a helper's find).
fn writers_reach_plugins(c: &CommonArgs) -> bool {
    if c.read_only {
        return false;
    }
    let why = "tools can write";
    let inside =
        |p: &Path| wasm_mcp_host::operator_paths::outside_worktree(p, &c.worktree, why).is_err();
    if inside(&c.plugins) {
        tracing::warn!(
            plugins = %c.plugins.display(),
            "the plugin dir is inside the writable worktree: not watched (no hot reload), \
             so a tool writing there cannot replace a plugin while serving; keep plugins \
             outside the worktree, or pin them (--locked), for the next start too"
        );
        return true;
    }
    // A plugin file (or signature) linked from the worktree: the same (a
    // tool overwrote the link's target, and the reload served it under the
    // plugin's name and grant; a helper's find).
    let linked = linked_into(&c.plugins, inside);
    if let Some(file) = &linked {
        tracing::warn!(
            plugin = %file.display(),
            "a plugin file links into the writable worktree (a symlink, or a file with other \
             hard links): the plugin dir is not watched (no hot reload), so a tool writing \
             there cannot replace a plugin while serving; keep plugins outside the worktree, \
             or pin them (--locked), for the next start too"
        );
    }
    linked.is_some()
}

/// The first file of `dir` that is a symlink whose target `inside` holds,
/// or that has other hard links (which may be in the worktree: one there,
/// overwritten in place, was served at the next rescan; a helper's find).
fn linked_into(dir: &Path, inside: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let meta = e.metadata().ok()?;
        let linked = if meta.file_type().is_symlink() {
            // Resolved as the operator paths are: a dangling link into the
            // worktree is found too (a tool may make its target later).
            inside(&e.path())
        } else {
            meta.is_file() && meta.nlink() > 1
        };
        linked.then(|| e.path())
    })
}

async fn serve(args: ServeArgs) -> Result<()> {
    // Options are checked (token readable, config valid) before plugins load.
    let http = args.http.http.map(|a| args.http.options(a)).transpose()?;
    wasm_mcp_host::dispatch::start_pool().context("starting the call pool")?;
    let registry = open_registry(&args.common, !args.no_baseline_compiler).await?;
    let catalog = registry.catalog();
    tracing::info!(tools = catalog.len(), worktree = %args.common.worktree.display(), "plugins loaded");
    let server = McpServer::new(registry, args.page_size)
        .with_max_response_bytes(args.max_response_bytes)
        .with_text_mirror_bytes(args.text_mirror_bytes)
        .with_progress_after(Duration::from_millis(args.progress_after_ms));
    let watch = args.watch_ms > 0 && !writers_reach_plugins(&args.common);
    let watcher = watch.then(|| server.spawn_watcher(Duration::from_millis(args.watch_ms)));
    let result = match http {
        Some(opts) => wasm_mcp_host::http::serve(server, opts).await,
        None => {
            // Every call is answered by its deadline, from its arrival.
            let longest = Duration::from_millis(args.common.timeout_ms) + Duration::from_secs(5);
            serve_stdio(server, args.stdout_pipe_bytes, longest).await
        }
    };
    if let Some(w) = watcher {
        w.abort();
    }
    result
}

async fn serve_stdio(server: McpServer, pipe_bytes: usize, longest: Duration) -> Result<()> {
    tracing::info!("serving on stdio");
    let listeners = server.listeners().clone();
    let transport = wasm_mcp_host::stdio::stdio(pipe_bytes, longest)
        .on_input_end(move || listeners.end_streams());
    let running = server
        .serve(transport)
        .await
        .context("MCP session failed to start")?;
    let reason = running.waiting().await;
    tracing::info!("session ended: {reason:?}");
    Ok(())
}

/// mimalloc keeps freed memory for reuse: a large result's buffers (guest
/// string, parsed value, serialized response) are not mmapped, page-faulted
/// and unmapped again on every call as with glibc's allocator (the profile
/// of a 1.9 MB read showed ~20% of the server's time in page faults).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    no_transparent_huge_pages();
    wasm_mcp_host::block_on(run())
}

/// mimalloc asks for transparent huge pages on its arena (`MADV_HUGEPAGE`,
/// before `main`): each first touch of a 2 MiB region then zeroes all of it,
/// and the server's RSS moves in 2 MiB steps (idle 37.9 or 40.7 MiB from one
/// run to the next, 16 large reads in flight 240 or 310 MiB). Regular pages
/// for this process instead; its children (none today) would inherit it.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        eprintln!("wasm-mcp: could not turn off transparent huge pages: {e}");
    }
}

async fn run() -> std::process::ExitCode {
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_env("WASM_MCP_LOG")
        .unwrap_or_else(|_| wasm_mcp_host::DEFAULT_LOG_FILTER.into());
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(wasm_mcp_host::log_lines::CappedLines(std::io::stderr))
        .with_ansi(false)
        .with_filter(wasm_mcp_host::log_lines::at_powers_of_two());
    tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .init();
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Componentize { args } => return componentize::cli(&args),
        Cmd::CompileWorker { tier, out } => compile_child::run_worker(&tier, &out),
        Cmd::New { name, lang, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            wasm_mcp_host::scaffold::new_project(&name, &lang, &dir).map(|files| {
                eprintln!(
                    "wasm-mcp: created {} ({} files): cd {} && ./build.sh && ./test.sh",
                    dir.display(),
                    files.len(),
                    dir.display()
                );
            })
        }
        Cmd::Inspect {
            plugin,
            json,
            cache_dir,
            no_cache,
        } => {
            let cache = ComponentCache::new(if no_cache {
                None
            } else {
                cache_dir.or_else(default_cache_dir)
            });
            match ChildCompiler::this_binary() {
                Ok(compiler) => inspect(&plugin, json, cache.compiling_in(compiler)).await,
                Err(e) => Err(e),
            }
        }
        Cmd::Serve(a) => serve(*a).await,
        Cmd::Tools(c) => {
            async {
                let reg = open_registry(&c, false).await?;
                let tools: Vec<_> = reg.catalog().tools().map(|t| t.tool.clone()).collect();
                println!("{}", wasm_mcp_host::inspect::pretty_or_compact(&tools));
                Ok(())
            }
            .await
        }
        Cmd::Lock {
            plugins,
            lock: file,
            keys,
        } => lock(&plugins, file.as_deref(), &keys),
        Cmd::Keygen { secret, public } => signing::keygen(&secret, &public),
        Cmd::Sign { key, plugins } => sign_all(&key, &plugins),
        Cmd::Call { common, tool, args } => {
            async {
                let reg = open_registry(&common, false).await?;
                let args: serde_json::Value =
                    serde_json::from_str(&args).context("arguments are not valid JSON")?;
                let catalog = reg.catalog();
                let outcome = reg
                    .call(&catalog, &tool, args)
                    .await
                    .with_context(|| format!("unknown tool {tool}"))?;
                let (ok, v) = match (outcome.kind(), outcome.error_message()) {
                    // Cut as an MCP client gets it (a plugin's error may be 16 MiB).
                    (Some(kind), Some(m)) => {
                        let m = wasm_mcp_host::wire_limits::cap_message(m);
                        (false, serde_json::json!({ kind.as_str(): m }))
                    }
                    _ => match outcome {
                        Outcome::Ok { value, .. } => (true, value),
                        _ => unreachable!("an error outcome has a kind and a message"),
                    },
                };
                println!("{}", serde_json::to_string_pretty(&v)?);
                anyhow::ensure!(ok, "call failed");
                Ok(())
            }
            .await
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wasm-mcp: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
