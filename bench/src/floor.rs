//! The floor: a do-nothing MCP server on the same rmcp stdio transport as
//! ours. `tools/list` has one tool; `tools/call` returns `{"content": "x"*bytes}`
//! as `structuredContent` plus its text mirror (the shape of our results),
//! with no tool work behind it. What ours costs above it is ours to remove.

use std::sync::Arc;

use anyhow::{Context, Result};
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServiceExt};
use serde_json::{json, Value};

use crate::request::{floor_payload, FLOOR_TOOL};

/// Largest result the floor makes (a bound, not a feature).
const MAX_BYTES: u64 = 64 << 20;

#[derive(Clone)]
struct FloorServer {
    tool: Arc<Tool>,
}

impl FloorServer {
    fn new() -> FloorServer {
        let schema = json!({
            "type": "object",
            "properties": { "bytes": { "type": "integer", "minimum": 0 } },
        });
        let Value::Object(schema) = schema else {
            unreachable!("an object literal")
        };
        FloorServer {
            tool: Arc::new(Tool::new(
                FLOOR_TOOL,
                "Returns `bytes` bytes of content, doing nothing else.",
                Arc::new(schema),
            )),
        }
    }
}

impl ServerHandler for FloorServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![(*self.tool).clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != FLOOR_TOOL {
            return Err(McpError::invalid_params("unknown tool", None));
        }
        let bytes = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("bytes"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if bytes > MAX_BYTES {
            return Err(McpError::invalid_params("bytes too large", None));
        }
        let content = floor_payload(bytes as usize);
        Ok(CallToolResult::structured(json!({ "content": content })).into())
    }
}

/// Serve the floor on stdin/stdout until the client goes away.
pub async fn serve() -> Result<()> {
    let running = FloorServer::new()
        .serve(rmcp::transport::stdio_pipes())
        .await
        .context("floor: MCP session failed to start")?;
    running.waiting().await?;
    Ok(())
}
