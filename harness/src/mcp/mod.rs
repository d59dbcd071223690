//! Talking to MCP servers: one connection per server (stdio or Streamable HTTP), paginated discovery,
//! and the adapter that turns a tool call into `tools/call`.

pub mod adapter;
pub mod connection;
pub mod discovery;
pub mod frame_guard;
pub mod http_transport;
pub mod structured_binary;
