//! OpenAI-compatible `POST {base}/chat/completions` provider.
//!
//! Env: `OPENAI_BASE_URL` (e.g. `https://api.openai.com/v1`), `OPENAI_API_KEY`
//! (optional for local servers), `OPENAI_MODEL`.

use std::time::Duration;

use serde_json::{json, Value};

use super::{ChatMessage, ChatProvider, ChatRequest, ProviderError};
use crate::BoxFut;

/// Largest response body accepted from the chat endpoint.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// How much of an error body is kept in [`ProviderError::Status`].
/// Most JSON values one provider reply may hold, counted before it is
/// parsed (the harness's bound on an MCP frame).
pub const MAX_REPLY_JSON_VALUES: usize = crate::mcp::frame_guard::MAX_FRAME_JSON_VALUES;

const MAX_ERROR_BODY_CHARS: usize = 2000;

/// `e` and all its causes (reqwest's `Display` omits them, e.g. "connection refused").
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Read the body, refusing more than [`MAX_RESPONSE_BYTES`].
async fn read_body(mut resp: reqwest::Response) -> Result<String, ProviderError> {
    let http = |e: reqwest::Error| ProviderError::Http(with_causes(&e));
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_RESPONSE_BYTES as u64)
    {
        return Err(ProviderError::Malformed(format!(
            "response body larger than {MAX_RESPONSE_BYTES} bytes"
        )));
    }
    let mut buf = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(http)? {
        if buf.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(ProviderError::Malformed(format!(
                "response body larger than {MAX_RESPONSE_BYTES} bytes"
            )));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

pub struct OpenAiProvider {
    base_url: String,
    api_key: Option<String>,
    model: String,
    http: reqwest::Client,
    /// Tool calls given an id here (the provider sent none).
    unnamed_calls: std::sync::atomic::AtomicU64,
}

impl OpenAiProvider {
    pub fn new(
        base_url: &str,
        api_key: Option<String>,
        model: &str,
    ) -> Result<Self, ProviderError> {
        // No redirects, as the MCP HTTP client: a 3xx is an error for that
        // request, not the whole conversation re-sent to another origin.
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(300))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ProviderError::Config(e.to_string()))?;
        Ok(Self {
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key: api_key.filter(|k| !k.is_empty()),
            model: model.to_string(),
            http,
            unnamed_calls: Default::default(),
        })
    }

    pub fn from_env() -> Result<Self, ProviderError> {
        let base = std::env::var("OPENAI_BASE_URL")
            .map_err(|_| ProviderError::Config("OPENAI_BASE_URL is not set".into()))?;
        let model = std::env::var("OPENAI_MODEL")
            .map_err(|_| ProviderError::Config("OPENAI_MODEL is not set".into()))?;
        Self::new(&base, std::env::var("OPENAI_API_KEY").ok(), &model)
    }

    /// The request body (public for tests).
    pub fn body(&self, req: &ChatRequest<'_>) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": req.messages,
        });
        if !req.tools.is_empty() {
            body["tools"] = Value::Array(
                req.tools
                    .iter()
                    .map(|t| {
                        json!({"type": "function", "function": {
                            "name": t.local_name,
                            "description": t.description,
                            "parameters": t.input_schema,
                        }})
                    })
                    .collect(),
            );
            body["tool_choice"] = json!("auto");
        }
        body
    }
}

impl ChatProvider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn complete<'a>(
        &'a self,
        req: ChatRequest<'a>,
    ) -> BoxFut<'a, Result<ChatMessage, ProviderError>> {
        Box::pin(async move {
            let url = format!("{}/chat/completions", self.base_url);
            let mut rb = self.http.post(&url).json(&self.body(&req));
            if let Some(k) = &self.api_key {
                rb = rb.bearer_auth(k);
            }
            let resp = rb
                .send()
                .await
                .map_err(|e| ProviderError::Http(with_causes(&e)))?;
            let status = resp.status();
            let text = read_body(resp).await?;
            if !status.is_success() {
                // By chars: a byte cut could split a UTF-8 sequence (and panic).
                let body = wasm_mcp_protocol::text::head_chars(&text, MAX_ERROR_BODY_CHARS).into();
                return Err(ProviderError::Status {
                    status: status.as_u16(),
                    body,
                });
            }
            // Counted before parsing, as MCP frames are: 16 MB of tiny tool
            // calls parsed to hundreds of MB per reply (a helper's find).
            let values = wasm_mcp_protocol::json_values(text.as_bytes());
            if values > MAX_REPLY_JSON_VALUES {
                return Err(ProviderError::Malformed(format!(
                    "the reply holds more than {MAX_REPLY_JSON_VALUES} JSON values ({values}); it was not read"
                )));
            }
            let text = lone_surrogates_replaced(text);
            let v: Value =
                serde_json::from_str(&text).map_err(|e| ProviderError::Malformed(e.to_string()))?;
            let msg = v
                .pointer("/choices/0/message")
                .cloned()
                .ok_or_else(|| ProviderError::Malformed("no choices[0].message".into()))?;
            let mut m: ChatMessage =
                serde_json::from_value(msg).map_err(|e| ProviderError::Malformed(e.to_string()))?;
            if m.role.is_empty() {
                m.role = "assistant".into();
            }
            // Some servers send `tool_calls: []`; normalise.
            if m.tool_calls.as_ref().is_some_and(|c| c.is_empty()) {
                m.tool_calls = None;
            }
            name_calls(&mut m, &self.unnamed_calls);
            Ok(m)
        })
    }
}

/// Gives each tool call the provider sent without an id one of its own
/// (`call_wasm_agent_<n>`, unique in the run): a result is matched to its
/// call by id, and a reply of calls with no ids failed the run.
/// `text` (a JSON reply) with each `\\u` escape of a lone UTF-16
/// surrogate replaced by `\\ufffd` (the same length), as a lossy UTF-8
/// decoder does: such an escape is valid JSON text that `serde_json` (and
/// Rust strings) cannot hold, and one in a reply failed the whole round
/// (a model's text cut inside an emoji's pair).
fn lone_surrogates_replaced(text: String) -> String {
    let mut bytes = text.into_bytes();
    let (mut i, mut in_string) = (0, false);
    while i < bytes.len() {
        match (in_string, bytes[i]) {
            (_, b'"') => in_string = !in_string,
            (true, b'\\') if bytes.get(i + 1) == Some(&b'u') => {
                let unit = |at: usize| {
                    let hex = std::str::from_utf8(bytes.get(at + 2..at + 6)?).ok()?;
                    u16::from_str_radix(hex, 16).ok()
                };
                let paired = |at: usize| {
                    bytes.get(at..at + 2) == Some(b"\\u".as_slice())
                        && unit(at).is_some_and(|u| (0xDC00..0xE000).contains(&u))
                };
                match unit(i) {
                    Some(0xD800..=0xDBFF) if paired(i + 6) => i += 11,
                    Some(0xD800..=0xDFFF) => {
                        bytes[i + 2..i + 6].copy_from_slice(b"fffd");
                        i += 5;
                    }
                    Some(_) => i += 5,
                    // Not an escape JSON has: the parse refuses the text.
                    None => i += 1,
                }
            }
            (true, b'\\') => i += 1,
            _ => {}
        }
        i += 1;
    }
    // Only ASCII hex digits were written over ASCII hex digits.
    String::from_utf8(bytes).expect("ASCII replaced by ASCII")
}

fn name_calls(m: &mut ChatMessage, counter: &std::sync::atomic::AtomicU64) {
    for call in m.tool_calls.iter_mut().flatten() {
        if call.id.is_empty() {
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            call.id = format!("call_wasm_agent_{n}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::lone_surrogates_replaced;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let cases = [
            (r#"{"a":"x\ud83d"}"#, "x\u{fffd}"),
            (r#"{"a":"\ude00y"}"#, "\u{fffd}y"),
            (r#"{"a":"\ud83d\ude00"}"#, "\u{1f600}"),
            (r#"{"a":"\ud83d\ud83d\ude00"}"#, "\u{fffd}\u{1f600}"),
            (r#"{"a":"\\ud83d"}"#, "\\ud83d"),
            (r#"{"a":"\"\ud800"}"#, "\"\u{fffd}"),
            (r#"{"a":"\u00e9\ud800"}"#, "\u{e9}\u{fffd}"),
            (r#"{"a":"\ud83d\u0041"}"#, "\u{fffd}A"),
            (r#"{"a":"\ud83"}"#, "invalid"),
        ];
        for (reply, expected) in cases {
            let fixed = lone_surrogates_replaced(reply.to_string());
            match serde_json::from_str::<serde_json::Value>(&fixed) {
                Ok(v) => assert_eq!(v["a"], expected, "{reply} -> {fixed}"),
                Err(_) => assert_eq!(expected, "invalid", "{reply} -> {fixed}"),
            }
        }
        // Keys are strings too.
        let text = r#"{"k\ud800":1}"#.to_string();
        assert_eq!(lone_surrogates_replaced(text), r#"{"k\ufffd":1}"#);
    }
}
