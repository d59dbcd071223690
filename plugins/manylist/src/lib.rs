//! TEST-ONLY plugin whose `list-tools` declares [`TOOLS`] tools whose every
//! text is empty: no string bytes at all, so the host's tool-list limit
//! must count records too. Lifted, each is a host `ToolDescriptor` of at
//! least five `String`s (120 bytes): 60 MB of host memory for what costs the
//! guest ~58 MB of its own, over `TOOL_LIST_TRANSFER_BYTES` (48 MiB), so the
//! host must refuse it before it allocates the list.
//!
//! Raw `wit_bindgen` glue, not the guest SDK: the SDK's per-tool cost (a
//! schema value, a handler, a descriptor copy) would run the guest out of
//! memory long before the host's limit is reached.

/// Tools declared.
pub const TOOLS: usize = 500_000;

#[cfg(target_arch = "wasm32")]
mod glue {
    wit_bindgen::generate!({ path: "../../wit", world: "tool-plugin" });

    use exports::wasm_mcp::tool::tool::{Annotations, ErrorCode, Guest, ToolDescriptor, ToolError};

    struct Plugin;

    impl Guest for Plugin {
        fn list_tools() -> Vec<ToolDescriptor> {
            (0..crate::TOOLS)
                .map(|_| ToolDescriptor {
                    name: String::new(),
                    title: None,
                    description: String::new(),
                    input_schema: String::new(),
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
