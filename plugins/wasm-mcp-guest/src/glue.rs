//! wasm32 only: conversions between the SDK's types and the wit-bindgen
//! bindings, used by `export_tools!`.

use crate::bindings::exports::wasm_mcp::tool::tool::{Annotations, ErrorCode};
pub use crate::bindings::exports::wasm_mcp::tool::tool::{Guest, ToolDescriptor, ToolError};
use crate::{ErrorCode as Code, Tool};

pub fn list_tools(tools: &[Tool]) -> Vec<ToolDescriptor> {
    crate::descriptors(tools)
        .into_iter()
        .map(|d| ToolDescriptor {
            name: d.name,
            title: d.title,
            description: d.description,
            input_schema: d.input_schema.to_string(),
            output_schema: d.output_schema.map(|s| s.to_string()),
            annotations: Annotations {
                read_only: d.annotations.read_only,
                destructive: d.annotations.destructive,
                idempotent: d.annotations.idempotent,
                open_world: d.annotations.open_world,
            },
        })
        .collect()
}

pub fn call(tools: &[Tool], name: &str, args_json: &str) -> Result<String, ToolError> {
    crate::call(tools, name, args_json).map_err(|e| ToolError {
        code: code(e.code),
        message: e.message,
    })
}

fn code(c: Code) -> ErrorCode {
    match c {
        Code::InvalidArguments => ErrorCode::InvalidArguments,
        Code::UnknownTool => ErrorCode::UnknownTool,
        Code::NotFound => ErrorCode::NotFound,
        Code::PermissionDenied => ErrorCode::PermissionDenied,
        Code::TooLarge => ErrorCode::TooLarge,
        Code::Io => ErrorCode::Io,
        Code::Internal => ErrorCode::Internal,
    }
}
