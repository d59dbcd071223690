//! The agent loop: rounds of (safe point → frozen catalog → model → tool calls).

use serde_json::json;

use crate::provider::{ChatMessage, ChatProvider, ChatRequest, ProviderError};
use crate::run::session::{SessionError, ToolSession};
use crate::run::trace::Trace;

pub const SYSTEM_PROMPT: &str = "You are a coding agent working in a sandboxed git worktree. \
Use the provided tools to inspect and change files; paths are relative to the worktree root. \
Tool results starting with `error:` are failures. Finish with a short final answer and no tool calls.";

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("no final answer after {0} rounds")]
    MaxRounds(usize),
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct LoopResult {
    pub final_message: String,
    pub rounds: usize,
    pub tool_calls: usize,
    pub tool_errors: usize,
    pub contract_violations: usize,
    pub unknown_state_calls: usize,
}

pub async fn run_loop(
    session: &mut ToolSession,
    provider: &dyn ChatProvider,
    prompt: &str,
    max_rounds: usize,
    trace: &Trace,
) -> Result<LoopResult, AgentError> {
    let mut messages = vec![
        ChatMessage::system(SYSTEM_PROMPT),
        ChatMessage::user(prompt),
    ];
    let mut res = LoopResult {
        final_message: String::new(),
        rounds: 0,
        tool_calls: 0,
        tool_errors: 0,
        contract_violations: 0,
        unknown_state_calls: 0,
    };
    for round in 1..=max_rounds {
        // Safe point: the only place the catalog / connections change.
        session.safe_point().await?;
        let snapshot = session.snapshot();
        let registry = session.registry();
        let tools = registry.tools();
        res.rounds = round;
        trace.record(
            "round_start",
            json!({"round": round, "catalog_version": snapshot.version, "tools": tools.len()}),
        );
        let reply = provider
            .complete(ChatRequest {
                messages: &messages,
                tools: &tools,
                names: &*snapshot,
            })
            .await;
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                trace.record(
                    "provider_error",
                    json!({"round": round, "error": e.to_string()}),
                );
                return Err(e.into());
            }
        };
        trace.record(
            "model_reply",
            json!({"round": round, "content": reply.content, "tool_calls": reply.tool_calls}),
        );
        let calls = reply.tool_calls.clone().unwrap_or_default();
        messages.push(ChatMessage {
            role: "assistant".into(),
            ..reply.clone()
        });
        if calls.is_empty() {
            res.final_message = reply.content.unwrap_or_default();
            trace.record(
                "final",
                json!({"round": round, "message": res.final_message}),
            );
            return Ok(res);
        }
        for call in calls {
            let outcome = registry
                .invoke(&call.function.name, &call.function.arguments)
                .await;
            res.tool_calls += 1;
            if outcome.is_error() {
                res.tool_errors += 1;
            }
            if outcome.state() == crate::tools::faults::CallState::Unknown {
                res.unknown_state_calls += 1;
            }
            if let Some(v) = outcome.contract_violation() {
                res.contract_violations += 1;
                trace.record(
                    "contract_violation",
                    json!({"round": round, "tool": outcome.local_name, "origin": outcome.origin, "violation": v}),
                );
            }
            trace.record(
                "tool_call",
                json!({
                    "round": round,
                    "catalog_version": snapshot.version,
                    "call_id": call.id,
                    "tool": outcome.local_name,
                    "origin": outcome.origin,
                    "arguments": call.function.arguments,
                    "stages": outcome.stages,
                    "state": outcome.state(),
                    "error": outcome.error(),
                    "server_error_kind": outcome.server_error_kind().map(|k| k.as_str()),
                    "fault": outcome.fault().map(ToString::to_string),
                    "attempts": outcome.attempts,
                    "artifacts": outcome.artifacts,
                    "result": outcome.model_text,
                }),
            );
            messages.push(ChatMessage::tool(&call.id, &outcome.model_text));
        }
    }
    Err(AgentError::MaxRounds(max_rounds))
}
