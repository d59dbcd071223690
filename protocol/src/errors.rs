//! The error kinds a tool call can end in, as reported in an error result's
//! `_meta[ERROR_KIND_META]`, and the other `_meta` keys client and server share.

/// The `_meta` key of an error result that names its [`ErrorKind`].
pub const ERROR_KIND_META: &str = "wasm-mcp/errorKind";

/// The `_meta` key of a `tools/call` request under which a client puts its
/// own id for the call (the harness's trace call id); the server records it
/// in its audit log, so both name the same call.
pub const CALL_ID_META: &str = "wasm-mcp/callId";

/// Why a tool call failed, as the server reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The arguments do not match the tool's `inputSchema`.
    InvalidArguments,
    /// The tool returned its own error.
    ToolError,
    /// The call ran past its deadline.
    Timeout,
    /// The instance tried to grow memory past the limit.
    MemoryLimit,
    /// The result was larger than the output cap.
    OutputTooLarge,
    /// Any other trap (panic, unreachable, stack overflow, ...).
    Trap,
    /// The result is not a JSON object or breaks the `outputSchema`.
    ContractViolation,
    /// The host could not set up the call.
    HostError,
    /// No concurrency slot came free within the wait budget.
    Busy,
    /// The call ran past a disk quota (bytes written, files created, file size).
    QuotaExceeded,
    /// The call tried to change the worktree where its grant is read-only.
    PermissionDenied,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 11] = [
        ErrorKind::InvalidArguments,
        ErrorKind::ToolError,
        ErrorKind::Timeout,
        ErrorKind::MemoryLimit,
        ErrorKind::OutputTooLarge,
        ErrorKind::Trap,
        ErrorKind::ContractViolation,
        ErrorKind::HostError,
        ErrorKind::Busy,
        ErrorKind::QuotaExceeded,
        ErrorKind::PermissionDenied,
    ];

    /// The wire name, e.g. `"memory_limit"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArguments => "invalid_arguments",
            ErrorKind::ToolError => "tool_error",
            ErrorKind::Timeout => "timeout",
            ErrorKind::MemoryLimit => "memory_limit",
            ErrorKind::OutputTooLarge => "output_too_large",
            ErrorKind::Trap => "trap",
            ErrorKind::ContractViolation => "contract_violation",
            ErrorKind::HostError => "host_error",
            ErrorKind::Busy => "busy",
            ErrorKind::QuotaExceeded => "quota_exceeded",
            ErrorKind::PermissionDenied => "permission_denied",
        }
    }

    /// The kind with this wire name, if any.
    pub fn parse(name: &str) -> Option<ErrorKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip() {
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(ErrorKind::MemoryLimit.as_str(), "memory_limit");
        assert_eq!(ErrorKind::parse("nope"), None);
    }
}
