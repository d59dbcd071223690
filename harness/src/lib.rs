//! Agent harness for the wasm-mcp host.
//!
//! Layers, bottom-up:
//! - [`policy`]: server launch configs, tool allow/deny lists, approvals (the only
//!   source of commands, cwd and env; the model never chooses them).
//! - [`connection`]: one owner task per MCP server connection (initialize,
//!   version allowlist, tools capability, close).
//! - [`discovery`]: paginated `tools/list` with hard limits, schema checks.
//! - [`naming`]: collision-free local tool names and the binding table.
//! - [`catalog`]: per-round frozen snapshots, `list_changed` → dirty → refresh.
//! - [`registry`] + [`adapter`]: the tool-call pipeline and the MCP adapter.
//! - [`faults`]: call states and retry rules.
//! - [`worktree`]: one git worktree per task.
//! - [`provider`]: OpenAI-compatible and scripted chat providers.
//! - [`agent`]: the round loop; [`task`]: a whole task run with cleanup.
//! - [`trace`]: JSONL trace.

pub mod adapter;
pub mod agent;
pub mod catalog;
pub mod connection;
pub mod discovery;
pub mod faults;
pub mod naming;
pub mod policy;
pub mod provider;
pub mod registry;
pub mod session;
#[doc(hidden)]
pub mod testing;
pub mod task;
pub mod trace;
pub mod worktree;

pub use task::{run_task, ProviderChoice, RunOptions, RunReport};

/// A boxed, sendable future (the crate avoids `async-trait`).
pub type BoxFut<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
