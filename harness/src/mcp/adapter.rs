//! MCP adapter: turns catalog entries into pipeline tools that send `tools/call`.
//!
//! - Arguments were validated by the pipeline before this runs.
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
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
    ResourceContents, ResultType,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use wasm_mcp_protocol::{ErrorKind as ServerErrorKind, CALL_ID_META, ERROR_KIND_META};

use crate::mcp::connection::ConnectionHandle;
use crate::mcp::structured_binary;
use crate::run::policy::{ArtifactMode, Policy, ToolPolicy};
use crate::tools::catalog::CatalogSnapshot;
use crate::tools::faults::{may_retry, CallFault};
use crate::tools::naming::sanitize;
use crate::tools::pipeline::{
    Artifact, HandlerFailure, HandlerOutput, RegisteredTool, ToolErrorReport, ToolHandler,
};
use crate::BoxFut;

/// Binary payloads of one result stored as artifacts; the rest are counted
/// and withheld (15,000 image blocks made as many files and a 2.3 MB tool
/// message, artifact references being exempt from the model-text cap).
pub const MAX_ARTIFACTS_PER_RESULT: usize = 32;

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
    /// the agent loop); sent as `_meta[CALL_ID_META]` so a `wasm-mcp`
    /// server's audit log names the same call.
    pub static TRACE_CALL_ID: String;
}

/// `tools/call` params for `remote`, carrying the trace's call id if any.
fn call_params(remote: &str, args: &Map<String, Value>) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(remote.to_string()).with_arguments(args.clone());
    if let Ok(id) = TRACE_CALL_ID.try_with(Clone::clone) {
        let mut meta = Map::new();
        meta.insert(CALL_ID_META.into(), Value::String(id));
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

/// Where a binary payload came from (named in its artifact reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinaryKind {
    Image,
    Audio,
    Resource,
    /// A binary string inside `structuredContent`.
    Structured,
    /// A content block the client cannot read.
    Unsupported,
}

impl std::fmt::Display for BinaryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BinaryKind::Image => "image",
            BinaryKind::Audio => "audio",
            BinaryKind::Resource => "resource",
            BinaryKind::Structured => "structured",
            BinaryKind::Unsupported => "unsupported",
        })
    }
}

/// Text for the model, or a binary payload to store, from one content block.
enum Block {
    Text(String),
    Binary {
        kind: BinaryKind,
        mime: String,
        bytes: Result<Vec<u8>, String>,
    },
}

/// One typed content block. A block rmcp cannot read (unknown type, missing
/// field) is refused with the reason, never faked.
fn read_block(raw: Value) -> Block {
    let kind_hint = raw
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    let block = match serde_json::from_value::<ContentBlock>(raw) {
        Ok(b) => b,
        Err(e) => {
            return Block::Binary {
                kind: BinaryKind::Unsupported,
                mime: format!("unknown/{kind_hint}"),
                bytes: Err(format!("malformed or unsupported content block: {e}")),
            }
        }
    };
    match block {
        ContentBlock::Text(t) => Block::Text(t.text),
        ContentBlock::Image(i) => Block::Binary {
            kind: BinaryKind::Image,
            bytes: b64(&i.data, "data"),
            mime: i.mime_type,
        },
        ContentBlock::Audio(a) => Block::Binary {
            kind: BinaryKind::Audio,
            bytes: b64(&a.data, "data"),
            mime: a.mime_type,
        },
        ContentBlock::Resource(r) => match r.resource {
            ResourceContents::TextResourceContents {
                mime_type, text, ..
            } => Block::Binary {
                kind: BinaryKind::Resource,
                mime: mime_type.unwrap_or_else(|| OCTET_STREAM.into()),
                bytes: Ok(text.into_bytes()),
            },
            ResourceContents::BlobResourceContents {
                mime_type, blob, ..
            } => Block::Binary {
                kind: BinaryKind::Resource,
                mime: mime_type.unwrap_or_else(|| OCTET_STREAM.into()),
                bytes: b64(&blob, "blob"),
            },
            _ => Block::Binary {
                kind: BinaryKind::Resource,
                mime: OCTET_STREAM.into(),
                bytes: Err("unsupported resource contents".into()),
            },
        },
        ContentBlock::ResourceLink(l) => Block::Text(format!("[resource link: {}]", l.uri)),
        _ => Block::Binary {
            kind: BinaryKind::Unsupported,
            mime: format!("unknown/{kind_hint}"),
            bytes: Err("unsupported content block".into()),
        },
    }
}

const OCTET_STREAM: &str = "application/octet-stream";

/// Split a `tools/call` result into rmcp's typed [`CallToolResult`] (without
/// its content) and the raw content blocks, read one by one so that one bad
/// block is refused on its own instead of failing the whole result.
fn split_result(v: Value) -> Result<(CallToolResult, Vec<Value>), CallFault> {
    let Value::Object(mut obj) = v else {
        return Err(CallFault::Protocol(
            "tools/call result is not an object".into(),
        ));
    };
    // An empty list stays in place: rmcp wants at least one known field.
    let blocks = match obj.insert("content".into(), Value::Array(Vec::new())) {
        Some(Value::Array(blocks)) => blocks,
        _ => Vec::new(),
    };
    let result: CallToolResult = serde_json::from_value(Value::Object(obj))
        .map_err(|e| CallFault::Protocol(format!("malformed tools/call result: {e}")))?;
    Ok((result, blocks))
}

impl McpToolHandler {
    async fn convert(&self, v: Value) -> Result<HandlerOutput, CallFault> {
        let (result, blocks) = split_result(v)?;
        if result
            .result_type
            .as_ref()
            .is_some_and(|t| *t != ResultType::COMPLETE)
        {
            return Err(CallFault::Protocol(
                "unsupported non-complete tools/call result".into(),
            ));
        }
        let mut texts = Vec::new();
        let mut stored = StoredContent::default();
        for raw in blocks {
            match read_block(raw) {
                Block::Text(t) => texts.push(t),
                Block::Binary { kind, mime, bytes } => {
                    self.keep_binary(&mut stored, kind, &mime, bytes).await;
                }
            }
        }
        // `"structuredContent": null` is no structured content (the text is the result).
        let server_kind = server_error_kind(&result);
        let structured = result.structured_content.filter(|v| !v.is_null());
        let model_structured = match &structured {
            Some(s) => self.redact_binary(&mut stored, s).await,
            None => None,
        };
        Ok(HandlerOutput {
            tool_error: result
                .is_error
                .unwrap_or(false)
                .then_some(ToolErrorReport { kind: server_kind }),
            text: texts.join("\n"),
            structured,
            model_structured,
            artifacts: stored.artifacts,
            artifacts_withheld: stored.withheld,
            refused: stored.refused,
            attempts: 1,
        })
    }

    /// Store one binary payload as an artifact (or note why it was refused);
    /// its reference, or `None` when it was not stored.
    async fn keep_binary(
        &self,
        stored: &mut StoredContent,
        kind: BinaryKind,
        mime: &str,
        bytes: Result<Vec<u8>, String>,
    ) -> Option<String> {
        if self.artifact_mode == ArtifactMode::Refuse {
            stored.refused = Some(format!(
                "tool returned non-text content ({mime}), which policy refuses"
            ));
            return None;
        }
        let bytes = match bytes {
            Ok(b) => b,
            Err(why) => {
                stored.refused = Some(format!("{why} ({kind}, {mime})"));
                return None;
            }
        };
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        if let Some(i) = stored.digests.iter().position(|d| *d == digest) {
            return Some(stored.artifacts[i].reference.clone());
        }
        if stored.artifacts.len() >= MAX_ARTIFACTS_PER_RESULT {
            stored.withheld += 1;
            return None;
        }
        match self.artifacts.store(&self.remote, mime, &bytes).await {
            Ok(path) => {
                let reference = format!(
                    "[{kind} content stored as artifact {} ({mime}, {} bytes)]",
                    path.display(),
                    bytes.len()
                );
                stored.digests.push(digest);
                stored.artifacts.push(Artifact {
                    path,
                    reference: reference.clone(),
                });
                Some(reference)
            }
            Err(e) => {
                stored.refused = Some(format!("could not store {mime} artifact: {e}"));
                None
            }
        }
    }

    /// The model's copy of `structured` with each binary string replaced by
    /// its artifact's reference (the same artifact when a content block
    /// already carried these bytes); `None` when there is nothing to replace.
    async fn redact_binary(&self, stored: &mut StoredContent, structured: &Value) -> Option<Value> {
        let found = structured_binary::find(structured, &stored.digests);
        if found.is_empty() {
            return None;
        }
        let mut replacements = Vec::new();
        for f in found {
            let reference = self
                .keep_binary(stored, BinaryKind::Structured, &f.mime, Ok(f.bytes))
                .await
                .unwrap_or_else(|| "[binary content withheld]".to_string());
            replacements.push((f.pointer, reference));
        }
        Some(structured_binary::replaced(structured, &replacements))
    }
}

/// Artifacts stored for one result, and why content was refused, if it was.
#[derive(Default)]
struct StoredContent {
    artifacts: Vec<Artifact>,
    /// SHA-256 of each artifact's bytes, to reuse one artifact for repeats.
    digests: Vec<[u8; 32]>,
    /// Binary payloads past [`MAX_ARTIFACTS_PER_RESULT`], not stored.
    withheld: usize,
    refused: Option<String>,
}

/// The server's classification of an error result (`_meta[ERROR_KIND_META]`).
fn server_error_kind(result: &CallToolResult) -> Option<ServerErrorKind> {
    let meta = result.meta.as_ref()?;
    ServerErrorKind::parse(meta.get(ERROR_KIND_META)?.as_str()?)
}

/// A base64 payload, decoded. Undecodable data is an error: nothing is
/// stored in its place.
fn b64(data: &str, field: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("content block `{field}` is not valid base64: {e}"))
}

/// Pipeline tools for every catalog tool, bound to the server connections.
pub fn tools_from_catalog(
    snapshot: &CatalogSnapshot,
    conns: &HashMap<String, ConnectionHandle>,
    policy: &Policy,
    artifacts: &Arc<ArtifactStore>,
) -> Vec<RegisteredTool> {
    let mut out = Vec::new();
    for tool in snapshot.entries() {
        let Some(b) = &tool.binding else { continue };
        let (Some(conn), Some(sp)) = (conns.get(&b.server_id), policy.server(&b.server_id)) else {
            continue;
        };
        let tp = sp.tool_policy(&b.remote_name);
        out.push(RegisteredTool {
            tool: tool.clone(),
            policy: tp.clone(),
            handler: Arc::new(McpToolHandler {
                conn: conn.clone(),
                remote: b.remote_name.clone(),
                timeout: sp.request_timeout(),
                policy: tp,
                artifacts: artifacts.clone(),
                artifact_mode: sp.artifacts,
            }),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(raw: Value) -> String {
        match read_block(raw) {
            Block::Binary {
                bytes: Err(why), ..
            } => why,
            Block::Binary { bytes: Ok(_), .. } => panic!("accepted as binary"),
            Block::Text(t) => panic!("accepted as text: {t}"),
        }
    }

    #[test]
    fn blocks_are_read_typed_and_bad_ones_refused() {
        assert!(matches!(
            read_block(json!({"type": "text", "text": "hi"})),
            Block::Text(t) if t == "hi"
        ));
        assert!(matches!(
            read_block(json!({"type": "resource_link", "uri": "file:///a", "name": "a"})),
            Block::Text(t) if t == "[resource link: file:///a]"
        ));
        assert!(matches!(
            read_block(json!({"type": "image", "data": "aGk=", "mimeType": "image/png"})),
            Block::Binary { kind: BinaryKind::Image, bytes: Ok(b), .. } if b == b"hi"
        ));
        assert!(refusal(json!({"type": "video", "data": "aGk="})).contains("unsupported"));
        assert!(refusal(json!({"type": "audio", "mimeType": "audio/wav"})).contains("data"));
        assert!(
            refusal(json!({"type": "image", "data": "%%", "mimeType": "image/png"}))
                .contains("base64")
        );
        assert!(refusal(json!("not an object")).contains("content block"));
    }

    #[test]
    fn result_envelope_is_typed() {
        let (r, blocks) = split_result(json!({
            "content": [{"type": "text", "text": "x"}],
            "isError": true,
            "structuredContent": {"a": 1}
        }))
        .unwrap();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.structured_content, Some(json!({"a": 1})));
        assert_eq!(blocks.len(), 1);
        assert_eq!(server_error_kind(&r), None);
        let (r, _) = split_result(json!({
            "content": [], "isError": true, "_meta": {ERROR_KIND_META: "memory_limit"}
        }))
        .unwrap();
        assert_eq!(server_error_kind(&r), Some(ServerErrorKind::MemoryLimit));
        assert!(split_result(json!([1])).is_err());
        assert!(split_result(json!({"isError": "yes"})).is_err());
    }
}
