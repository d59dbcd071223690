//! The agent loop: rounds of (safe point → frozen catalog → model → tool calls).

use serde_json::json;

use crate::provider::{ChatMessage, ChatProvider, ChatRequest, ProviderError};
use crate::run::interrupt::{Stop, CANCEL_GRACE};
use crate::run::session::{SessionError, ToolSession};
use crate::run::trace::Trace;

pub const SYSTEM_PROMPT: &str = "You are a coding agent working in a sandboxed git worktree. \
Use the provided tools to inspect and change files; paths are relative to the worktree root. \
Tool results starting with `error:` are failures. Finish with a short final answer and no tool calls.";

/// Tool calls run from one model reply. The rest are dropped from the
/// conversation (the assistant message keeps the calls that ran, so each has
/// its result) and the model is told so: a reply cannot make the harness run
/// and hold thousands of results (10,000 reads of a 64 KB file held 2.7 GB).
pub const MAX_TOOL_CALLS_PER_REPLY: usize = 32;

/// Most bytes the conversation may hold, as JSON (every message's content,
/// tool calls and results, as each request sends them). Each request sends the whole conversation
/// again and the trace keeps every reply, so replies each under the
/// provider's 16 MiB cap grew a run by ~58 MB a round (2.3 GB at 40 rounds,
/// 585 MB request bodies; a helper's find). Past it the run ends, as failed,
/// and its work is committed.
pub const MAX_CONVERSATION_BYTES: usize = 32 << 20;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("no final answer after {0} rounds")]
    MaxRounds(usize),
    #[error("interrupted")]
    Interrupted,
    #[error("the conversation reached {bytes} bytes, past the harness's bound of {limit} (replies or tool results too large to keep sending)")]
    ConversationTooLarge { bytes: usize, limit: usize },
}

/// The conversation, with its size kept within [`MAX_CONVERSATION_BYTES`].
struct Conversation {
    messages: Vec<ChatMessage>,
    bytes: usize,
}

impl Conversation {
    fn new(prompt: &str) -> Self {
        let messages = vec![
            ChatMessage::system(SYSTEM_PROMPT),
            ChatMessage::user(prompt),
        ];
        let bytes = messages.iter().map(ChatMessage::wire_bytes).sum();
        Conversation { messages, bytes }
    }

    /// Adds `m`, or refuses it when the conversation would pass its bound.
    fn push(&mut self, m: ChatMessage) -> Result<(), AgentError> {
        let bytes = self.bytes.saturating_add(m.wire_bytes());
        if bytes > MAX_CONVERSATION_BYTES {
            return Err(AgentError::ConversationTooLarge {
                bytes,
                limit: MAX_CONVERSATION_BYTES,
            });
        }
        self.bytes = bytes;
        self.messages.push(m);
        Ok(())
    }
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
    run_loop_until(session, provider, prompt, max_rounds, trace, &Stop::never()).await
}

/// [`run_loop`] that ends with [`AgentError::Interrupted`] once `stop` fires:
/// no new round starts, and calls in flight are cancelled.
pub async fn run_loop_until(
    session: &mut ToolSession,
    provider: &dyn ChatProvider,
    prompt: &str,
    max_rounds: usize,
    trace: &Trace,
    stop: &Stop,
) -> Result<LoopResult, AgentError> {
    let mut conversation = Conversation::new(prompt);
    let mut res = LoopResult {
        final_message: String::new(),
        rounds: 0,
        tool_calls: 0,
        tool_errors: 0,
        contract_violations: 0,
        unknown_state_calls: 0,
    };
    for round in 1..=max_rounds {
        if stop.is_set() {
            return Err(interrupted(trace));
        }
        // Safe point: the only place the catalog / connections change.
        tokio::select! {
            r = session.safe_point() => r?,
            _ = stop.fired() => return Err(interrupted(trace)),
        }
        let snapshot = session.snapshot();
        let pipeline = session.pipeline();
        let tools = pipeline.tools();
        res.rounds = round;
        trace.record(
            "round_start",
            json!({"round": round, "catalog_version": snapshot.version, "tools": tools.len()}),
        );
        let reply = tokio::select! {
            r = provider.complete(ChatRequest {
                messages: &conversation.messages,
                tools: &tools,
                names: &*snapshot,
            }) => r,
            _ = stop.fired() => return Err(interrupted(trace)),
        };
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
        let mut calls = reply.tool_calls.clone().unwrap_or_default();
        let dropped = calls.split_off(calls.len().min(MAX_TOOL_CALLS_PER_REPLY));
        let answer = ChatMessage {
            role: "assistant".into(),
            tool_calls: (!calls.is_empty()).then(|| calls.clone()),
            ..reply.clone()
        };
        if let Err(e) = conversation.push(answer) {
            return Err(too_large(trace, round, e));
        }
        // The calls that run, and how many did not: the trace keeps every
        // event for the whole run, and replies of 360,000 calls each took
        // it past 2.9 GB in four rounds (a helper's find).
        trace.record(
            "model_reply",
            json!({"round": round, "content": reply.content, "tool_calls": calls,
                   "tool_calls_dropped": dropped.len()}),
        );
        if calls.is_empty() {
            res.final_message = reply.content.unwrap_or_default();
            trace.record(
                "final",
                json!({"round": round, "message": res.final_message}),
            );
            return Ok(res);
        }
        for call in calls {
            if stop.is_set() {
                return Err(interrupted(trace));
            }
            trace.record(
                "tool_call_start",
                json!({"round": round, "call_id": call.id, "tool": call.function.name,
                       "origin": pipeline.get(&call.function.name).and_then(|s| s.tool.binding.clone()),
                       "arguments": call.function.arguments}),
            );
            let started = std::time::Instant::now();
            let invoke = crate::mcp::adapter::TRACE_CALL_ID.scope(
                call.id.clone(),
                pipeline.invoke(&call.function.name, &call.function.arguments),
            );
            tokio::pin!(invoke);
            let outcome = tokio::select! {
                o = &mut invoke => o,
                _ = stop.fired() => {
                    session.cancel_in_flight("interrupted by the user");
                    trace.record("call_cancelled", json!({"round": round, "call_id": call.id,
                        "reason": "interrupted by the user"}));
                    match tokio::time::timeout(CANCEL_GRACE, invoke).await {
                        Ok(o) => o,
                        Err(_) => return Err(interrupted(trace)),
                    }
                }
            };
            let duration_ms = started.elapsed().as_millis() as u64;
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
                    "duration_ms": duration_ms,
                }),
            );
            if let Err(e) = conversation.push(ChatMessage::tool(&call.id, &outcome.model_text)) {
                return Err(too_large(trace, round, e));
            }
        }
        if !dropped.is_empty() {
            let asked = MAX_TOOL_CALLS_PER_REPLY + dropped.len();
            trace.record(
                "tool_calls_dropped",
                json!({"round": round, "asked": asked, "run": MAX_TOOL_CALLS_PER_REPLY}),
            );
            let note = ChatMessage::user(&format!(
                "Note from the harness: your last reply asked for {asked} tool calls; only the \
                 first {MAX_TOOL_CALLS_PER_REPLY} ran (their results are above) and the rest were \
                 dropped. Ask again for any you still need, at most \
                 {MAX_TOOL_CALLS_PER_REPLY} per reply."
            ));
            if let Err(e) = conversation.push(note) {
                return Err(too_large(trace, round, e));
            }
        }
    }
    Err(AgentError::MaxRounds(max_rounds))
}

fn too_large(trace: &Trace, round: usize, e: AgentError) -> AgentError {
    trace.record(
        "conversation_too_large",
        json!({"round": round, "error": e.to_string()}),
    );
    e
}

fn interrupted(trace: &Trace) -> AgentError {
    trace.record("interrupted", json!({}));
    AgentError::Interrupted
}
