//! The MCP server: `tools/list` (paginated) and `tools/call` over the
//! [`Registry`], plus `notifications/tools/list_changed` when plugins change.
//!
//! Protocol revisions: 2025-11-25 (and 2025-06-18) with the `initialize`
//! handshake, and the stateless 2026-07-28 (`server/discover`, version and
//! client capabilities in each request's `_meta`, `subscriptions/listen`).
//! rmcp does the per-revision lifecycle; this handler serves the same tools
//! on both and works with any rmcp transport (stdio, Streamable HTTP).

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, Implementation, JsonObject, ListToolsResult, MetaObject, PaginatedRequestParams,
    ProtocolVersion, RequestId, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{json, Value};

use wasm_mcp_protocol::{decode_cursor, encode_cursor, ErrorKind};

use crate::audit::{AuditOutcome, PendingAudit};
use crate::cancel::unless_cancelled;
use crate::progress::{Progress, DEFAULT_PROGRESS_AFTER};
use crate::registry::{Outcome, Registry};
use crate::subscriptions::{Listeners, MAX_SUBSCRIPTIONS};
use crate::wire_limits::{
    count_numbers, error_result, fit_response, structured_bound, text_mirror, SizeHint,
    DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TEXT_MIRROR_BYTES,
};

/// The protocol revisions served: the first with structured tool output
/// (2025-06-18) and later. Advertised by `server/discover`; `initialize`
/// with an older version is answered with 2025-11-25.
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// Default `tools/list` page size.
pub const DEFAULT_PAGE_SIZE: usize = 50;

#[derive(Clone)]
pub struct McpServer {
    registry: Arc<Registry>,
    page_size: usize,
    max_response_bytes: usize,
    /// Cap on a successful result's text mirror of its structured content.
    text_mirror_bytes: usize,
    /// How long a call with a progress token runs before it is reported.
    progress_after: Duration,
    /// Every session and subscription to tell about tool-list changes
    /// (shared by all clones: one per HTTP session, one on stdio).
    listeners: Arc<Listeners>,
    /// This session's `notifications/initialized` was heard (fresh for each
    /// session: [`McpServer::for_session`]); a repeat registers nothing.
    initialized: Arc<AtomicBool>,
}

impl McpServer {
    pub fn new(registry: Arc<Registry>, page_size: usize) -> Self {
        McpServer {
            registry,
            page_size: page_size.max(1),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            text_mirror_bytes: DEFAULT_TEXT_MIRROR_BYTES,
            progress_after: DEFAULT_PROGRESS_AFTER,
            listeners: Arc::default(),
            initialized: Arc::default(),
        }
    }

    /// The server for one more session: everything shared but its own
    /// "initialized" mark.
    pub fn for_session(&self) -> Self {
        McpServer {
            initialized: Arc::default(),
            ..self.clone()
        }
    }

    /// How long a call runs before its progress is reported (default
    /// [`DEFAULT_PROGRESS_AFTER`]; zero reports every call).
    pub fn with_progress_after(mut self, after: Duration) -> Self {
        self.progress_after = after;
        self
    }

    /// Cap on one serialized response (default [`DEFAULT_MAX_RESPONSE_BYTES`]).
    pub fn with_max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Cap on a successful result's text block, which mirrors its
    /// structured content (default [`DEFAULT_TEXT_MIRROR_BYTES`]).
    pub fn with_text_mirror_bytes(mut self, bytes: usize) -> Self {
        self.text_mirror_bytes = bytes;
        self
    }

    /// Who is told about tool-list changes (for tests and transports).
    pub fn listeners(&self) -> &Arc<Listeners> {
        &self.listeners
    }

    /// Poll the plugin directory every `interval`; on a change, swap in the
    /// new catalog and notify every initialized session and every
    /// `subscriptions/listen` stream.
    pub fn spawn_watcher(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                match this.registry.reload().await {
                    Ok(true) => {
                        this.listeners.tools_changed().await;
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!("plugin rescan failed: {e:#}"),
                }
            }
        })
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
        .with_server_info(server_info())
        .with_instructions(
            "Tools run as sandboxed WebAssembly components inside this task's worktree.",
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    /// Registers the session for `list_changed` once: 60,000 repeats of
    /// `notifications/initialized` in one session registered it 60,000
    /// times (each change was sent to it as often, one by one, so the
    /// watcher waited on it and hot reload stopped for everyone).
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if self.initialized.swap(true, Ordering::Relaxed) {
            tracing::debug!("notifications/initialized repeated: ignored");
            return;
        }
        tracing::info!("client initialized");
        self.listeners.add_session(context.peer.clone());
    }

    /// `subscriptions/listen` (2026-07-28): tool-list changes only.
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let Some(_registered) = self.listeners.subscribe(context.sink().clone()) else {
            tracing::warn!("subscriptions/listen refused: {MAX_SUBSCRIPTIONS} already open");
            return Err(McpError::invalid_request(
                format!("too many open subscriptions/listen streams (at most {MAX_SUBSCRIPTIONS}); cancel one first"),
                None,
            ));
        };
        tracing::info!(id = %context.sink().id(), "subscriptions/listen opened");
        tokio::select! {
            _ = context.cancelled() => {}
            _ = self.listeners.streams_ended() => {}
        }
        tracing::info!(id = %context.sink().id(), "subscriptions/listen closed");
        Ok(())
    }

    /// A request rmcp could not parse: malformed params of a method we
    /// implement are -32602 (naming the problem), anything else -32601.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(crate::params::unparsed_request(&request))
    }

    /// A published tool. rmcp checks a 2026-07-28 HTTP request's
    /// `Mcp-Param-*` headers against the `x-mcp-header` annotations of the
    /// tool's input schema with it (a header that disagrees with the body,
    /// is missing or is sent twice is 400 with -32020, as the spec asks);
    /// without it none was checked, and a proxy routing on those headers
    /// could be steered (a helper's find).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let mut tool = self.registry.catalog().get(name)?.tool.clone();
        tool.input_schema = without_numeric_header_params(tool.input_schema);
        Some(tool)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let catalog = self.registry.catalog();
        let offset = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => match decode_cursor(&c) {
                Some((list, off)) if list == catalog.list_id() && off <= catalog.len() => off,
                Some(_) => {
                    return Err(McpError::invalid_params(
                        "stale cursor: the tool list changed since it was issued; list again from the start",
                        Some(json!({"cursor": shown_cursor(&c)})),
                    ))
                }
                None => {
                    let data = json!({"cursor": shown_cursor(&c)});
                    return Err(McpError::invalid_params("invalid cursor", Some(data)));
                }
            },
        };
        // Room for the cursor and the envelope; one tool always fits (its
        // title, description and schemas are capped at load).
        let budget = self.max_response_bytes.saturating_sub(4096);
        let (tools, next) = catalog.page_within(offset, self.page_size, budget);
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next.map(|n| encode_cursor(catalog.list_id(), n));
        stamp_server_info(&mut result.meta, &context);
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let call = self.clone().answer_call(request, context);
        crate::dispatch::run_call(call).await.unwrap_or_else(|| {
            Err(McpError::internal_error(
                "the server is shutting down",
                None,
            ))
        })
    }
}

/// A client's cursor as echoed in an error: its head (ours are short; a
/// 12 MiB one was echoed whole).
fn shown_cursor(cursor: &str) -> &str {
    wasm_mcp_protocol::text::head_chars(cursor, 256)
}

impl McpServer {
    /// The whole `tools/call`: run the call, shape and fit its result.
    async fn answer_call(
        self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let call_id = crate::audit::call_id(request.meta.as_ref(), &context.meta);
        let args = Value::Object(request.arguments.unwrap_or_default());
        let progress = Progress::for_request(&context, &name, self.progress_after)?;
        let call = self.observed_call(&name, args, call_id, progress.as_ref());
        let Some((outcome, mut audit)) = unless_cancelled(&context, &name, call).await else {
            // Never sent: rmcp drops the response of a cancelled request.
            let text = format!("{name}: cancelled by the client");
            return Ok(CallToolResult::error(vec![ContentBlock::text(text)]).into());
        };
        let Some(outcome) = outcome else {
            // A client's name is echoed cut (a 9 MiB one, twice, made a
            // frame past the client's 16 MiB line limit).
            let shown = wasm_mcp_protocol::shown_name(&name);
            return Err(McpError::invalid_params(
                format!("Unknown tool: {shown}"),
                Some(json!({"name": shown})),
            ));
        };
        let kind = outcome.kind();
        let (result, hint) = tool_result(&name, outcome, self.text_mirror_bytes, &context.id);
        let mut result = fit_response(result, hint, &context.id, &name, self.max_response_bytes);
        if kind != Some(ErrorKind::OutputTooLarge)
            && sent_kind(&result) == Some(ErrorKind::OutputTooLarge)
        {
            audit.overrule(
                AuditOutcome::Failed(ErrorKind::OutputTooLarge),
                Some(text_of_error(&result)),
            );
        }
        drop(audit);
        stamp_server_info(&mut result.meta, &context);
        Ok(result.into())
    }
}

/// The `tools/call` result for a call's outcome.
/// (and what is known of its size).
fn tool_result(
    name: &str,
    outcome: Outcome,
    text_mirror_bytes: usize,
    id: &RequestId,
) -> (CallToolResult, SizeHint) {
    match outcome {
        Outcome::Ok { value, text } => {
            let source_len = text.len();
            let mirror = text_mirror(text, text_mirror_bytes);
            let bound = structured_bound(source_len, count_numbers(&value), mirror.len(), id);
            // Not `CallToolResult::structured`: that also writes the whole
            // value out as a text block (a full serialization), which the
            // mirror replaces anyway.
            let mut r = CallToolResult::success(vec![ContentBlock::text(mirror)]);
            r.structured_content = Some(value);
            (r, SizeHint::AtMost(bound))
        }
        failed => {
            let kind = failed.kind().unwrap_or(ErrorKind::HostError);
            (
                error_result(error_text(name, &failed), kind),
                SizeHint::Unknown,
            )
        }
    }
}

/// `schema` for rmcp's check of `Mcp-Param-*` headers: less the
/// annotations of its numeric properties
/// ([`wasm_mcp_protocol::header_params::without_numeric_annotations`]).
fn without_numeric_header_params(schema: Arc<JsonObject>) -> Arc<JsonObject> {
    match wasm_mcp_protocol::header_params::without_numeric_annotations(&schema) {
        Some(stripped) => Arc::new(stripped),
        None => schema,
    }
}

fn server_info() -> Implementation {
    Implementation::new("wasm-mcp", env!("CARGO_PKG_VERSION"))
}

/// On 2026-07-28 every result names the server in its `_meta` (the spec's
/// SHOULD; rmcp does it for `server/discover` only). Earlier revisions keep
/// their shape.
fn stamp_server_info(meta: &mut Option<MetaObject>, context: &RequestContext<RoleServer>) {
    if context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
    {
        let info = serde_json::to_value(server_info()).expect("an Implementation serializes");
        meta.get_or_insert_default()
            .insert("io.modelcontextprotocol/serverInfo".into(), info);
    }
}

/// The error kind a result carries (`_meta["wasm-mcp/errorKind"]`).
fn sent_kind(result: &CallToolResult) -> Option<ErrorKind> {
    let kind = result
        .meta
        .as_ref()?
        .get(wasm_mcp_protocol::ERROR_KIND_META)?;
    ErrorKind::parse(kind.as_str()?)
}

/// The text of an error result's first block.
fn text_of_error(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

impl McpServer {
    /// Runs one call against the current catalog, reporting its stages
    /// when the request asked for progress; the outcome comes with its
    /// pending audit line.
    async fn observed_call(
        &self,
        name: &str,
        args: Value,
        call_id: Option<String>,
        progress: Option<&Progress>,
    ) -> (Option<Outcome>, PendingAudit<'_>) {
        let catalog = self.registry.catalog();
        let Some(progress) = progress else {
            let call = self
                .registry
                .call_audited(&catalog, name, args, call_id, |_| {});
            return call.await;
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let call = self
            .registry
            .call_audited(&catalog, name, args, call_id, move |stage| {
                let _ = tx.send(stage);
            });
        let (outcome, ()) = tokio::join!(call, progress.forward(rx));
        outcome
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Numeric header params leave rmcp's check at every depth of the
    /// `properties` chain, as rmcp walks it (only the top level's did, and
    /// a nested big integer was still refused; a helper's find); the others
    /// stay.
    #[test]
    fn numeric_header_params_are_unchecked_at_any_depth() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "x-mcp-header": "N"},
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {
                "m": {"type": ["integer", "null"], "x-mcp-header": "M"},
                "flag": {"type": "boolean", "x-mcp-header": "Flag"}}}}});
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        let out = without_numeric_header_params(Arc::new(schema));
        let at = |path: &str| out.get("properties").unwrap().pointer(path).cloned();
        assert_eq!(at("/n/x-mcp-header"), None);
        assert_eq!(at("/opts/properties/m/x-mcp-header"), None);
        assert_eq!(at("/region/x-mcp-header"), Some(json!("Region")));
        assert_eq!(
            at("/opts/properties/flag/x-mcp-header"),
            Some(json!("Flag"))
        );
    }
}
