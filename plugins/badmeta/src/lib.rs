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

/// Bytes of the over-long tool name in [`over_limits`].
pub const HUGE_NAME_BYTES: usize = 4 << 20;

/// Descriptors within every other rule whose schemas or title break a load
/// limit: (name, title, input schema, output schema). Validating against the
/// `$ref` chain would take 2^40 steps; the others are a `$ref` cycle, a
/// remote `$ref`, a 100 KiB schema, a 10 000-char title, a schema whose
/// 60 KiB `type` is no type (the validator's message quotes it) and a name
/// of [`HUGE_NAME_BYTES`]: the host must not repeat those whole in its log.
pub fn over_limits() -> Vec<(String, Option<String>, String, Option<String>)> {
    let plain = r#"{"type":"object"}"#.to_string();
    vec![
        ("exponential_ref".into(), None, ref_chain(40), None),
        (
            "exponential_output".into(),
            None,
            plain.clone(),
            Some(ref_chain(40)),
        ),
        (
            "recursive_ref".into(),
            None,
            r##"{"type":"object","properties":{"x":{"$ref":"#"}}}"##.into(),
            None,
        ),
        (
            "remote_ref".into(),
            None,
            r#"{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}"#.into(),
            None,
        ),
        (
            "huge_schema".into(),
            None,
            format!(
                r#"{{"type":"object","description":"{}"}}"#,
                "x".repeat(100 << 10)
            ),
            None,
        ),
        (
            "huge_title".into(),
            Some("T".repeat(10_000)),
            plain.clone(),
            None,
        ),
        ("slow_regexes".into(), None, slow_regexes(), None),
        ("lookahead_regexes".into(), None, lookahead_regexes(), None),
        ("hidden_regexes".into(), None, hidden_regexes(), None),
        ("folding_regex".into(), None, folding_regex(), None),
        (
            "backtracking_output".into(),
            None,
            plain.clone(),
            Some(string_pattern(r"(?=(a+))\\1b")),
        ),
        (
            "thrashing_output".into(),
            None,
            plain.clone(),
            Some(string_pattern(r"a{3000}[^a]")),
        ),
        (
            "nfa_output".into(),
            None,
            plain.clone(),
            Some(string_pattern(r"(?:[ab]*){10000}c")),
        ),
        (
            "huge_invalid_schema".into(),
            None,
            format!(
                r#"{{"type":"object","properties":{{"a":{{"type":"{}"}}}}}}"#,
                "t".repeat(60 << 10)
            ),
            None,
        ),
        ("n".repeat(HUGE_NAME_BYTES), None, plain, None),
    ]
}

/// An object schema of 64 properties (the per-schema regex limit), each
/// with its own `[\s\S]{10000}…` pattern: ~60 ms apiece to compile under
/// the regex engine's default size limit, distinct so none is cached. 256
/// tools with two such schemas held a host's start-up for ~1 h; the host
/// refuses it by the first pattern's weight, before compiling anything.
pub fn slow_regexes() -> String {
    patterned(|i| format!(r"[\\s\\S]{{10000}}{i}"))
}

/// The same, in the shape the regex engine's size limit did not bound:
/// `^(?=[\s\S]{2400}y)…x`, four distinct lookaheads. The schema compiler
/// builds each lookahead as a regex of its own, under the engine's default
/// limit, and caches them by text: distinct ones took ~35 ms a pattern,
/// ~2.2 s for the schema (and a 4 KiB pattern holds ~200 of them). The host
/// now refuses lookarounds (its engine is the regex crate alone).
pub fn lookahead_regexes() -> String {
    patterned(lookahead_chain)
}

/// `^(?=[\s\S]{n}y)` for four distinct `n` picked by `i`, then `x`.
fn lookahead_chain(i: usize) -> String {
    let parts: String = (0..4)
        .map(|k| format!(r"(?=[\\s\\S]{{{}}}y)", 2400 + 4 * i + k))
        .collect();
    format!("^{parts}x")
}

/// Such a pattern kept under a keyword no validator applies, reached only
/// through `$ref` (the schema compiler compiles it; a walk over the applied
/// keywords never sees it).
pub fn hidden_regexes() -> String {
    format!(
        r##"{{"type":"object","properties":{{"a":{{"$ref":"#/x-hidden/p"}}}},"x-hidden":{{"p":{{"type":"string","pattern":"{}"}}}}}}"##,
        lookahead_chain(64)
    )
}

/// `(?i)` and `\p{Any}` 583 times (4 KiB): light by weight (15,746), but the
/// regex parser case-folds each class code point by code point, ~4 ms
/// apiece: 2.3 s to weigh, 4.6 s to compile (found by a review).
pub fn folding_regex() -> String {
    format!(
        r#"{{"type":"object","properties":{{"a":{{"type":"string","pattern":"^(?=(?i){})"}}}}}}"#,
        r"\\p{Any}".repeat(583)
    )
}

/// An object schema whose string `s` must match `pattern` (JSON-escaped).
/// As output schemas: `(?=(a+))\1b` matched a plugin's own 64 KiB result in
/// 11 s by backtracking, `a{3000}[^a]` 128 KiB in 3.4 s once the lazy DFA
/// gave up, `(?:[ab]*){10000}c` 1 KiB in 0.27 s with no lazy DFA at all
/// (its NFA too large for the cache; all inline on the executor, found by
/// helpers).
fn string_pattern(pattern: &str) -> String {
    format!(r#"{{"type":"object","properties":{{"s":{{"type":"string","pattern":"{pattern}"}}}}}}"#)
}

/// An object schema of 64 properties with the patterns `pattern(0..64)`.
fn patterned(pattern: impl Fn(usize) -> String) -> String {
    let props: Vec<String> = (0..64)
        .map(|i| format!(r#""p{i}":{{"pattern":"{}"}}"#, pattern(i)))
        .collect();
    format!(
        r#"{{"type":"object","properties":{{{}}}}}"#,
        props.join(",")
    )
}

/// `$defs` a0..a{n}, each `anyOf` of two `$ref`s to the next.
pub fn ref_chain(n: usize) -> String {
    let defs: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r##""a{i}":{{"anyOf":[{{"$ref":"#/$defs/a{j}"}},{{"$ref":"#/$defs/a{j}"}}]}}"##,
                j = i + 1
            )
        })
        .chain(std::iter::once(format!(r#""a{n}":{{"type":"string"}}"#)))
        .collect();
    format!(
        r##"{{"type":"object","properties":{{"x":{{"$ref":"#/$defs/a0"}}}},"$defs":{{{}}}}}"##,
        defs.join(",")
    )
}

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
                .chain(
                    crate::over_limits()
                        .into_iter()
                        .map(|(name, title, input, output)| ToolDescriptor {
                            name,
                            title,
                            description: "over a load limit".into(),
                            input_schema: input,
                            output_schema: output,
                            annotations: Annotations {
                                read_only: true,
                                destructive: false,
                                idempotent: true,
                                open_world: false,
                            },
                        }),
                )
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

    #[test]
    fn regex_schemas_hold_the_regexes_they_say() {
        let v: serde_json::Value = serde_json::from_str(&super::lookahead_regexes()).unwrap();
        assert_eq!(
            v["properties"]["p1"]["pattern"],
            r"^(?=[\s\S]{2404}y)(?=[\s\S]{2405}y)(?=[\s\S]{2406}y)(?=[\s\S]{2407}y)x"
        );
        let v: serde_json::Value = serde_json::from_str(&super::folding_regex()).unwrap();
        let folding = v["properties"]["a"]["pattern"].as_str().unwrap();
        assert!(folding.starts_with(r"^(?=(?i)\p{Any}\p{Any}") && folding.len() < 4096);
        let v: serde_json::Value = serde_json::from_str(&super::hidden_regexes()).unwrap();
        assert!(v["x-hidden"]["p"]["pattern"]
            .as_str()
            .unwrap()
            .starts_with(r"^(?=[\s\S]{2656}y)"));
    }

    #[test]
    fn over_limit_schemas_are_json() {
        for (name, _, input, output) in super::over_limits() {
            for s in std::iter::once(input).chain(output) {
                assert!(
                    serde_json::from_str::<serde_json::Value>(&s).is_ok(),
                    "{name}"
                );
            }
        }
    }
}
