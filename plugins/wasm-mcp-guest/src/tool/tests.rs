use super::*;
use crate::ErrorCode;
use serde::Deserialize;
use serde_json::json;

/// Adds `a`
/// and `b`.
///
/// Second paragraph.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Add {
    /// The first term.
    a: i64,
    #[serde(default)]
    b: i64,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
    parts: Vec<Part>,
}

#[derive(Serialize, JsonSchema)]
struct Part {
    #[schemars(range(min = 1))]
    n: u32,
}

fn add(a: Add) -> Result<Sum, ToolError> {
    if a.a == 13 {
        return Err(ToolError::new(ErrorCode::TooLarge, "unlucky"));
    }
    Ok(Sum {
        sum: a.a + a.b,
        parts: vec![Part { n: 1 }],
    })
}

fn tools() -> Vec<Tool> {
    vec![Tool::new("add", add).title("Add").read_only().idempotent()]
}

#[test]
fn descriptor_takes_the_doc_comment_and_derives_plain_object_schemas() {
    let d = &descriptors(&tools())[0];
    assert_eq!(d.name, "add");
    assert_eq!(d.title.as_deref(), Some("Add"));
    assert_eq!(d.description, "Adds `a` and `b`.\n\nSecond paragraph.");
    assert_eq!(
        d.annotations,
        Annotations {
            read_only: true,
            idempotent: true,
            ..Default::default()
        }
    );
    let input = &d.input_schema;
    assert_eq!(input["type"], "object");
    assert_eq!(input["additionalProperties"], false);
    assert_eq!(input["required"], json!(["a"]));
    assert_eq!(input["properties"]["a"]["description"], "The first term.");
    assert_eq!(input["properties"]["b"]["default"], 0);
    for key in ["$schema", "title", "description", "$defs"] {
        assert!(input.get(key).is_none(), "input schema has {key}: {input}");
    }
    let output = &d.output_schema;
    assert_eq!(output["type"], "object");
    assert!(
        output.get("$defs").is_none() && !output.to_string().contains("$ref"),
        "{output}"
    );
    assert_eq!(
        output["properties"]["parts"]["items"]["properties"]["n"]["minimum"],
        1
    );
}

#[test]
fn an_explicit_description_wins() {
    let t = Tool::new("add", add).description("mine");
    assert_eq!(t.descriptor().description, "mine");
}

#[test]
fn call_parses_runs_and_serializes() {
    let out = call(&tools(), "add", r#"{"a": 2, "b": 3}"#).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"sum": 5, "parts": [{"n": 1}]})
    );
    // Empty argument text counts as `{}`.
    assert_eq!(
        call(&tools(), "add", " ").unwrap_err().code,
        ErrorCode::InvalidArguments
    );
}

#[test]
fn errors_keep_their_codes() {
    let t = tools();
    assert_eq!(
        call(&t, "sub", "{}").unwrap_err().code,
        ErrorCode::UnknownTool
    );
    let e = call(&t, "add", r#"{"a": 1, "c": 2}"#).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArguments);
    assert!(e.message.contains("invalid arguments for add"), "{e}");
    assert_eq!(
        call(&t, "add", r#"{"a": "x"}"#).unwrap_err().code,
        ErrorCode::InvalidArguments
    );
    assert_eq!(
        call(&t, "add", r#"{"a": 13}"#).unwrap_err(),
        ToolError::new(ErrorCode::TooLarge, "unlucky")
    );
}
