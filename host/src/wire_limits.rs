//! Every response fits the wire: the bytes actually written for a
//! `tools/call` answer are measured on the serialized result (structured
//! content, text block and `_meta` together, errors included).

use rmcp::model::{CallToolResult, ContentBlock, RequestId};
use serde_json::Value;
use wasm_mcp_protocol::{text, ErrorKind, ERROR_KIND_META};

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

/// `result` if its response fits `max_bytes`, else an `output_too_large`
/// error saying how large it would have been.
pub fn fit_response(
    result: CallToolResult,
    id: &RequestId,
    tool: &str,
    max_bytes: usize,
) -> CallToolResult {
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

/// Counts bytes written without keeping them.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
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
        let fitted = fit_response(r.clone(), &id, "t", 2 << 20);
        assert_eq!(fitted.is_error, Some(true));
        assert_eq!(
            fitted.meta.as_ref().unwrap().get(ERROR_KIND_META),
            Some(&json!("output_too_large"))
        );
        assert!(response_bytes(&fitted, &id) < 1024);
        assert_eq!(fit_response(r, &id, "t", bytes).is_error, Some(false));
    }
}
