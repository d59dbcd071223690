//! The typed tool error: the WIT `tool-error` with its `error-code`s.

use std::fmt;

/// `error-code` of `wit/tool.wit`. The host reports every code to the model
/// the same way (`isError: true`, the message as text); the code is for logs
/// and for clients that tell failures apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// Arguments were well-formed JSON but not acceptable.
    InvalidArguments,
    /// `call` was asked for a tool this plugin does not have.
    UnknownTool,
    /// A path or resource does not exist.
    NotFound,
    /// The sandbox or the tool's own rules refused the operation.
    PermissionDenied,
    /// An input or output exceeded a limit of the tool.
    TooLarge,
    /// Any other I/O failure.
    Io,
    /// A bug in the tool.
    Internal,
}

/// A failed call: `code` plus a message shown to the model (keep it short
/// and actionable; the host cuts it at 64 KiB).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArguments, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::PermissionDenied, message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::TooLarge, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// Maps an I/O error on `path` (as the model named it): not-found and
    /// permission errors (including the sandbox's ENOTCAPABLE) keep their
    /// code, the rest is `io`.
    pub fn io(path: &str, e: &std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let code = match e.kind() {
            K::NotFound => ErrorCode::NotFound,
            K::PermissionDenied => ErrorCode::PermissionDenied,
            // wasi-libc's ENOTCAPABLE (76): the sandbox refused the path.
            _ if cfg!(target_os = "wasi") && e.raw_os_error() == Some(76) => {
                ErrorCode::PermissionDenied
            }
            _ => ErrorCode::Io,
        };
        let what = match (code, e.kind()) {
            (ErrorCode::NotFound, _) => "not found",
            (ErrorCode::PermissionDenied, _) => "permission denied",
            // The host opens nothing else (a FIFO would block the call).
            (_, K::Unsupported) => "not a regular file or directory",
            _ => "I/O error",
        };
        ToolError::new(code, format!("{what}: {path}: {e}"))
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}
