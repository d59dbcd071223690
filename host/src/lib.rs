//! wasm-mcp host: an MCP server whose tools are WASI 0.2 components, each
//! call sandboxed in a fresh instance whose only filesystem is the task
//! worktree.
//!
//! Layers, bottom up: [`sandbox`] (engine, per-call store and limits),
//! [`cache`] (compiled components by content hash), [`plugin`] (the WIT
//! world and calls), [`catalog`] (validated tool set), [`registry`] (live
//! set + reloads), [`server`] (rmcp handler, with [`params`], [`cancel`],
//! [`progress`] and [`subscriptions`]), [`http`] (Streamable HTTP
//! transport: Host/Origin checks, limits, bearer/JWT auth).

pub mod audit;
pub mod cache;
pub mod cancel;
pub mod catalog;
pub mod code_limits;
pub mod compile_child;
pub mod disk_budget;
pub mod disk_guard;
pub mod dispatch;
pub mod grants;
pub mod http;
pub mod inspect;
pub mod limits;
pub mod log_lines;
pub mod logpipe;
pub mod operator_paths;
pub mod params;
pub mod pinning;
pub mod plugin;
pub mod progress;
pub mod registry;
pub mod repeats;
pub mod sandbox;
pub mod scaffold;
pub mod server;
pub mod signing;
pub mod spare;
pub mod stdio;
pub mod stdio_reader;
pub mod subscriptions;
pub mod trust;
pub mod unanswered;
pub mod wire_limits;

pub use limits::Limits;

/// The log filter without `WASM_MCP_LOG`: ours at info, rmcp's warnings
/// only (at info it logs every message a client sends, whole: a client
/// could fill the operator's disk through the server's stderr).
pub const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";

/// Runs `wasm-mcp`'s `main` on a tokio runtime with one worker thread (the
/// connection's: it reads and answers requests, and runs a call that is
/// alone in flight; see [`dispatch`] for where the others run), started
/// after [`quiet_library_backtraces`] (which must run before any other
/// thread).
pub fn block_on<F: std::future::Future>(main: F) -> F::Output {
    block_on_workers(1, main)
}

/// [`block_on`] with `workers` worker threads (the bench's client, which
/// drives many connections at once, takes one per core).
pub fn block_on_workers<F: std::future::Future>(workers: usize, main: F) -> F::Output {
    quiet_library_backtraces();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()
        .expect("starting the tokio runtime");
    let out = runtime.block_on(main);
    runtime.shutdown_timeout(EXIT_WAIT);
    out
}

/// How long the process waits at its end for blocking tasks still running.
/// Dropping the runtime waited for all of them: a stdio server whose client
/// had gone stayed 14 s for a background tier-up compile nobody would use
/// (its compiler child is killed with the process, see
/// [`compile_child`]). Answers are all written before `main` returns.
pub const EXIT_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// `RUST_LIB_BACKTRACE=0` unless the operator set it. With `RUST_BACKTRACE=1`
/// (common in development and CI) every error value captures a backtrace,
/// and wasmtime makes one internally each time a store is dropped: an
/// unwind of the stack per tool call (~0.1 ms, the largest single cost the
/// profile of a small call showed). Panics still print their backtraces.
fn quiet_library_backtraces() {
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // Called by `block_on` before the runtime's threads exist.
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
    }
}
