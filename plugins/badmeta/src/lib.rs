//! TEST-ONLY plugin whose `list-tools` breaks the contract in every way but
//! one: the host must publish `good_tool` alone and log why each other
//! descriptor was refused.

/// (name, input schema, output schema)
pub const DESCRIPTORS: &[(&str, &str, Option<&str>)] = &[
    (
        "good_tool",
        r#"{"type":"object","properties":{}}"#,
        Some(r#"{"type":"object"}"#),
    ),
    ("bad name!", r#"{"type":"object"}"#, None),
    ("not_object_schema", r#"{"type":"string"}"#, None),
    ("broken_json_schema", r#"{"type":"object""#, None),
    (
        "invalid_schema",
        r#"{"type":"object","properties":{"a":{"type":"no-such-type"}}}"#,
        None,
    ),
    ("bad_output_schema", r#"{"type":"object"}"#, Some(r#"[]"#)),
    ("good_tool", r#"{"type":"object"}"#, None),
];

#[cfg(target_arch = "wasm32")]
mod glue {
    wit_bindgen::generate!({ path: "../../wit", world: "tool-plugin" });

    use exports::wasm_mcp::tool::tool::{Annotations, ErrorCode, Guest, ToolDescriptor, ToolError};

    struct Plugin;

    impl Guest for Plugin {
        fn list_tools() -> Vec<ToolDescriptor> {
            crate::DESCRIPTORS
                .iter()
                .map(|(name, input, output)| ToolDescriptor {
                    name: name.to_string(),
                    title: None,
                    description: "x".repeat(5000),
                    input_schema: input.to_string(),
                    output_schema: output.map(str::to_string),
                    annotations: Annotations {
                        read_only: true,
                        destructive: false,
                        idempotent: true,
                        open_world: false,
                    },
                })
                .collect()
        }

        fn call(name: String, _args_json: String) -> Result<String, ToolError> {
            match name.as_str() {
                "good_tool" => Ok("{}".into()),
                _ => Err(ToolError {
                    code: ErrorCode::UnknownTool,
                    message: format!("unknown tool `{name}`"),
                }),
            }
        }
    }

    export!(Plugin);
}

#[cfg(test)]
mod tests {
    #[test]
    fn good_tool_is_declared_twice_on_purpose() {
        let good = super::DESCRIPTORS
            .iter()
            .filter(|d| d.0 == "good_tool")
            .count();
        assert_eq!(good, 2, "the duplicate is part of the test");
    }
}
