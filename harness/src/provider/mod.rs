//! Chat providers: OpenAI-compatible chat completions, and an offline scripted one.

pub mod openai;
pub mod scripted;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::tools::tool::{NameResolver, Tool};
use crate::BoxFut;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text, as the OpenAI API sends it (some compatible servers send
    /// the arguments as a JSON object: read as its text).
    #[serde(default, deserialize_with = "json_text")]
    pub arguments: String,
}

/// A string as it is; any other JSON value as its JSON text (`null`: none).
fn json_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => s,
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolCall {
    /// Empty when the provider sent none (given one on reading: see
    /// `openai::name_calls`).
    #[serde(default)]
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_type() -> String {
    "function".into()
}

/// An OpenAI chat message (the subset the loop uses).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ChatMessage {
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// Bytes this message adds to the conversation as every later request
    /// sends it: its JSON (a control character is 6 bytes there, `\u0001`;
    /// counted as text, a bound of 32 MiB let request bodies and the trace
    /// reach 200 MB; a helper's find).
    pub fn wire_bytes(&self) -> usize {
        let mut count = wasm_mcp_protocol::ByteCounter::default();
        let _ = serde_json::to_writer(&mut count, self);
        count.0
    }

    pub fn system(text: &str) -> Self {
        Self {
            role: "system".into(),
            content: Some(text.into()),
            ..Default::default()
        }
    }
    pub fn user(text: &str) -> Self {
        Self {
            role: "user".into(),
            content: Some(text.into()),
            ..Default::default()
        }
    }
    pub fn tool(call_id: &str, text: &str) -> Self {
        Self {
            role: "tool".into(),
            content: Some(text.into()),
            tool_call_id: Some(call_id.into()),
            ..Default::default()
        }
    }
}

/// One model round's input. `names` resolves remote tool names in the round's
/// frozen snapshot (never sent over the wire; the scripted provider uses it).
pub struct ChatRequest<'a> {
    pub messages: &'a [ChatMessage],
    pub tools: &'a [Arc<Tool>],
    pub names: &'a dyn NameResolver,
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("provider HTTP error: {0}")]
    Http(String),
    #[error("provider returned status {status}: {body}")]
    Status { status: u16, body: String },
    #[error("provider response malformed: {0}")]
    Malformed(String),
    #[error("scripted run failed at step {step}: {message}")]
    Script { step: usize, message: String },
    #[error("provider config: {0}")]
    Config(String),
}

pub trait ChatProvider: Send + Sync {
    fn name(&self) -> &str;
    /// Returns the assistant message (content and/or tool_calls).
    fn complete<'a>(
        &'a self,
        req: ChatRequest<'a>,
    ) -> BoxFut<'a, Result<ChatMessage, ProviderError>>;
}

#[cfg(test)]
mod wire_tests {
    use super::ChatMessage;

    /// A message is counted as it is sent: a control character is six
    /// bytes of JSON, not one.
    #[test]
    fn a_message_is_counted_as_sent() {
        let m = ChatMessage::user(&"\u{1}".repeat(1000));
        assert!(m.wire_bytes() >= 6000, "{}", m.wire_bytes());
        assert_eq!(m.wire_bytes(), serde_json::to_vec(&m).unwrap().len());
    }
}
