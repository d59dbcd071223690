//! The one tool model of the harness: a [`Tool`] is built once (at discovery
//! for MCP tools) and shared, unchanged, by the catalog snapshot, the call
//! pipeline and the providers.

use std::sync::Arc;

use serde_json::Value;
use wasm_mcp_protocol::CheckedSchema;

use crate::tools::naming::Binding;

/// A tool the model can call.
#[derive(Clone)]
pub struct Tool {
    /// The model-facing name (see [`crate::tools::naming`]).
    pub local_name: String,
    /// The server and remote name behind it; `None` for a harness-local tool.
    pub binding: Option<Binding>,
    /// Capped at the protocol's description limit.
    pub description: String,
    /// Sent to the model as the function's parameters.
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub input_validator: Option<Arc<CheckedSchema>>,
    pub output_validator: Option<Arc<CheckedSchema>>,
    /// Server hints: shown to approvers, never used for decisions.
    pub annotations: Option<Value>,
}

impl Tool {
    /// The remote name, if the tool lives on a server.
    pub fn remote_name(&self) -> Option<&str> {
        self.binding.as_ref().map(|b| b.remote_name.as_str())
    }

    pub fn server_id(&self) -> Option<&str> {
        self.binding.as_ref().map(|b| b.server_id.as_str())
    }
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("local_name", &self.local_name)
            .field("binding", &self.binding)
            .finish_non_exhaustive()
    }
}

/// Resolves a remote tool name to the local name the model sees (the
/// scripted provider's only view of the catalog).
pub trait NameResolver: Send + Sync {
    /// With `server = None` the remote name must be unique across servers.
    fn local_for(&self, server: Option<&str>, remote: &str) -> Option<String>;
}
