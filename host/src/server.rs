//! The MCP server: `tools/list` (paginated) and `tools/call` over the
//! [`Registry`], plus `notifications/tools/list_changed` when plugins change.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::{json, Value};

use wasm_mcp_protocol::{decode_cursor, encode_cursor, ErrorKind};

use crate::registry::{Outcome, Registry};
use crate::wire_limits::{error_result, fit_response, DEFAULT_MAX_RESPONSE_BYTES};

/// Default `tools/list` page size.
pub const DEFAULT_PAGE_SIZE: usize = 50;

#[derive(Clone)]
pub struct McpServer {
    registry: Arc<Registry>,
    page_size: usize,
    max_response_bytes: usize,
    peer: Arc<Mutex<Option<Peer<RoleServer>>>>,
}

impl McpServer {
    pub fn new(registry: Arc<Registry>, page_size: usize) -> Self {
        McpServer {
            registry,
            page_size: page_size.max(1),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            peer: Arc::default(),
        }
    }

    /// Cap on one serialized response (default [`DEFAULT_MAX_RESPONSE_BYTES`]).
    pub fn with_max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Poll the plugin directory every `interval`; on a change, swap in the
    /// new catalog and notify the client (once it is initialized).
    pub fn spawn_watcher(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                match this.registry.reload().await {
                    Ok(true) => this.notify_list_changed().await,
                    Ok(false) => {}
                    Err(e) => tracing::warn!("plugin rescan failed: {e:#}"),
                }
            }
        })
    }

    async fn notify_list_changed(&self) {
        let peer = self.peer.lock().unwrap().clone();
        if let Some(peer) = peer {
            match peer.notify_tool_list_changed().await {
                Ok(()) => tracing::info!("sent notifications/tools/list_changed"),
                Err(e) => tracing::warn!("could not send list_changed: {e}"),
            }
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("wasm-mcp", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Tools run as sandboxed WebAssembly components inside this task's worktree.",
        )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        tracing::info!("client initialized");
        *self.peer.lock().unwrap() = Some(context.peer.clone());
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let catalog = self.registry.catalog();
        let offset = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => match decode_cursor(&c) {
                Some((v, off)) if v == catalog.version && off <= catalog.len() => off,
                Some(_) => {
                    return Err(McpError::invalid_params(
                        "stale cursor: the tool list changed since it was issued; list again from the start",
                        Some(json!({"cursor": c})),
                    ))
                }
                None => return Err(McpError::invalid_params("invalid cursor", Some(json!({"cursor": c})))),
            },
        };
        // Room for the cursor and the envelope; one tool always fits (its
        // title, description and schemas are capped at load).
        let budget = self.max_response_bytes.saturating_sub(4096);
        let (tools, next) = catalog.page_within(offset, self.page_size, budget);
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next.map(|n| encode_cursor(catalog.version, n));
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let catalog = self.registry.catalog();
        let name = request.name.to_string();
        let call_id = crate::audit::call_id(request.meta.as_ref(), &context.meta);
        let args = Value::Object(request.arguments.unwrap_or_default());
        let called = self.registry.call_with_id(&catalog, &name, args, call_id);
        let Some(outcome) = called.await else {
            return Err(McpError::invalid_params(
                format!("Unknown tool: {name}"),
                Some(json!({"name": name})),
            ));
        };
        let result = match outcome {
            Outcome::Ok { value, text } => {
                let mut r = CallToolResult::structured(value);
                r.content = vec![ContentBlock::text(text)];
                r
            }
            failed => {
                let kind = failed.kind().unwrap_or(ErrorKind::HostError);
                error_result(error_text(&name, &failed), kind)
            }
        };
        Ok(fit_response(result, &context.id, &name, self.max_response_bytes).into())
    }
}

/// The message an error result shows, naming the tool where the kind needs it.
fn error_text(name: &str, outcome: &Outcome) -> String {
    let message = outcome.error_message().unwrap_or_default();
    match outcome.kind() {
        Some(ErrorKind::InvalidArguments) => format!("invalid arguments for {name}: {message}"),
        Some(ErrorKind::ContractViolation) => {
            tracing::warn!(tool = %name, "contract violation: {message}");
            format!("tool {name} broke its contract: {message}")
        }
        _ => message,
    }
}
