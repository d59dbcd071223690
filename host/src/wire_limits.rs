//! Every response fits the wire: the bytes actually written for a
//! `tools/call` answer are measured on the serialized result (structured
//! content, text block and `_meta` together, errors included).

use rmcp::model::{CallToolResult, ContentBlock, RequestId};
use serde_json::Value;
use wasm_mcp_protocol::{text, ByteCounter, ErrorKind, ERROR_KIND_META};

/// Default cap on one serialized response: 15 MiB, under the 16 MiB line
/// limit of rmcp's stdio transport (and other common clients).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 15 << 20;

/// Longest tool-error message sent, in bytes; the rest is cut with a note.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 64 << 10;

/// Default cap on a successful result's text block. The block mirrors the
/// structured result (the guest's JSON, as the spec's backwards-compatibility
/// SHOULD asks) in full up to this size; a larger result is sent whole once,
/// in `structuredContent`, and its text block holds the head and a note. The
/// content is not paid for twice (serialized, written, parsed by the client)
/// where clients read `structuredContent`, as every client of a revision we
/// serve (2025-06-18 and later) can.
pub const DEFAULT_TEXT_MIRROR_BYTES: usize = 64 << 10;

/// JSON-RPC envelope around a result: `{"jsonrpc":"2.0","id":…,"result":…}\n`.
const ENVELOPE_BYTES: usize = 64;

/// An error result with `_meta[ERROR_KIND_META]`; the message is capped at
/// [`MAX_ERROR_MESSAGE_BYTES`].
pub fn error_result(text: String, kind: ErrorKind) -> CallToolResult {
    let mut r = CallToolResult::error(vec![ContentBlock::text(cap_message(text))]);
    let mut meta = rmcp::model::MetaObject::new();
    meta.insert(ERROR_KIND_META.into(), Value::String(kind.as_str().into()));
    r.meta = Some(meta);
    r
}

/// The text block of a successful result whose structured content is the
/// JSON `text`: `text` itself when it is at most `max_bytes`, else its head
/// (char boundary) and a note saying where the whole result is.
pub fn text_mirror(text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let note = format!(
        " … [text mirror cut at {max_bytes} of {} bytes: the whole result is in structuredContent]",
        text.len()
    );
    text::truncate_marked(text, max_bytes, &note)
}

/// Cut `text` to [`MAX_ERROR_MESSAGE_BYTES`] (on a char boundary), noting how
/// much was cut.
pub fn cap_message(text: String) -> String {
    if text.len() <= MAX_ERROR_MESSAGE_BYTES {
        return text; // the common case: no note to format
    }
    let total = text.len();
    let shown = text::head_bytes(&text, MAX_ERROR_MESSAGE_BYTES).len();
    let note = format!(
        " … [message cut: {} of {total} bytes not shown]",
        total - shown
    );
    text::truncate_marked(text, MAX_ERROR_MESSAGE_BYTES, &note)
}

/// Bytes the response carrying `result` for request `id` takes on the wire
/// (an upper bound: the envelope is counted generously).
pub fn response_bytes(result: &CallToolResult, id: &RequestId) -> usize {
    let mut counter = ByteCounter(0);
    let body = serde_json::to_writer(&mut counter, result)
        .and_then(|()| serde_json::to_writer(&mut counter, id));
    match body {
        Ok(()) => counter.0 + ENVELOPE_BYTES,
        Err(_) => usize::MAX,
    }
}

/// What is known of a result's size before serializing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeHint {
    /// Nothing: measure the serialized result.
    Unknown,
    /// At most this many bytes in the response (see [`structured_bound`]).
    AtMost(usize),
}

/// An upper bound on the response bytes of a successful result whose
/// structured content was parsed from `source_len` bytes of JSON holding
/// `numbers` numbers, and whose text block has `mirror_len` bytes of that
/// JSON (plus, when cut, an ASCII note), without serializing anything:
/// * serde_json re-serializes strings and structure at most as long as
///   they were (escapes only shrink, `\u00e9` → `é`; whitespace goes);
/// * a number grows at most to 24 bytes (`1e15` → `1000000000000000.0`);
/// * in the text block, only `"`, `\` and whitespace of a JSON text need
///   escaping (raw control characters are not valid JSON), two bytes each.
///
/// The rest (content block, `isError`, `_meta`, envelope, id) is allowed for
/// generously.
pub fn structured_bound(
    source_len: usize,
    numbers: usize,
    mirror_len: usize,
    id: &RequestId,
) -> usize {
    let id_bytes = serde_json::to_string(id).map_or(usize::MAX / 4, |s| s.len());
    source_len
        .saturating_add(numbers.saturating_mul(23))
        .saturating_add(mirror_len.saturating_mul(2))
        .saturating_add(id_bytes)
        .saturating_add(1024)
}

/// Numbers in `v` (each may re-serialize longer than it was written).
pub fn count_numbers(v: &Value) -> usize {
    match v {
        Value::Number(_) => 1,
        Value::Array(items) => items.iter().map(count_numbers).sum(),
        Value::Object(map) => map.values().map(count_numbers).sum(),
        _ => 0,
    }
}

/// `result` if its response fits `max_bytes`, else an `output_too_large`
/// error saying how large it would have been. A bound under the limit
/// spares the measuring pass (a whole extra serialization of a large
/// result).
pub fn fit_response(
    result: CallToolResult,
    hint: SizeHint,
    id: &RequestId,
    tool: &str,
    max_bytes: usize,
) -> CallToolResult {
    if let SizeHint::AtMost(bound) = hint {
        if bound <= max_bytes {
            return result;
        }
    }
    let bytes = response_bytes(&result, id);
    if bytes <= max_bytes {
        return result;
    }
    tracing::warn!(tool, bytes, max_bytes, "response too large for the wire");
    error_result(
        format!(
            "the response of {tool} would be {bytes} bytes once serialized, over the response limit of {max_bytes} bytes (--max-response-bytes)"
        ),
        ErrorKind::OutputTooLarge,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_100_mib_error_message_is_cut_with_a_note() {
        let r = error_result("é".repeat(50 << 20), ErrorKind::ToolError);
        let id = RequestId::Number(7);
        assert!(response_bytes(&r, &id) < 2 * MAX_ERROR_MESSAGE_BYTES);
        let text = serde_json::to_value(&r).unwrap()["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(text.contains("not shown]"), "{}", &text[text.len() - 80..]);
        assert!(text.contains(&format!("of {} bytes", 100 << 20)));
        assert_eq!(cap_message("short".into()), "short");
    }

    #[test]
    fn large_results_are_mirrored_in_text_only_in_part() {
        let small = r#"{"a":"é"}"#.to_string();
        assert_eq!(text_mirror(small.clone(), small.len()), small);
        let big = format!(r#"{{"a":"{}"}}"#, "é".repeat(1000));
        let cut = text_mirror(big.clone(), 101); // byte 101 is inside an `é`
        assert!(cut.len() < 300 && cut.starts_with(&big[..100]) && !cut.starts_with(&big[..102]));
        assert!(
            cut.ends_with(&format!(
                "[text mirror cut at 101 of {} bytes: the whole result is in structuredContent]",
                big.len()
            )),
            "{cut}"
        );
    }

    /// The bound holds for JSON that re-serializes longer (numbers), shorter
    /// (escapes, whitespace) or the same, with the mirror whole or cut.
    #[test]
    fn the_structured_bound_is_never_under_the_real_size() {
        let texts = [
            r#"{"a":"plain"}"#.to_string(),
            format!(r#"{{"n":[{}1]}}"#, "1e15,".repeat(5000)),
            format!(r#"{{"n":[{}1]}}"#, "-1.5e-300,".repeat(2000)),
            format!(r#"{{"n":[{}1]}}"#, "18446744073709551616,".repeat(1000)),
            format!(r#"{{"s":"{}"}}"#, r#"\\\"\n\t\u0001"#.repeat(4000)),
            format!(r#"{{"s":"{}"}}"#, r#"\u00e9\ud83d\ude00é/"#.repeat(4000)),
            format!(
                "{{\n  \"deep\": {}1{} }}",
                "[ ".repeat(100),
                " ]".repeat(100)
            ),
            format!(r#"{{"k{}":null,"t":true,"f":false}}"#, r#"\""#.repeat(100)),
        ];
        for ids in [
            RequestId::Number(7),
            RequestId::String("x\"y".repeat(50).into()),
        ] {
            for text in &texts {
                let value: Value = serde_json::from_str(text).unwrap();
                let numbers = count_numbers(&value);
                for cap in [usize::MAX, 100] {
                    let mirror = text_mirror(text.clone(), cap);
                    let bound = structured_bound(text.len(), numbers, mirror.len(), &ids);
                    let mut r = CallToolResult::structured(value.clone());
                    r.content = vec![ContentBlock::text(mirror)];
                    let mut meta = rmcp::model::MetaObject::new();
                    meta.insert(
                        "io.modelcontextprotocol/serverInfo".into(),
                        json!({"name": "wasm-mcp", "version": "0.1.0"}),
                    );
                    r.meta = Some(meta);
                    let actual =
                        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": ids, "result": r}))
                            .unwrap()
                            .len();
                    assert!(bound >= actual, "bound {bound} < {actual} for {:.80}", text);
                    assert!(bound >= response_bytes(&r, &ids), "{:.80}", text);
                }
            }
        }
    }

    #[test]
    fn size_is_measured_after_reserialization() {
        // 1 MiB of `1e9,` re-serializes as `1000000000.0,`: over 3 MiB.
        let text = format!("{{\"n\":[{}1]}}", "1e9,".repeat(1 << 18));
        let value: Value = serde_json::from_str(&text).unwrap();
        let mut r = CallToolResult::structured(value);
        r.content = vec![ContentBlock::text(text.clone())];
        let id = RequestId::Number(1);
        let bytes = response_bytes(&r, &id);
        let actual = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "result": r}))
            .unwrap()
            .len();
        assert!(
            bytes >= actual && bytes > 4 * text.len(),
            "{bytes} vs {actual}"
        );
        let fitted = fit_response(r.clone(), SizeHint::Unknown, &id, "t", 2 << 20);
        assert_eq!(fitted.is_error, Some(true));
        assert_eq!(
            fitted.meta.as_ref().unwrap().get(ERROR_KIND_META),
            Some(&json!("output_too_large"))
        );
        assert!(response_bytes(&fitted, &id) < 1024);
        assert_eq!(
            fit_response(r, SizeHint::Unknown, &id, "t", bytes).is_error,
            Some(false)
        );
    }
}
