//! `x-mcp-header` annotations in a tool's input schema (MCP 2026-07-28):
//! a property so annotated is mirrored by clients into an `Mcp-Param-*`
//! HTTP header, which the server checks against the body. The rules are
//! the ones conforming clients apply (rmcp's, the Python SDK's): a client
//! silently drops a tool that breaks one, so the host refuses it at load,
//! saying why, instead of publishing a tool that some clients never show.

use serde_json::{Map, Value};

/// Checks the annotations of the input `schema`: each on a property
/// reached from the root through `properties` keys alone, a non-empty
/// HTTP token (RFC 9110), unique regardless of case, on a `string`,
/// `integer` or `boolean` property. The first violation, said.
pub fn check_header_annotations(schema: &Map<String, Value>) -> Result<(), String> {
    if schema.contains_key(ANNOTATION) {
        return Err("x-mcp-header must annotate a property, not the schema's root".into());
    }
    let mut seen = std::collections::HashSet::new();
    check_on_chain(schema, &mut Vec::new(), &mut seen)
}

const ANNOTATION: &str = "x-mcp-header";

/// `schema` less the annotations of its numeric (`integer`, `number`)
/// properties on the `properties` chain, at any depth, for the server's
/// check of `Mcp-Param-*` headers; `None` when it has none. Clients leave
/// the header out for an integer past JavaScript's safe range (the
/// TypeScript SDK 2.4, the Inspector), and rmcp reads integers past 64
/// bits back as floats, so such calls were refused -32020 (a helper's
/// find). Those headers go unchecked; `tools/list` still shows them.
pub fn without_numeric_annotations(schema: &Map<String, Value>) -> Option<Map<String, Value>> {
    if !has_numeric_annotation(schema) {
        return None;
    }
    let mut stripped = schema.clone();
    strip_numeric(&mut stripped);
    Some(stripped)
}

fn has_numeric_annotation(schema: &Map<String, Value>) -> bool {
    let properties = schema.get("properties").and_then(Value::as_object);
    properties
        .into_iter()
        .flat_map(|p| p.values().filter_map(Value::as_object))
        .any(|p| (numeric(p) && p.contains_key(ANNOTATION)) || has_numeric_annotation(p))
}

fn strip_numeric(schema: &mut Map<String, Value>) {
    let Some(Value::Object(properties)) = schema.get_mut("properties") else {
        return;
    };
    for property in properties.values_mut().filter_map(Value::as_object_mut) {
        if numeric(property) {
            property.remove(ANNOTATION);
        }
        strip_numeric(property);
    }
}

/// Whether `property`'s `type` is, or lists, `integer` or `number`.
fn numeric(property: &Map<String, Value>) -> bool {
    let is_numeric = |t: &Value| matches!(t.as_str(), Some("integer" | "number"));
    match property.get("type") {
        Some(Value::Array(types)) => types.iter().any(is_numeric),
        Some(t) => is_numeric(t),
        None => false,
    }
}

/// `schema` was reached from the root through `properties` keys alone
/// (`path`): its properties may carry annotations, anything else in it may not.
fn check_on_chain(
    schema: &Map<String, Value>,
    path: &mut Vec<String>,
    seen: &mut std::collections::HashSet<String>,
) -> Result<(), String> {
    for (key, value) in schema {
        match key.as_str() {
            "properties" => {
                let Some(properties) = value.as_object() else {
                    continue;
                };
                for (name, property) in properties {
                    path.push(name.clone());
                    if let Some(property) = property.as_object() {
                        check_property(property, path, seen)?;
                        check_on_chain(property, path, seen)?;
                    }
                    path.pop();
                }
            }
            ANNOTATION => {}
            // Instance data or property names, not subschemas; vendor
            // keywords (`x-ui`), which the SDKs' clients do not walk either.
            "default" | "const" | "enum" | "examples" | "dependentRequired" => {}
            _ if key.starts_with("x-") => {}
            _ if holds_annotation(value) => {
                return Err(format!(
                    "x-mcp-header under `{key}`{}: it may only sit on a property reached through `properties` alone",
                    at(path)
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_property(
    property: &Map<String, Value>,
    path: &[String],
    seen: &mut std::collections::HashSet<String>,
) -> Result<(), String> {
    let Some(header) = property.get(ANNOTATION) else {
        return Ok(());
    };
    let prop = path.join(".");
    let Value::String(header) = header else {
        return Err(format!("property `{prop}`: x-mcp-header must be a string"));
    };
    if header.is_empty() || !header.bytes().all(is_tchar) {
        return Err(format!(
            "property `{prop}`: x-mcp-header {header:?} is not an HTTP header name (RFC 9110 token)"
        ));
    }
    if !seen.insert(header.to_ascii_lowercase()) {
        return Err(format!(
            "property `{prop}`: x-mcp-header {header:?} is used twice (header names ignore case)"
        ));
    }
    match property.get("type").and_then(Value::as_str) {
        Some("string" | "integer" | "boolean") => Ok(()),
        other => Err(format!(
            "property `{prop}`: x-mcp-header needs a string, integer or boolean property, not {}",
            other.map_or("one of no single type".to_string(), |t| format!("`{t}`"))
        )),
    }
}

/// Whether `value` (anywhere below it) holds an annotation.
fn holds_annotation(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k == ANNOTATION || holds_annotation(v)),
        Value::Array(items) => items.iter().any(holds_annotation),
        _ => false,
    }
}

fn at(path: &[String]) -> String {
    match path.is_empty() {
        true => String::new(),
        false => format!(" in property `{}`", path.join(".")),
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: Value) -> Result<(), String> {
        check_header_annotations(schema.as_object().unwrap())
    }

    #[test]
    fn annotations_conforming_clients_take_pass() {
        let ok = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "opts": {"type": "object", "properties": {
                "flag": {"type": "boolean", "x-mcp-header": "Flag"}}},
            "plain": {"type": "string", "default": {"x-mcp-header": "data, not a schema"}},
            "hinted": {"type": "string", "x-mcp-header": "Hinted", "x-ui": {"x-mcp-header": "hint"}}}});
        assert_eq!(check(ok), Ok(()));
    }

    /// What clients drop a tool for (helper's find: the tool loaded,
    /// 2026-07-28 clients never showed it, and a call of it was refused
    /// for a header no client can send).
    #[test]
    fn annotations_conforming_clients_drop_are_refused() {
        let prop = |p: Value| json!({"type": "object", "properties": {"a": p}});
        for (schema, said) in [
            (
                prop(json!({"type": "string", "x-mcp-header": "Bad Name"})),
                "not an HTTP header name",
            ),
            (
                prop(json!({"type": "string", "x-mcp-header": "A\r\nX: y"})),
                "not an HTTP header name",
            ),
            (
                prop(json!({"type": "string", "x-mcp-header": ""})),
                "not an HTTP header name",
            ),
            (
                prop(json!({"type": "string", "x-mcp-header": 7})),
                "must be a string",
            ),
            (
                prop(json!({"type": "number", "x-mcp-header": "N"})),
                "not `number`",
            ),
            (
                prop(json!({"type": "object", "x-mcp-header": "O"})),
                "not `object`",
            ),
            (prop(json!({"x-mcp-header": "U"})), "no single type"),
            (
                json!({"type": "object", "properties": {
                    "a": {"type": "string", "x-mcp-header": "Region"},
                    "b": {"type": "string", "x-mcp-header": "REGION"}}}),
                "used twice",
            ),
            (
                json!({"type": "object", "x-mcp-header": "Root"}),
                "not the schema's root",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array",
                    "items": {"type": "string", "x-mcp-header": "I"}}}}),
                "under `items`",
            ),
            (
                json!({"type": "object", "$defs": {"d": {"type": "string", "x-mcp-header": "D"}}}),
                "under `$defs`",
            ),
        ] {
            let e = check(schema.clone()).unwrap_err();
            assert!(e.contains(said), "{schema}: {e}");
        }
    }
}
