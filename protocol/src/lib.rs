//! The parts of the server's request path that do not need wasmtime, kept
//! apart so they can be unit-tested and fuzzed cheaply: pagination cursors,
//! tool-name and schema rules, argument validation and result checks.

#[cfg(feature = "bounded")]
pub mod bounded;
pub mod checked_schema;
pub mod schema_limits;

#[cfg(feature = "bounded")]
pub use bounded::{Validation, ValidationBudget, ValidationFailure};
pub use checked_schema::{CheckedSchema, SchemaError};
pub use schema_limits::{check_schema, check_schema_text, SchemaLimitError, SchemaLimits};

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};

/// Longest description passed on to clients (in chars).
pub const MAX_DESCRIPTION: usize = 2000;

/// Error lines reported for one validation failure, at most.
const MAX_REPORTED_ERRORS: usize = 5;

/// `[A-Za-z0-9_-]{1,64}`.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Cap a description at [`MAX_DESCRIPTION`] chars.
pub fn cap_description(d: &str) -> String {
    d.chars().take(MAX_DESCRIPTION).collect()
}

/// Parse schema text that must be a JSON object with `"type": "object"`.
pub fn parse_object_schema(text: &str, what: &str) -> Result<Map<String, Value>> {
    let v: Value =
        serde_json::from_str(text).with_context(|| format!("{what} is not valid JSON"))?;
    let Value::Object(obj) = v else {
        bail!("{what} is not a JSON object")
    };
    if obj.get("type") != Some(&Value::String("object".into())) {
        bail!("{what} must have \"type\": \"object\" at the top level");
    }
    Ok(obj)
}

/// Compile a JSON Schema (no remote references are resolved).
pub fn compile_schema(obj: &Map<String, Value>, what: &str) -> Result<jsonschema::Validator> {
    jsonschema::validator_for(&Value::Object(obj.clone()))
        .map_err(|e| anyhow::anyhow!("{what} is not a valid JSON Schema: {e}"))
}

/// Validate `value`; on failure, up to five errors with their JSON pointers.
pub fn validate(schema: &jsonschema::Validator, value: &Value) -> Result<(), String> {
    let errors: Vec<String> = schema
        .iter_errors(value)
        .take(MAX_REPORTED_ERRORS)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Check a tool's raw result text: it must be a JSON object and, when the
/// tool has an output schema, valid against it. The error is the contract
/// violation to report.
pub fn check_result(text: &str, output: Option<&jsonschema::Validator>) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => match output {
            Some(schema) => match validate(schema, &v) {
                Ok(()) => Ok(v),
                Err(e) => Err(format!(
                    "result does not match the tool's outputSchema: {e}"
                )),
            },
            None => Ok(v),
        },
        Ok(_) => Err("result is not a JSON object".into()),
        Err(e) => Err(format!("result is not valid JSON: {e}")),
    }
}

/// Opaque pagination cursor: catalog version + offset, base64url.
pub fn encode_cursor(version: u64, offset: usize) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("v1:{version}:{offset}"))
}

/// Decode a cursor made by [`encode_cursor`]; `None` for anything else.
pub fn decode_cursor(cursor: &str) -> Option<(u64, usize)> {
    use base64::Engine as _;
    if cursor.len() > 128 {
        return None;
    }
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let mut parts = text.split(':');
    if parts.next()? != "v1" {
        return None;
    }
    let version = parts.next()?.parse().ok()?;
    let offset = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((version, offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cursor_roundtrip_and_garbage() {
        let c = encode_cursor(7, 50);
        assert_eq!(decode_cursor(&c), Some((7, 50)));
        assert_eq!(decode_cursor("not-a-cursor"), None);
        assert_eq!(decode_cursor(""), None);
        assert_eq!(decode_cursor(&"A".repeat(1000)), None);
        use base64::Engine as _;
        let extra = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("v1:1:2:3");
        assert_eq!(decode_cursor(&extra), None);
        let neg = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("v1:1:-2");
        assert_eq!(decode_cursor(&neg), None);
    }

    #[test]
    fn names_and_schemas_are_checked() {
        assert!(valid_tool_name("read_file"));
        assert!(valid_tool_name("a-b_C9"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("has space"));
        assert!(!valid_tool_name("dot.ted"));
        assert!(!valid_tool_name(&"x".repeat(65)));
        assert!(parse_object_schema(r#"{"type":"object"}"#, "s").is_ok());
        assert!(parse_object_schema(r#"{"type":"string"}"#, "s").is_err());
        assert!(parse_object_schema(r#"{"properties":{}}"#, "s").is_err());
        assert!(parse_object_schema(r#"[1]"#, "s").is_err());
        assert!(parse_object_schema(r#"{"type":"object""#, "s").is_err());
        let bad = parse_object_schema(
            r#"{"type":"object","properties":{"a":{"type":"nope"}}}"#,
            "s",
        )
        .unwrap();
        assert!(compile_schema(&bad, "s").is_err());
        assert_eq!(
            cap_description(&"é".repeat(3000)).chars().count(),
            MAX_DESCRIPTION
        );
    }

    #[test]
    fn arguments_and_results_are_validated() {
        let schema = parse_object_schema(
            r#"{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"],"additionalProperties":false}"#,
            "s",
        )
        .unwrap();
        let v = compile_schema(&schema, "s").unwrap();
        assert!(validate(&v, &json!({"n": 3})).is_ok());
        let e = validate(&v, &json!({"n": 0, "extra": 1})).unwrap_err();
        assert!(e.contains("/n") && e.contains("extra"), "{e}");
        assert!(validate(&v, &json!({}))
            .unwrap_err()
            .contains("\"n\" is a required property"));
        assert_eq!(
            check_result(r#"{"n":2}"#, Some(&v)).unwrap(),
            json!({"n": 2})
        );
        assert!(check_result(r#"{"n":"x"}"#, Some(&v))
            .unwrap_err()
            .contains("outputSchema"));
        assert!(check_result("[1]", None)
            .unwrap_err()
            .contains("not a JSON object"));
        assert!(check_result("{", None)
            .unwrap_err()
            .contains("not valid JSON"));
        assert_eq!(
            check_result(r#"{"any":true}"#, None).unwrap(),
            json!({"any": true})
        );
    }
}
