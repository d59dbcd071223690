//! Argument and result validation against compiled schemas.

use jsonschema::ValidationError;
use serde_json::Value;

use crate::text::{display_clipped, display_within, SHOWN_TEXT_BYTES};

/// Validate `value`; on failure, its first error as
/// `<JSON pointer>: <message>` (the root is shown as `(root)`). This is the
/// one error format for arguments and results, server and client.
///
/// Only the first: jsonschema's `iter_errors` builds *every* error before
/// its iterator yields one, and one keyword can make thousands (`required`
/// with 9,000 names against 330 empty objects, priced 996: 1.2 s and
/// 972 MB; a helper's find), where `validate` stops at the first.
pub fn validate(schema: &jsonschema::Validator, value: &Value) -> Result<(), String> {
    schema.validate(value).map_err(|e| describe(&e))
}

/// One validator error as `<JSON pointer>: <message>` (the root shown as
/// `(root)`), each part at most [`SHOWN_TEXT_BYTES`]: the message with the
/// value it quotes when that fits, else without it ("value is not one of
/// …"): the value may be a plugin's megabytes, and the rule says why.
pub fn describe(e: &ValidationError<'_>) -> String {
    let at = display_clipped(e.instance_path(), SHOWN_TEXT_BYTES);
    let at = if at.is_empty() { "(root)".into() } else { at };
    let message = display_within(e, SHOWN_TEXT_BYTES)
        .unwrap_or_else(|_| display_clipped(&e.masked(), SHOWN_TEXT_BYTES));
    format!("{at}: {message}")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{compile_schema, parse_object_schema};
    use serde_json::json;

    #[test]
    fn arguments_and_results_are_validated() {
        let schema = parse_object_schema(
            r#"{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"],"additionalProperties":false}"#,
            "s",
        )
        .unwrap();
        let v = compile_schema(&schema, "s", crate::SchemaUse::Results).unwrap();
        assert!(validate(&v, &json!({"n": 3})).is_ok());
        // Two errors; the first is reported, with where it is.
        let e = validate(&v, &json!({"n": 0, "extra": 1})).unwrap_err();
        let one_of_them = e.starts_with("/n: 0 is less than the minimum of 1")
            || e.starts_with("(root): Additional properties are not allowed ('extra'");
        assert!(one_of_them && !e.contains("; "), "{e}");
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

    /// One keyword can make thousands of errors (`required` with 9,000
    /// names against empty objects: `iter_errors` built them all, 1.2 s and
    /// 972 MB for 330 objects, priced 996); the first is all that is built.
    #[test]
    fn only_the_first_error_is_built() {
        let names: Vec<String> = (0..9000).map(|i| i.to_string()).collect();
        let schema = serde_json::json!({"type": "object", "properties": {
            "a": {"type": "array", "items": {"required": names}}}});
        let v = crate::schema::compile_value(&schema, crate::SchemaUse::Arguments).unwrap();
        let value = json!({"a": vec![json!({}); 330]});
        let started = std::time::Instant::now();
        let e = validate(&v, &value).unwrap_err();
        assert!(e.starts_with("/a/0: \"0\" is a required property"), "{e}");
        assert!(
            started.elapsed() < std::time::Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
    }

    /// What a hostile guest can return as its result text: each is a clean
    /// "not valid JSON" error (never a stack overflow or a panic), and the
    /// legitimate extremes parse whole.
    #[test]
    fn hostile_result_texts_are_refused_cleanly() {
        let nest = |depth: usize| format!("{{\"a\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
        let e = check_result(&nest(1_000_000), None).unwrap_err();
        assert!(e.starts_with("result is not valid JSON: "), "{e}");
        let says = e.to_lowercase();
        assert!(
            says.contains("recursion") || says.contains("nesting"),
            "{e}"
        );
        assert!(check_result(&nest(100), None).is_ok());
        for bad in [
            r#"{"s":"\ud800"}"#,       // lone leading surrogate
            r#"{"s":"\udc00"}"#,       // lone trailing surrogate
            r#"{"s":"\ud800\u0041"}"#, // leading surrogate, then no trailing one
            "{\"s\":\"a\u{1}b\"}",     // raw control character in a string
            r#"{"s":"\x"}"#,           // unknown escape
            r#"{"n":1e999}"#,          // out of f64's range
            r#"{"a":1,}"#,             // trailing comma
            "{} {}",                   // a second value
            "{\"a\":1",                // cut short
            "",
        ] {
            let e = check_result(bad, None).unwrap_err();
            assert!(e.starts_with("result is not valid JSON: "), "{bad:?}: {e}");
        }
        let pair = check_result(r#"{"s":"\ud83d\ude00","e":"\u00e9\n"}"#, None).unwrap();
        assert_eq!(pair, json!({"s": "😀", "e": "é\n"}));
        assert_eq!(
            check_result(r#"{"a":1,"a":2}"#, None).unwrap(),
            json!({"a": 2})
        );
        assert_eq!(
            check_result(r#" {"big":18446744073709551615,"neg":-1.5e300} "#, None).unwrap(),
            json!({"big": 18446744073709551615u64, "neg": -1.5e300})
        );
    }
}
