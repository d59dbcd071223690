//! Fault classification for MCP requests and the retry rule.

use std::time::Duration;

use rmcp::service::ServiceError;
use serde::Serialize;

use crate::run::policy::ToolPolicy;

/// What we know about a side-effecting call after it returned (or didn't).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Not sent (rejected before the request: bad args, denied, unknown tool).
    NotSent,
    /// The server answered (success or `isError`).
    Completed,
    /// The server answered with a JSON-RPC error: it did not run the tool.
    Rejected,
    /// Timeout or disconnect: the tool may or may not have run.
    Unknown,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum CallFault {
    #[error("request timed out after {0:?}")]
    Timeout(Duration),
    #[error("server connection lost")]
    Disconnected,
    /// The transport failed this request (an HTTP error, a body over the
    /// size limit, a redirect): it may have reached the server.
    #[error("transport error: {0}")]
    Transport(String),
    /// The connection was already down: the request was never sent.
    #[error(
        "server connection is down; the request was not sent (it is reconnected between rounds)"
    )]
    NotConnected,
    #[error("JSON-RPC error {code}: {message}")]
    Rpc { code: i32, message: String },
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The harness cancelled the call (`notifications/cancelled` sent).
    #[error("cancelled: {0}")]
    Cancelled(String),
}

impl CallFault {
    pub fn state(&self) -> CallState {
        match self {
            CallFault::Timeout(_) | CallFault::Disconnected | CallFault::Transport(_) => {
                CallState::Unknown
            }
            CallFault::NotConnected => CallState::NotSent,
            // The server answered but the frame was lost on the way
            // (oversized or unparseable): the call may have taken effect.
            CallFault::Rpc { code, .. } if *code == crate::mcp::frame_guard::FRAME_ERROR_CODE => {
                CallState::Unknown
            }
            CallFault::Rpc { .. } => CallState::Rejected,
            // A malformed answer still means the server answered something.
            CallFault::Protocol(_) => CallState::Unknown,
            // The tool may have run (partly) before the cancellation arrived.
            CallFault::Cancelled(_) => CallState::Unknown,
        }
    }

    pub fn from_service(e: ServiceError, timeout: Duration) -> Self {
        match e {
            ServiceError::Timeout { .. } => CallFault::Timeout(timeout),
            ServiceError::TransportClosed => CallFault::Disconnected,
            ServiceError::TransportSend(e) => CallFault::Transport(transport_error_text(&e)),
            ServiceError::McpError(e) => CallFault::Rpc {
                code: e.code.0,
                message: e.message.to_string(),
            },
            other => CallFault::Protocol(other.to_string()),
        }
    }
}

/// What a transport error says, without rmcp's wrapper (which names the
/// transport's Rust type): the error and each cause it does not already
/// quote, e.g. `Auth required: authorization required: Bearer error=...`.
pub fn transport_error_text(e: &rmcp::transport::DynamicTransportError) -> String {
    let mut text = e.error.to_string();
    let mut cause = e.error.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// Whether a failed call may be re-sent automatically. Only the *policy* can
/// grant this (server annotations are hints), only for tools it marks read-only
/// and idempotent, and only when the outcome is unknown because of a timeout
/// (a disconnect is handled by reconnecting at the next safe point).
pub fn may_retry(policy: &ToolPolicy, fault: &CallFault, attempt: u32) -> bool {
    attempt == 0 && policy.retry_allowed() && matches!(fault, CallFault::Timeout(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::policy::Approval;

    #[test]
    fn states_and_retry_rule() {
        let t = CallFault::Timeout(Duration::from_millis(5));
        assert_eq!(t.state(), CallState::Unknown);
        assert_eq!(CallFault::Disconnected.state(), CallState::Unknown);
        assert_eq!(
            CallFault::Rpc {
                code: -32602,
                message: "x".into()
            }
            .state(),
            CallState::Rejected
        );
        let ro = ToolPolicy {
            approval: Approval::Auto,
            read_only: true,
            idempotent: true,
        };
        let ro_only = ToolPolicy {
            read_only: true,
            ..Default::default()
        };
        assert!(may_retry(&ro, &t, 0));
        assert!(!may_retry(&ro, &t, 1), "one retry at most");
        assert!(!may_retry(&ro_only, &t, 0), "read-only alone is not enough");
        assert!(!may_retry(&ro, &CallFault::Disconnected, 0));
        assert_eq!(CallFault::NotConnected.state(), CallState::NotSent);
        assert!(!may_retry(&ro, &CallFault::NotConnected, 0));
        assert!(matches!(
            CallFault::from_service(ServiceError::TransportClosed, Duration::ZERO),
            CallFault::Disconnected
        ));
    }
}
