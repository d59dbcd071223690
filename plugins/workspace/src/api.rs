//! The error type of the tools: the SDK's, under the names this crate has
//! always used.

pub use wasm_mcp_guest::{ErrorCode as Code, ToolError as ToolErr};
