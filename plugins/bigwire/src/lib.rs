//! TEST-ONLY plugin whose answers do not fit the wire: a 100 MiB error
//! message (over the call's transfer limit), a 1 MiB one (under it, cut to
//! fit), a result of numbers that grows past the frame limit when
//! re-serialized, plus a result that does fit; and more tools than the
//! host's per-plugin cap (`filler_000`…), so the tail is refused. Also
//! result texts that are not JSON the host can take: nesting a million deep
//! and a lone surrogate escape. And a 1 MiB result its own output schema
//! refuses (the validator's message quotes the value), and a 4 MiB string
//! its output schema checks 490 times (`format: email`, each a pass over
//! it: ~7 s when the host priced a string as one node and ran it inline).
//! And a 4 MiB string that fails all 490 branches of an `anyOf` (no
//! keyword reads it, so checking it is cheap; explaining the failure copied
//! it once per branch: ~1 s and ~2.4 GB inline). And arguments whose check
//! is slow within its price (60,000 fractional `multipleOf` checks of
//! floats near 1e308 by the exact rule arguments keep, priced just under
//! the budget: ~0.14 s each in a release build), to flood the validation
//! threads with (results are checked by floating-point division, as MCP
//! clients check them, which is fast). And a result of
//! 5 MiB that takes ~500 MB once parsed (`{"":0}` is 7 bytes of text and
//! ~680 bytes of `serde_json::Value`).

use serde_json::json;
use wasm_mcp_guest::{ErrorCode, Tool, ToolError};

/// Tools declared before the fillers (the host keeps the first 256).
pub const WIRE_TOOLS: &[&str] = &[
    "huge_error",
    "big_error",
    "number_result",
    "fits_result",
    "deep_result",
    "surrogate_result",
    "violating_result",
    "costly_result",
    "branching_result",
    "slow_check_args",
    "object_flood_result",
];
/// Filler tools: with the wire tools, 306 declared.
pub const FILLERS: usize = 295;

/// `{"n":[1e9,1e9,…]}` of about `bytes` bytes: each `1e9` becomes
/// `1000000000.0` once parsed and serialized again (3.25× larger).
pub fn numbers(bytes: usize) -> String {
    array_of("n", "1e9", bytes)
}

/// `{"a":[{"":0},{"":0},…]}` of about `bytes` bytes: a one-member object
/// is a whole B-tree node once parsed.
pub fn object_flood(bytes: usize) -> String {
    array_of("a", r#"{"":0}"#, bytes)
}

/// `{"<key>":[<item>,<item>,…]}`, as many items as fit `bytes` with their
/// commas.
fn array_of(key: &str, item: &str, bytes: usize) -> String {
    let count = bytes / (item.len() + 1);
    let items = vec![item; count].join(",");
    format!("{{\"{key}\":[{items}]}}")
}

pub fn tool_names() -> Vec<String> {
    WIRE_TOOLS
        .iter()
        .map(|s| s.to_string())
        .chain((0..FILLERS).map(|i| format!("filler_{i:03}")))
        .collect()
}

/// The tools on the guest SDK: [`Tool::raw`], because the results must
/// leave the guest as written (`1e9` un-normalized, a 100 MiB message) and
/// the filler names are made at run time.
pub fn tools() -> Vec<Tool> {
    tool_names()
        .into_iter()
        .map(|name| {
            let key = name.clone();
            let input = match name.as_str() {
                "slow_check_args" => slow_check_schema(),
                _ => json!({"type": "object"}),
            };
            let tool = Tool::raw(name, input, move |_| run(&key))
                .description("bigwire test tool")
                .read_only()
                .idempotent();
            match tool.name() {
                "violating_result" => tool.output_schema(json!({
                    "type": "object",
                    "properties": {"s": {"enum": ["a"]}}
                })),
                "costly_result" => tool.output_schema(costly_schema()),
                "branching_result" => tool.output_schema(branching_schema()),
                _ => tool,
            }
        })
        .collect()
}

/// A draft-07 schema (formats are checked) whose `s` is checked 490 times.
fn costly_schema() -> serde_json::Value {
    let checks: Vec<_> = (0..490).map(|_| json!({"format": "email"})).collect();
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"s": {"allOf": checks}}
    })
}

/// A schema whose `s` must be one of 490 integer types.
fn branching_schema() -> serde_json::Value {
    let branches: Vec<_> = (0..490).map(|_| json!({"type": "integer"})).collect();
    json!({"type": "object", "properties": {"s": {"anyOf": branches}}})
}

/// Ten fractional `multipleOf` checks of every item of `a`.
fn slow_check_schema() -> serde_json::Value {
    let checks: Vec<_> = (0..10).map(|_| json!({"multipleOf": 0.1})).collect();
    json!({"type": "object", "properties": {"a": {"type": "array", "items": {"allOf": checks}}}})
}

fn run(name: &str) -> Result<String, ToolError> {
    match name {
        "huge_error" => Err(ToolError::new(ErrorCode::Io, "E".repeat(100 << 20))),
        "big_error" => Err(ToolError::new(ErrorCode::Io, "E".repeat(1 << 20))),
        // Under the default 5 MiB output cap; ~16 MiB once re-serialized.
        "number_result" => Ok(numbers((5 << 20) - 4096)),
        "fits_result" => Ok(format!("{{\"s\":\"{}\"}}", "x".repeat(1 << 20))),
        // 2 MB, under the output cap: a parser that recursed would overflow.
        "deep_result" => Ok(format!(
            "{{\"a\":{}{}}}",
            "[".repeat(1_000_000),
            "]".repeat(1_000_000)
        )),
        "surrogate_result" => Ok(r#"{"s":"\ud800"}"#.into()),
        "violating_result" => Ok(format!("{{\"s\":\"{}\"}}", "v".repeat(1 << 20))),
        "costly_result" | "branching_result" => {
            Ok(format!("{{\"s\":\"{}\"}}", "a".repeat(4 << 20)))
        }
        "object_flood_result" => Ok(object_flood((5 << 20) - 4096)),
        _ => Ok("{}".into()),
    }
}

wasm_mcp_guest::export_tools!(tools());

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_grow_when_reserialized() {
        let text = super::numbers(4000);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(serde_json::to_string(&v).unwrap().len() > 3 * text.len());
    }

    #[test]
    fn more_tools_than_the_cap() {
        assert!(super::tool_names().len() > 256);
        assert_eq!(wasm_mcp_guest::descriptors(&super::tools()).len(), 306);
    }

    #[test]
    fn results_leave_the_guest_as_written() {
        let t = super::tools();
        let out = wasm_mcp_guest::call(&t, "number_result", "{}").unwrap();
        assert!(out.starts_with("{\"n\":[1e9,1e9,"), "not re-serialized");
        let e = wasm_mcp_guest::call(&t, "huge_error", "{}").unwrap_err();
        assert_eq!(e.message.len(), 100 << 20);
        assert_eq!(wasm_mcp_guest::call(&t, "filler_294", "{}").unwrap(), "{}");
        let flood = wasm_mcp_guest::call(&t, "object_flood_result", "{}").unwrap();
        assert!(flood.len() < 5 << 20 && flood.starts_with(r#"{"a":[{"":0},{"":0}"#));
    }
}
