//! The product's worktree file tools, as a WASI 0.2 tool plugin
//! (`wit/tool.wit`, world `tool-plugin`), written on the guest SDK
//! (`wasm-mcp-guest`): schemas derive from the argument and result types.
//!
//! All logic is plain Rust over a `root` directory so it can be unit-tested
//! natively (`cargo test`); in the component `root` is `/`, where the host
//! preopens the worktree.

pub mod api;
pub mod paths;
pub mod tools;
pub mod window;

wasm_mcp_guest::export_tools!(tools::tools(std::path::Path::new("/")));
