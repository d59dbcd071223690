//! TEST-ONLY plugin: the fixture tools of the official MCP conformance
//! suite (npm `@modelcontextprotocol/conformance`) that a tools-only server
//! whose tools return JSON can provide (`scripts/conformance.sh`):
//! `test_simple_text` (a text result), `test_error_handling` (a tool error,
//! `isError: true` with a message) and `json_schema_2020_12_tool` (an input
//! schema with `$schema`, `$defs`, `$ref` and `additionalProperties`, which
//! must reach `tools/list` unchanged).

pub const SIMPLE_TEXT: &str = "This is a simple text response for testing.";
pub const ERROR_MESSAGE: &str = "This tool intentionally returns an error for testing";

/// The suite's `json_schema_2020_12_tool` input schema, verbatim.
pub const SCHEMA_2020_12: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "type": "object",
      "properties": { "street": { "type": "string" }, "city": { "type": "string" } }
    }
  },
  "properties": {
    "name": { "type": "string" },
    "address": { "$ref": "#/$defs/address" }
  },
  "additionalProperties": false
}"##;

/// (name, description, input schema) of each tool.
pub const TOOLS: &[(&str, &str, &str)] = &[
    (
        "test_simple_text",
        "Returns simple text content",
        r#"{"type":"object"}"#,
    ),
    (
        "test_error_handling",
        "Always returns a tool error",
        r#"{"type":"object"}"#,
    ),
    (
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
        SCHEMA_2020_12,
    ),
];

#[cfg(target_arch = "wasm32")]
mod glue {
    wit_bindgen::generate!({ path: "../../wit", world: "tool-plugin" });

    use exports::wasm_mcp::tool::tool::{Annotations, ErrorCode, Guest, ToolDescriptor, ToolError};

    struct Plugin;

    impl Guest for Plugin {
        fn list_tools() -> Vec<ToolDescriptor> {
            crate::TOOLS
                .iter()
                .map(|(name, description, schema)| ToolDescriptor {
                    name: name.to_string(),
                    title: None,
                    description: description.to_string(),
                    input_schema: schema.to_string(),
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

        fn call(name: String, args_json: String) -> Result<String, ToolError> {
            match name.as_str() {
                "test_simple_text" => Ok(format!("{{\"text\":\"{}\"}}", crate::SIMPLE_TEXT)),
                "test_error_handling" => Err(ToolError {
                    code: ErrorCode::Internal,
                    message: crate::ERROR_MESSAGE.into(),
                }),
                "json_schema_2020_12_tool" => Ok(format!("{{\"received\":{args_json}}}")),
                _ => Err(ToolError {
                    code: ErrorCode::UnknownTool,
                    message: format!("unknown tool `{name}`"),
                }),
            }
        }
    }

    export!(Plugin);
}
