//! TEST-ONLY plugin whose `list-tools` hands the host 100 MiB: 200 tools,
//! each with a 512 KiB description. Under wasmtime's default hostcall fuel
//! (128 MiB) the host would copy all of it before the catalog cut the
//! descriptions; the host must stop at its tool-list limit and refuse it.

/// Tools declared.
pub const TOOLS: usize = 200;

/// Bytes of each tool's description.
pub const DESCRIPTION_BYTES: usize = 512 << 10;

#[cfg(target_arch = "wasm32")]
mod glue {
    wit_bindgen::generate!({ path: "../../wit", world: "tool-plugin" });

    use exports::wasm_mcp::tool::tool::{Annotations, ErrorCode, Guest, ToolDescriptor, ToolError};

    struct Plugin;

    impl Guest for Plugin {
        fn list_tools() -> Vec<ToolDescriptor> {
            (0..crate::TOOLS)
                .map(|i| ToolDescriptor {
                    name: format!("huge_{i}"),
                    title: None,
                    description: "d".repeat(crate::DESCRIPTION_BYTES),
                    input_schema: r#"{"type":"object"}"#.into(),
                    output_schema: None,
                    annotations: Annotations {
                        read_only: true,
                        destructive: false,
                        idempotent: true,
                        open_world: false,
                    },
                })
                .collect()
        }

        fn call(name: String, _args_json: String) -> Result<String, ToolError> {
            Err(ToolError {
                code: ErrorCode::UnknownTool,
                message: format!("unknown tool `{name}`"),
            })
        }
    }

    export!(Plugin);
}
