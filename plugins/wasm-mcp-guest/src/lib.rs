//! Guest SDK for wasm-mcp tool plugins (`wit/tool.wit`, world `tool-plugin`).
//!
//! A tool is an ordinary typed Rust function `fn(Args) -> Result<Out, ToolError>`:
//!
//! ```ignore
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use wasm_mcp_guest::{Tool, ToolError};
//!
//! /// Greets someone. (This doc comment is the tool's description.)
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Greet {
//!     /// Who to greet. (Field doc comments describe the argument.)
//!     name: String,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct Greeting { text: String }
//!
//! fn greet(a: Greet) -> Result<Greeting, ToolError> {
//!     Ok(Greeting { text: format!("hello, {}", a.name) })
//! }
//!
//! fn tools() -> Vec<Tool> {
//!     vec![Tool::new("greet", greet).title("Greet").read_only().idempotent()]
//! }
//!
//! wasm_mcp_guest::export_tools!(tools());
//! ```
//!
//! The argument and result types derive their JSON Schemas (`schemars`,
//! draft 2020-12, subschemas inlined, no `$schema` key); the doc comment of
//! the argument type becomes the tool's description. `export_tools!` writes
//! the wit-bindgen glue (on wasm32 only, so the same crate unit-tests
//! natively with [`call`] and [`descriptors`]).

mod error;
pub mod fs;
mod tool;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod glue;

pub use error::{ErrorCode, ToolError};
pub use tool::{call, descriptors, Annotations, Descriptor, Encoded, Tool};

/// Re-exported so plugin crates derive with the same version the SDK reads.
pub use schemars;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "tool-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_tool_plugin",
        default_bindings_module: "wasm_mcp_guest::bindings",
    });
}

/// Exports the tools returned by `$tools` (an expression evaluated at every
/// `list-tools` and `call`: keep it cheap, e.g. a `vec![Tool::new(..)]`;
/// schemas are only generated for `list-tools`) as the component's
/// `wasm-mcp:tool/tool` interface. Expands to nothing off wasm32.
#[macro_export]
macro_rules! export_tools {
    ($tools:expr) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct WasmMcpPlugin;
            impl $crate::glue::Guest for WasmMcpPlugin {
                fn list_tools() -> ::std::vec::Vec<$crate::glue::ToolDescriptor> {
                    $crate::glue::list_tools(&$tools)
                }
                fn call(
                    name: ::std::string::String,
                    args_json: ::std::string::String,
                ) -> ::std::result::Result<::std::string::String, $crate::glue::ToolError> {
                    $crate::glue::call(&$tools, &name, &args_json)
                }
            }
    $crate::bindings::__export_tool_plugin!(WasmMcpPlugin with_types_in $crate::bindings);
        };
    };
}
