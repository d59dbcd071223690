//! TEST-ONLY plugin whose answers do not fit the wire: a 100 MiB error
//! message, a result of numbers that grows past the frame limit when
//! re-serialized, plus a result that does fit; and more tools than the
//! host's per-plugin cap (`filler_000`…), so the tail is refused.

/// Tools declared before the fillers (the host keeps the first 256).
pub const WIRE_TOOLS: &[&str] = &["huge_error", "number_result", "fits_result"];
/// Filler tools: with the wire tools, 303 declared.
pub const FILLERS: usize = 300;

/// `{"n":[1e9,1e9,…]}` of about `bytes` bytes: each `1e9` becomes
/// `1000000000.0` once parsed and serialized again (3.25× larger).
pub fn numbers(bytes: usize) -> String {
    let count = bytes / 4;
    let mut s = String::with_capacity(count * 4 + 8);
    s.push_str("{\"n\":[");
    for i in 0..count {
        if i > 0 {
            s.push(',');
        }
        s.push_str("1e9");
    }
    s.push_str("]}");
    s
}

pub fn tool_names() -> Vec<String> {
    WIRE_TOOLS
        .iter()
        .map(|s| s.to_string())
        .chain((0..FILLERS).map(|i| format!("filler_{i:03}")))
        .collect()
}

#[cfg(target_arch = "wasm32")]
mod glue {
    wit_bindgen::generate!({ path: "../../wit", world: "tool-plugin" });

    use exports::wasm_mcp::tool::tool::{Annotations, ErrorCode, Guest, ToolDescriptor, ToolError};

    struct Plugin;

    impl Guest for Plugin {
        fn list_tools() -> Vec<ToolDescriptor> {
            crate::tool_names()
                .into_iter()
                .map(|name| ToolDescriptor {
                    name,
                    title: None,
                    description: "bigwire test tool".into(),
                    input_schema: r#"{"type":"object"}"#.into(),
                    output_schema: None,
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
                "huge_error" => Err(ToolError {
                    code: ErrorCode::Io,
                    message: "E".repeat(100 << 20),
                }),
                // Under the default 5 MiB output cap; ~16 MiB once re-serialized.
                "number_result" => Ok(crate::numbers((5 << 20) - 4096)),
                "fits_result" => Ok(format!("{{\"s\":\"{}\"}}", "x".repeat(1 << 20))),
                n if n.starts_with("filler_") => Ok("{}".into()),
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
    fn numbers_grow_when_reserialized() {
        let text = super::numbers(4000);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(serde_json::to_string(&v).unwrap().len() > 3 * text.len());
    }

    #[test]
    fn more_tools_than_the_cap() {
        assert!(super::tool_names().len() > 256);
    }
}
