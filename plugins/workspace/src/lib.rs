//! The product's worktree file tools, as a WASI 0.2 tool plugin
//! (`wit/tool.wit`, world `tool-plugin`).
//!
//! All logic is plain Rust over a `root` directory so it can be unit-tested
//! natively (`cargo test`); only the wit-bindgen glue at the bottom is
//! wasm-only, and there `root` is `/`, where the host preopens the worktree.

pub mod api;
pub mod paths;
pub mod tools;

#[cfg(target_arch = "wasm32")]
mod glue {
    use crate::api::{Code, ToolErr};

    wit_bindgen::generate!({ path: "../../wit", world: "tool-plugin" });

    use exports::wasm_mcp::tool::tool::{Annotations, ErrorCode, Guest, ToolDescriptor, ToolError};

    struct Plugin;

    impl Guest for Plugin {
        fn list_tools() -> Vec<ToolDescriptor> {
            crate::tools::descriptors()
                .into_iter()
                .map(|d| ToolDescriptor {
                    name: d.name.into(),
                    title: Some(d.title.into()),
                    description: d.description.into(),
                    input_schema: d.input_schema.to_string(),
                    output_schema: Some(d.output_schema.to_string()),
                    annotations: Annotations {
                        read_only: d.read_only,
                        destructive: d.destructive,
                        idempotent: d.idempotent,
                        open_world: false,
                    },
                })
                .collect()
        }

        fn call(name: String, args_json: String) -> Result<String, ToolError> {
            crate::tools::call(std::path::Path::new("/"), &name, &args_json).map_err(to_wit)
        }
    }

    fn to_wit(e: ToolErr) -> ToolError {
        let code = match e.code {
            Code::InvalidArguments => ErrorCode::InvalidArguments,
            Code::UnknownTool => ErrorCode::UnknownTool,
            Code::NotFound => ErrorCode::NotFound,
            Code::PermissionDenied => ErrorCode::PermissionDenied,
            Code::TooLarge => ErrorCode::TooLarge,
            Code::Io => ErrorCode::Io,
            Code::Internal => ErrorCode::Internal,
        };
        ToolError {
            code,
            message: e.message,
        }
    }

    export!(Plugin);
}
