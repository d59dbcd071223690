//! TEST-ONLY plugin: the fixture tools of the official MCP conformance
//! suite (npm `@modelcontextprotocol/conformance`) that a tools-only server
//! whose tools return JSON can provide (`scripts/conformance.sh`):
//! `test_simple_text` (a text result), `test_error_handling` (a tool error,
//! `isError: true` with a message) and `json_schema_2020_12_tool` (an input
//! schema with `$schema`, `$defs`, `$ref` and `additionalProperties`, which
//! must reach `tools/list` unchanged). And `routed_by_header`, whose
//! `region` argument is mirrored into an `Mcp-Param-Region` header by
//! 2026-07-28 HTTP clients (`x-mcp-header`), which the server checks.

use serde_json::Value;
use wasm_mcp_guest::{Tool, ToolError};

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
    (
        "routed_by_header",
        "Echoes its arguments; region is mirrored in the Mcp-Param-Region header",
        r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"}},"required":["region"]}"#,
    ),
];

/// The suite's fixtures on the guest SDK: [`Tool::raw`], because the
/// 2020-12 schema must reach `tools/list` verbatim (`$schema`, `$defs`,
/// `$ref`) and the tools publish no output schema.
pub fn tools() -> Vec<Tool> {
    TOOLS
        .iter()
        .map(|&(name, description, schema)| {
            let schema: Value = serde_json::from_str(schema).expect("fixture schema is JSON");
            Tool::raw(name, schema, move |args| run(name, args))
                .description(description)
                .read_only()
                .idempotent()
        })
        .collect()
}

fn run(name: &str, args_json: &str) -> Result<String, ToolError> {
    match name {
        "test_simple_text" => Ok(serde_json::json!({ "text": SIMPLE_TEXT }).to_string()),
        "test_error_handling" => Err(ToolError::internal(ERROR_MESSAGE)),
        _ => Ok(format!("{{\"received\":{args_json}}}")),
    }
}

wasm_mcp_guest::export_tools!(tools());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_2020_12_schema_is_published_verbatim() {
        let d = wasm_mcp_guest::descriptors(&tools());
        let names: Vec<&str> = d.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "test_simple_text",
                "test_error_handling",
                "json_schema_2020_12_tool",
                "routed_by_header"
            ]
        );
        let verbatim: Value = serde_json::from_str(SCHEMA_2020_12).unwrap();
        assert_eq!(d[2].input_schema, verbatim);
        assert_eq!(d[2].description, "Tool with JSON Schema 2020-12 features");
        assert!(d
            .iter()
            .all(|d| d.output_schema.is_none() && d.annotations.read_only));
    }

    #[test]
    fn the_fixtures_answer_as_the_suite_expects() {
        let t = tools();
        let text: Value =
            serde_json::from_str(&wasm_mcp_guest::call(&t, "test_simple_text", "{}").unwrap())
                .unwrap();
        assert_eq!(text["text"], SIMPLE_TEXT);
        let e = wasm_mcp_guest::call(&t, "test_error_handling", "{}").unwrap_err();
        assert_eq!(e.message, ERROR_MESSAGE);
        let args = r#"{"name":"n","address":{"city":"c"}}"#;
        assert_eq!(
            wasm_mcp_guest::call(&t, "json_schema_2020_12_tool", args).unwrap(),
            format!("{{\"received\":{args}}}")
        );
    }
}
