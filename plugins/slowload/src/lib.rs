//! TEST-ONLY plugin whose `list-tools` blocks forever in a WASI sleep (a
//! host call, where epoch interruption cannot reach it). The host must
//! refuse it at its load deadline without delaying the other plugins.

/// Never returns: sleeps an hour at a time.
pub fn block_forever() -> ! {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

#[cfg(target_arch = "wasm32")]
mod glue {
    wit_bindgen::generate!({ path: "../../wit", world: "tool-plugin" });

    use exports::wasm_mcp::tool::tool::{ErrorCode, Guest, ToolDescriptor, ToolError};

    struct Plugin;

    impl Guest for Plugin {
        fn list_tools() -> Vec<ToolDescriptor> {
            crate::block_forever()
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
