//! Plain-Rust mirror of the WIT types, so the logic does not depend on the
//! generated bindings (which only exist on wasm32).

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    InvalidArguments,
    UnknownTool,
    NotFound,
    PermissionDenied,
    TooLarge,
    Io,
    Internal,
}

#[derive(Debug, PartialEq, Eq)]
pub struct ToolErr {
    pub code: Code,
    pub message: String,
}

impl ToolErr {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ToolErr {
            code,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArguments, message)
    }
    /// Maps an I/O error on `path` (the normalized, worktree-relative path).
    pub fn io(path: &str, e: &std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let code = match e.kind() {
            K::NotFound => Code::NotFound,
            K::PermissionDenied => Code::PermissionDenied,
            // wasi-libc's ENOTCAPABLE (76): the sandbox refused the path.
            _ if cfg!(target_os = "wasi") && e.raw_os_error() == Some(76) => Code::PermissionDenied,
            _ => Code::Io,
        };
        let what = match code {
            Code::NotFound => "not found",
            Code::PermissionDenied => "permission denied",
            _ => "I/O error",
        };
        ToolErr::new(code, format!("{what}: {path}: {e}"))
    }
}

impl fmt::Display for ToolErr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

/// One tool's descriptor (see `tool-descriptor` in wit/tool.wit).
pub struct Desc {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input_schema: serde_json::Value,
    pub output_schema: serde_json::Value,
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
}
