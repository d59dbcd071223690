//! The floor: a do-nothing MCP server on the same rmcp stdio transport as
//! ours. `tools/list` has one tool; `tools/call` returns `{"content": "x"*bytes}`
//! as `structuredContent` plus its text mirror, cut by the host's own rule
//! (the shape of our results), with no tool work behind it. What ours costs
//! above it is ours to remove.

use std::sync::Arc;

use anyhow::{Context, Result};
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServiceExt};
use serde_json::{json, Value};
use wasm_mcp_host::wire_limits::{text_mirror, DEFAULT_TEXT_MIRROR_BYTES};

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
        Ok(result(floor_payload(bytes as usize)).into())
    }
}

/// `{"content": payload}` as structured content, and its text mirror cut by
/// the same rule as ours (whole up to 64 KiB, else a head and a note).
fn result(payload: String) -> CallToolResult {
    let text = format!("{{\"content\":\"{payload}\"}}"); // the payload needs no escaping
    let mut r = CallToolResult::structured(Value::Null);
    r.structured_content = Some(json!({ "content": payload }));
    r.content = vec![ContentBlock::text(text_mirror(
        text,
        DEFAULT_TEXT_MIRROR_BYTES,
    ))];
    r
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

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: &CallToolResult) -> &str {
        &r.content[0].as_text().unwrap().text
    }

    #[test]
    fn the_mirror_is_whole_when_small_and_cut_like_ours_when_large() {
        let small = result(floor_payload(10));
        let v: Value = serde_json::from_str(text(&small)).unwrap();
        assert_eq!(Some(&v), small.structured_content.as_ref());

        let large = result(floor_payload(DEFAULT_TEXT_MIRROR_BYTES + 1));
        let content = large.structured_content.as_ref().unwrap()["content"]
            .as_str()
            .unwrap();
        assert_eq!(content.len(), DEFAULT_TEXT_MIRROR_BYTES + 1);
        assert!(text(&large).len() < DEFAULT_TEXT_MIRROR_BYTES + 200);
        assert!(text(&large).contains("structuredContent"));
    }
}
