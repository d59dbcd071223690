//! The object-schema rule: tool input and output schemas are JSON objects
//! with `"type": "object"`, compiled once into validators.

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};

/// How an object schema without any `"type"` is judged. The server refuses
/// it (tool authors must say `"type": "object"`); the client accepts it, as
/// other MCP clients do, since such a schema still only describes objects'
/// properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingType {
    Refuse,
    Allow,
}

/// Whether `v` is an object schema: a JSON object whose `"type"` is
/// `"object"` (or absent, when `missing` allows it).
pub fn is_object_schema(v: &Value, missing: MissingType) -> bool {
    let Some(obj) = v.as_object() else {
        return false;
    };
    match obj.get("type") {
        None => missing == MissingType::Allow,
        Some(t) => t == "object",
    }
}

/// Parse schema text that must be a JSON object with `"type": "object"`.
pub fn parse_object_schema(text: &str, what: &str) -> Result<Map<String, Value>> {
    let v: Value =
        serde_json::from_str(text).with_context(|| format!("{what} is not valid JSON"))?;
    if !v.is_object() {
        bail!("{what} is not a JSON object")
    }
    if !is_object_schema(&v, MissingType::Refuse) {
        bail!("{what} must have \"type\": \"object\" at the top level");
    }
    let Value::Object(obj) = v else {
        unreachable!("checked above")
    };
    Ok(obj)
}

/// What a schema checks: a tool's arguments (its input schema) or its
/// results (its output schema). One rule differs: results are checked as
/// MCP clients check them again ([`crate::multiple_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaUse {
    Arguments,
    Results,
}

impl SchemaUse {
    /// Which of a tool's schemas it is, `input` or `output`, as messages
    /// name it (`input-schema` in the WIT, `inputSchema` in MCP).
    pub fn side(self) -> &'static str {
        match self {
            SchemaUse::Arguments => "input",
            SchemaUse::Results => "output",
        }
    }
}

/// Compile a JSON Schema (no remote references are resolved).
pub fn compile_schema(
    obj: &Map<String, Value>,
    what: &str,
    schema_use: SchemaUse,
) -> Result<jsonschema::Validator> {
    compile_value(&Value::Object(obj.clone()), schema_use)
        .map_err(|e| anyhow::anyhow!("{what} is {}", crate::SchemaError::Invalid(e)))
}

/// Compile a schema value; the error is the compiler's message. Each
/// regex is bounded by [`PATTERN_SIZE_LIMIT`](crate::schema_limits::PATTERN_SIZE_LIMIT)
/// (its weight is bounded before, by `check_schema`), and values of the
/// `regex` format by [`is_regex_format`](crate::schema_regex::is_regex_format).
pub fn compile_value(
    schema: &Value,
    schema_use: SchemaUse,
) -> Result<jsonschema::Validator, String> {
    // The regex crate alone: its matching is linear in the string, where
    // fancy-regex's lookarounds and backreferences backtrack (quadratic:
    // `(?=(a+))\1b` took 11 s on 64 KiB). `schema_regex` refuses those
    // constructs with a reason before this, and proves each pattern's DFA
    // fits [`MATCH_DFA_BYTES`](crate::schema_regex::MATCH_DFA_BYTES), so
    // the lazy DFA's cache (twice that) never thrashes into the slow NFA.
    let patterns = jsonschema::PatternOptions::regex()
        .size_limit(crate::schema_limits::PATTERN_SIZE_LIMIT)
        .dfa_size_limit(2 * crate::schema_regex::MATCH_DFA_BYTES);
    let options = jsonschema::options()
        .with_pattern_options(patterns)
        .with_format("regex", crate::schema_regex::is_regex_format);
    let options = match schema_use {
        SchemaUse::Arguments => options,
        SchemaUse::Results => {
            options.with_keyword("multipleOf", crate::multiple_of::clients_multiple_of)
        }
    };
    options
        .build(schema)
        .map_err(|e| crate::validate::describe(&e))
}

/// Builds, on a thread of its own, what the first schema compiled in a
/// process would otherwise wait for: the meta-schema validators every
/// schema is checked against (built once per process, ~2 ms). A server
/// calls it before loading plugins, so the build overlaps their loading.
pub fn warm_up_in_background() {
    std::thread::spawn(|| {
        let probe = serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let _ = compile_value(&probe, SchemaUse::Arguments);
    });
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
        assert!(compile_schema(&bad, "s", SchemaUse::Arguments).is_err());
    }

    #[test]
    fn missing_type_is_a_named_choice() {
        let untyped = serde_json::json!({"properties": {}});
        assert!(!is_object_schema(&untyped, MissingType::Refuse));
        assert!(is_object_schema(&untyped, MissingType::Allow));
        for bad in [
            serde_json::json!({"type": "string"}),
            serde_json::json!({"type": ["object"]}),
            serde_json::json!(true),
        ] {
            assert!(!is_object_schema(&bad, MissingType::Allow), "{bad}");
        }
    }
}
