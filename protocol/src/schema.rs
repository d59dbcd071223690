//! The object-schema rule: tool input and output schemas are JSON objects
//! with `"type": "object"`, compiled once into validators.

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_checked() {
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
    }
}
