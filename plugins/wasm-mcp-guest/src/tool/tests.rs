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
    let output = d.output_schema.as_ref().unwrap();
    assert_eq!(output["type"], "object");
    assert!(
        output.get("$defs").is_none() && !output.to_string().contains("$ref"),
        "{output}"
    );
    let n = &output["properties"]["parts"]["items"]["properties"]["n"];
    assert_eq!(n["minimum"], 1);
    // schemars' number formats (`uint32`, `int64`) are no JSON Schema
    // format: AJV-based clients warned about each on every listing.
    assert!(n.get("format").is_none(), "{n}");
    assert!(input["properties"]["a"].get("format").is_none(), "{input}");
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

/// `add`, writing its own JSON text (as a tool streaming a file would).
fn add_encoded(a: Add) -> Result<Encoded<Sum>, ToolError> {
    if a.a == 13 {
        return Err(ToolError::new(ErrorCode::TooLarge, "unlucky"));
    }
    let sum = a.a + a.b;
    Ok(Encoded::new(format!(
        r#"{{"sum":{sum},"parts":[{{"n":1}}]}}"#
    )))
}

#[test]
fn an_encoded_tool_derives_its_schemas_and_returns_its_text_as_written() {
    let plain = Tool::new("add", add).descriptor();
    let encoded = Tool::encoded("add", add_encoded).descriptor();
    assert_eq!(encoded, plain);
    let t = [Tool::encoded("add", add_encoded)];
    assert_eq!(
        call(&t, "add", r#"{"a": 2, "b": 3}"#).unwrap(),
        call(&tools(), "add", r#"{"a": 2, "b": 3}"#).unwrap()
    );
    // Arguments are parsed, and errors keep their codes, as for `Tool::new`.
    assert_eq!(
        call(&t, "add", r#"{"a": "x"}"#).unwrap_err().code,
        ErrorCode::InvalidArguments
    );
    assert_eq!(
        call(&t, "add", r#"{"a": 13}"#).unwrap_err().code,
        ErrorCode::TooLarge
    );
}

/// Hand-written schema with keys a derived one never has.
fn verbatim_schema() -> serde_json::Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "description": "the schema's own description",
        "$defs": {"n": {"type": "integer"}},
        "properties": {"x": {"$ref": "#/$defs/n"}}
    })
}

#[test]
fn a_raw_tool_publishes_its_schemas_as_given() {
    let name = format!("raw_{}", 7); // a name made at run time
    let tools = vec![
        Tool::raw(name, verbatim_schema(), |_| Ok("{}".into())).description("Raw."),
        Tool::raw("typed_out", json!({"type": "object"}), |_| Ok("{}".into()))
            .output_schema(json!({"type": "object", "required": ["n"]})),
    ];
    let d = descriptors(&tools);
    assert_eq!(d[0].name, "raw_7");
    assert_eq!(d[0].input_schema, verbatim_schema(), "published unchanged");
    assert_eq!(d[0].description, "Raw.", "the schema keeps its description");
    assert_eq!(d[0].output_schema, None);
    assert_eq!(d[1].description, "");
    assert_eq!(
        d[1].output_schema.as_ref().unwrap()["required"],
        json!(["n"])
    );
}

#[test]
fn a_raw_tool_gets_and_returns_json_text_unchanged() {
    let tools = vec![Tool::raw("echo", json!({"type": "object"}), |args| {
        if args.contains("fail") {
            return Err(ToolError::new(ErrorCode::Io, "asked to fail"));
        }
        Ok(format!("{{\"n\":1e9,\"got\":{args}}}"))
    })];
    // Not parsed and re-serialized: `1e9` stays `1e9`, spacing stays.
    assert_eq!(
        call(&tools, "echo", r#"{ "a": 1 }"#).unwrap(),
        r#"{"n":1e9,"got":{ "a": 1 }}"#
    );
    let e = call(&tools, "echo", r#"{"fail":true}"#).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (ErrorCode::Io, "asked to fail")
    );
    assert_eq!(
        call(&tools, "nope", "{}").unwrap_err().code,
        ErrorCode::UnknownTool
    );
}

#[derive(Serialize)]
struct Order {
    zeta: &'static str,
    alpha: String,
    mid: Option<f64>,
    list: Vec<u64>,
}

/// Results keep the struct's field order and are the JSON `serde_json`
/// would write, whatever the string holds.
#[test]
fn results_encode_as_serde_json_would() {
    let out = Order {
        zeta: "first",
        alpha: format!(
            "{}quote \" backslash \\ controls \u{0}\u{1f}\t\r\n é 🦀 \u{2028}",
            "plain text ".repeat(200)
        ),
        mid: Some(0.1),
        list: vec![0, u64::MAX],
    };
    let ours = encode(&out).unwrap();
    let keys: Vec<usize> = ["\"zeta\"", "\"alpha\"", "\"mid\"", "\"list\""]
        .iter()
        .map(|k| ours.find(k).expect(k))
        .collect();
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "field order: {keys:?}"
    );
    let reference = serde_json::to_string(&out).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&ours).unwrap(),
        serde_json::from_str::<serde_json::Value>(&reference).unwrap()
    );
}
