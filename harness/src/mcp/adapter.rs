//! MCP adapter: turns catalog entries into registry tools that send `tools/call`.
//!
//! - Arguments were validated by the registry before this runs.
//! - `isError: true` → `HandlerOutput::is_error` (error text for the model).
//! - Non-text content (image, audio, embedded resource) is stored as a file in the
//!   runtime dir's `artifacts/` (or refused by policy); base64 is never inlined.
//! - Timeout/disconnect → failure with unknown state; re-sent at most once and
//!   only if the policy marks the tool read-only and idempotent.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use serde_json::{Map, Value};

use crate::mcp::connection::ConnectionHandle;
use crate::run::policy::{ArtifactMode, Policy, ToolPolicy};
use crate::tools::catalog::CatalogSnapshot;
use crate::tools::faults::{may_retry, CallFault};
use crate::tools::naming::{sanitize, Binding};
use crate::tools::registry::{HandlerFailure, HandlerOutput, ToolHandler, ToolSpec};
use crate::BoxFut;

/// Where non-text content goes.
#[derive(Debug)]
pub struct ArtifactStore {
    pub dir: PathBuf,
    counter: AtomicU64,
}

impl ArtifactStore {
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            counter: AtomicU64::new(0),
        }
    }

    async fn store(&self, tool: &str, mime: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        tokio::fs::create_dir_all(&self.dir).await?;
        let n = self.counter.fetch_add(1, Ordering::SeqCst) + 1;
        let ext = match mime {
            "image/png" => "png",
            "image/jpeg" => "jpg",
            "image/gif" => "gif",
            "image/webp" => "webp",
            "audio/wav" | "audio/x-wav" => "wav",
            "audio/mpeg" => "mp3",
            m if m.starts_with("text/") => "txt",
            "application/json" => "json",
            _ => "bin",
        };
        let path = self.dir.join(format!("{n:04}-{}.{ext}", sanitize(tool)));
        tokio::fs::write(&path, bytes).await?;
        Ok(path)
    }
}

tokio::task_local! {
    /// The trace's id of the tool call being run (set around the call by
    /// the agent loop); sent as `_meta["wasm-mcp/callId"]` so a `wasm-mcp`
    /// server's audit log names the same call.
    pub static TRACE_CALL_ID: String;
}

/// `tools/call` params for `remote`, carrying the trace's call id if any.
fn call_params(remote: &str, args: &Map<String, Value>) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(remote.to_string()).with_arguments(args.clone());
    if let Ok(id) = TRACE_CALL_ID.try_with(Clone::clone) {
        let mut meta = Map::new();
        meta.insert("wasm-mcp/callId".into(), Value::String(id));
        params.meta = Some(rmcp::model::RequestMetaObject(rmcp::model::MetaObject(
            meta,
        )));
    }
    params
}

pub struct McpToolHandler {
    pub conn: ConnectionHandle,
    pub remote: String,
    pub timeout: Duration,
    pub policy: ToolPolicy,
    pub artifacts: Arc<ArtifactStore>,
    pub artifact_mode: ArtifactMode,
}

impl ToolHandler for McpToolHandler {
    fn call(&self, args: Map<String, Value>) -> BoxFut<'_, Result<HandlerOutput, HandlerFailure>> {
        Box::pin(async move {
            let mut attempt = 0u32;
            loop {
                let req = ClientRequest::CallToolRequest(CallToolRequest::new(call_params(
                    &self.remote,
                    &args,
                )));
                match self.conn.request(req, self.timeout).await {
                    Ok(v) => {
                        let mut out = self.convert(v).await.map_err(|e| HandlerFailure {
                            fault: e,
                            attempts: attempt + 1,
                        })?;
                        out.attempts = attempt + 1;
                        return Ok(out);
                    }
                    Err(fault) => {
                        if may_retry(&self.policy, &fault, attempt) && self.conn.is_alive() {
                            tracing::warn!(tool = %self.remote, %fault, "retrying read-only idempotent tool");
                            attempt += 1;
                            continue;
                        }
                        return Err(HandlerFailure {
                            fault,
                            attempts: attempt + 1,
                        });
                    }
                }
            }
        })
    }
}

impl McpToolHandler {
    async fn convert(&self, v: Value) -> Result<HandlerOutput, CallFault> {
        let obj = v
            .as_object()
            .ok_or_else(|| CallFault::Protocol("tools/call result is not an object".into()))?;
        if obj
            .get("resultType")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "complete")
        {
            return Err(CallFault::Protocol(
                "unsupported non-complete tools/call result".into(),
            ));
        }
        let is_error = obj.get("isError").and_then(Value::as_bool).unwrap_or(false);
        // `"structuredContent": null` is no structured content (the text is the result).
        let structured = obj
            .get("structuredContent")
            .filter(|v| !v.is_null())
            .cloned();
        let mut texts = Vec::new();
        let mut artifacts = Vec::new();
        let mut refused = None;
        let empty = Vec::new();
        let blocks = obj
            .get("content")
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        for b in blocks {
            let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
            if kind == "text" {
                texts.push(
                    b.get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                );
                continue;
            }
            // Non-text content.
            let (mime, bytes): (String, Result<Vec<u8>, String>) = match kind {
                "image" | "audio" => (
                    b.get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("application/octet-stream")
                        .into(),
                    b64_field(b, "data"),
                ),
                "resource" => {
                    let r = b.get("resource").cloned().unwrap_or(Value::Null);
                    let mime = r
                        .get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("application/octet-stream");
                    if let Some(t) = r.get("text").and_then(Value::as_str) {
                        (mime.into(), Ok(t.as_bytes().to_vec()))
                    } else {
                        (mime.into(), b64_field(&r, "blob"))
                    }
                }
                "resource_link" => {
                    let uri = b.get("uri").and_then(Value::as_str).unwrap_or("?");
                    texts.push(format!("[resource link: {uri}]"));
                    continue;
                }
                other => (
                    format!("unknown/{other}"),
                    Err("unsupported content block".into()),
                ),
            };
            if self.artifact_mode == ArtifactMode::Refuse {
                refused = Some(format!(
                    "tool returned non-text content ({mime}), which policy refuses"
                ));
                continue;
            }
            match bytes {
                Ok(bytes) => match self.artifacts.store(&self.remote, &mime, &bytes).await {
                    Ok(p) => {
                        texts.push(format!(
                            "[{kind} content stored as artifact {} ({mime}, {} bytes)]",
                            p.display(),
                            bytes.len()
                        ));
                        artifacts.push(p);
                    }
                    Err(e) => refused = Some(format!("could not store {mime} artifact: {e}")),
                },
                Err(why) => refused = Some(format!("{why} ({kind}, {mime})")),
            }
        }
        Ok(HandlerOutput {
            is_error,
            text: texts.join("\n"),
            structured,
            artifacts,
            refused,
            attempts: 1,
        })
    }
}

/// The base64 string field `field` of a content block, decoded. Missing or
/// undecodable data is an error: nothing is stored in its place.
fn b64_field(block: &Value, field: &str) -> Result<Vec<u8>, String> {
    let data = block
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("content block has no `{field}`"))?;
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("content block `{field}` is not valid base64: {e}"))
}

/// Registry tools for every catalog entry, bound to the server connections.
pub fn specs_from_catalog(
    snapshot: &CatalogSnapshot,
    conns: &HashMap<String, ConnectionHandle>,
    policy: &Policy,
    artifacts: &Arc<ArtifactStore>,
) -> Vec<ToolSpec> {
    let mut out = Vec::new();
    for e in snapshot.entries() {
        let t = &e.tool;
        let (Some(conn), Some(sp)) = (conns.get(&t.server_id), policy.server(&t.server_id)) else {
            continue;
        };
        let tp = sp.tool_policy(&t.name);
        out.push(ToolSpec {
            local_name: e.local_name.clone(),
            description: t.description.clone(),
            parameters: t.input_schema.clone(),
            input_validator: Some(t.input_validator.clone()),
            output_validator: t.output_validator.clone(),
            policy: tp.clone(),
            origin: Some(Binding {
                server_id: t.server_id.clone(),
                remote_name: t.name.clone(),
            }),
            annotations: t.annotations.clone(),
            handler: Arc::new(McpToolHandler {
                conn: conn.clone(),
                remote: t.name.clone(),
                timeout: sp.request_timeout(),
                policy: tp,
                artifacts: artifacts.clone(),
                artifact_mode: sp.artifacts,
            }),
        });
    }
    out
}
