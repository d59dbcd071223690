//! Agent harness for the wasm-mcp host.
//!
//! Modules, bottom-up:
//! - [`mcp`]: talking to MCP servers (connection, discovery, the call adapter).
//! - [`tools`]: the tool model the agent sees (naming, catalog, call pipeline, faults).
//! - [`run`]: one task run (policy, worktree, session, agent loop, trace).
//! - [`provider`]: chat model providers.
//!
//! Layers, bottom-up:
//! - [`run::policy`]: server launch configs, tool allow/deny lists, approvals (the only
//!   source of commands, cwd and env; the model never chooses them).
//! - [`mcp::connection`]: one owner task per MCP server connection (initialize,
//!   version allowlist, tools capability, close).
//! - [`mcp::discovery`]: paginated `tools/list` with hard limits, schema checks.
//! - [`tools::tool`]: the one [`tools::tool::Tool`] (binding, local name, schemas,
//!   validators) shared by catalog, pipeline and providers.
//! - [`tools::naming`]: collision-free local tool names and the binding table.
//! - [`tools::catalog`]: per-round frozen snapshots, refreshed at safe points after `list_changed`.
//! - [`tools::pipeline`] + [`mcp::adapter`]: the tool-call pipeline and the MCP adapter.
//! - [`tools::faults`]: call states and retry rules.
//! - [`run::worktree`]: one git worktree per task.
//! - [`provider`]: OpenAI-compatible and scripted chat providers.
//! - [`run::agent`]: the round loop; [`run::task`]: a whole task run with cleanup.
//! - [`run::trace`]: JSONL trace.

pub mod mcp;
pub mod provider;
pub mod run;
pub mod tools;

pub use run::task::{run_task, ProviderChoice, RunOptions, RunReport};

/// A boxed, sendable future (the crate avoids `async-trait`).
pub type BoxFut<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
