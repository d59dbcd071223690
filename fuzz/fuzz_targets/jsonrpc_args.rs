//! Fuzz the server's request path without wasmtime: bytes as a JSON-RPC
//! frame (rmcp's own message types), `tools/call` arguments validated against
//! the real workspace tool schemas, bytes as a tool result checked against
//! the output schemas, bytes as a pagination cursor and as a schema regex. Nothing may panic,
//! and the accept/reject decisions must be consistent.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use serde_json::Value;
use wasm_mcp_protocol::{check_result, compile_schema, decode_cursor, encode_cursor, parse_object_schema, schema_regex, validate, SchemaUse};

struct Tool {
    name: String,
    input: jsonschema::Validator,
    output: jsonschema::Validator,
}

fn tools() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let defs: Vec<Value> = serde_json::from_str(include_str!("../workspace-tools.json")).unwrap();
        defs.iter()
            .map(|t| {
                let schema = |k: &str, schema_use: SchemaUse| {
                    let obj = parse_object_schema(&t[k].to_string(), k).unwrap();
                    compile_schema(&obj, k, schema_use).unwrap()
                };
                Tool {
                    name: t["name"].as_str().unwrap().to_string(),
                    input: schema("inputSchema", SchemaUse::Arguments),
                    output: schema("outputSchema", SchemaUse::Results),
                }
            })
            .collect()
    })
}

fn check_args(name: &str, args: &Value) {
    if let Some(tool) = tools().iter().find(|t| t.name == name) {
        let verdict = validate(&tool.input, args);
        // The same input always gets the same verdict.
        assert_eq!(verdict.is_ok(), tool.input.is_valid(args));
    }
}

fuzz_target!(|data: &[u8]| {
    // 1. A whole frame, as the transport would decode it.
    if let Ok(msg) = serde_json::from_slice::<ClientJsonRpcMessage>(data) {
        if let JsonRpcMessage::Request(req) = msg {
            if let ClientRequest::CallToolRequest(call) = req.request {
                let args = Value::Object(call.params.arguments.unwrap_or_default());
                check_args(&call.params.name, &args);
            }
        }
    }
    // 2. Bare arguments against every tool's input schema.
    if let Ok(v) = serde_json::from_slice::<Value>(data) {
        for t in tools() {
            check_args(&t.name, &v);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        // 3. As a tool's result text: accepted only as a valid object.
        for t in tools() {
            if let Ok(v) = check_result(text, Some(&t.output)) {
                assert!(v.is_object() && t.output.is_valid(&v));
            }
        }
        // 4. As a cursor: whatever decodes re-encodes to an equivalent cursor.
        if let Some((version, offset)) = decode_cursor(text) {
            assert_eq!(decode_cursor(&encode_cursor(version, offset)), Some((version, offset)));
        }
        // 5. As a schema regex (short ones: weighing builds automata, ~ms,
        // and would take the run's time from the steps above): weighing
        // never panics, a weight under the limit is the same as with no
        // limit, and a heavier one is refused.
        // The `regex` format's check takes any length (it bounds it).
        let _ = schema_regex::is_regex_format(text);
        let limit = schema_regex::MAX_PATTERN_WEIGHT;
        if text.len() > 256 {
            return;
        }
        match schema_regex::weigh(text, limit) {
            Ok(w) => assert_eq!(schema_regex::weigh(text, u64::MAX), Ok(w)),
            Err(schema_regex::PatternError::TooHeavy { .. }) => {
                assert!(schema_regex::weigh(text, u64::MAX).map_or(true, |w| w > limit))
            }
            Err(_) => {}
        }
    }
});
