//! Binary data inside `structuredContent`.
//!
//! A server may repeat an image's base64 in its structured result (or put
//! any binary payload there as a base64 string or a `data:` URL). Like other
//! non-text content it is stored as an artifact and never reaches the model:
//! the string is replaced by the artifact's reference in the model's copy.
//! The result as sent is kept unchanged for `outputSchema` validation.

use base64::Engine;
use serde_json::Value;

/// Shortest string examined: base64 below this is too small to matter.
pub const MIN_BINARY_CHARS: usize = 256;

/// A binary payload found at `pointer` (a JSON pointer into the result).
#[derive(Debug, Clone, PartialEq)]
pub struct FoundBinary {
    pub pointer: String,
    pub mime: String,
    pub bytes: Vec<u8>,
}

/// Every string of at least [`MIN_BINARY_CHARS`] that is a `data:…;base64,`
/// URL, or plain base64 (mixed case and digits) that does not decode to
/// UTF-8 text. Base64 of text is
/// left alone: it is readable once decoded and may be what the tool meant.
///
/// A shorter string is binary only on a strong signal: a `data:…;base64,`
/// URL; the `data` / `blob` of an object whose `mimeType` is not text (an
/// image block's shape); or base64 of the same bytes as a content block of
/// this result (`known`: their SHA-256), e.g. a tiny image repeated.
pub fn find(value: &Value, known: &[[u8; 32]]) -> Vec<FoundBinary> {
    let mut found = Vec::new();
    walk(value, None, known, &mut String::new(), &mut found);
    found
}

fn walk(
    value: &Value,
    sibling_mime: Option<&str>,
    known: &[[u8; 32]],
    pointer: &mut String,
    found: &mut Vec<FoundBinary>,
) {
    match value {
        Value::String(s) => {
            let binary = decode_binary(s).or_else(|| decode_short(s, sibling_mime, known));
            if let Some((mime, bytes)) = binary {
                found.push(FoundBinary {
                    pointer: pointer.clone(),
                    mime,
                    bytes,
                });
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                walk(item, None, known, pointer, found);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            let mime = ["mimeType", "mime_type", "contentType"]
                .iter()
                .find_map(|k| map.get(*k)?.as_str())
                .filter(|m| !is_text_mime(m));
            for (key, item) in map {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                let payload = matches!(key.as_str(), "data" | "blob");
                walk(item, mime.filter(|_| payload), known, pointer, found);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// The payload of a binary string, with its MIME type.
fn decode_binary(s: &str) -> Option<(String, Vec<u8>)> {
    if s.len() < MIN_BINARY_CHARS {
        return None;
    }
    if let Some(rest) = s.strip_prefix("data:") {
        let (header, data) = rest.split_once(',')?;
        let mime = header.strip_suffix(";base64")?;
        let bytes = decode(data)?;
        let mime = if mime.is_empty() {
            "application/octet-stream"
        } else {
            mime
        };
        return Some((mime.to_string(), bytes));
    }
    let bytes = decode(s)?;
    if std::str::from_utf8(&bytes).is_ok() {
        return None;
    }
    Some(("application/octet-stream".into(), bytes))
}

fn is_text_mime(m: &str) -> bool {
    let m = m.trim().to_ascii_lowercase();
    m.starts_with("text/") || m.ends_with("json") || m.ends_with("xml")
}

/// A string under [`MIN_BINARY_CHARS`] with a strong signal that it is binary.
fn decode_short(
    s: &str,
    sibling_mime: Option<&str>,
    known: &[[u8; 32]],
) -> Option<(String, Vec<u8>)> {
    if let Some(rest) = s.strip_prefix("data:") {
        let (header, data) = rest.split_once(',')?;
        let mime = header.strip_suffix(";base64")?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok()?;
        let mime = if mime.is_empty() {
            "application/octet-stream"
        } else {
            mime
        };
        return Some((mime.to_string(), bytes));
    }
    let data = s.trim();
    if data.len() < 4
        || !data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    if let Some(mime) = sibling_mime {
        return Some((mime.to_string(), bytes));
    }
    use sha2::Digest;
    let digest: [u8; 32] = sha2::Sha256::digest(&bytes).into();
    known
        .contains(&digest)
        .then(|| ("application/octet-stream".to_string(), bytes))
}

fn decode(data: &str) -> Option<Vec<u8>> {
    let data = data.trim();
    let alphabet = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
    // Encoded binary mixes cases and digits; a long word or id does not.
    let mixed = data.bytes().any(|b| b.is_ascii_uppercase())
        && data.bytes().any(|b| b.is_ascii_lowercase())
        && data.bytes().any(|b| b.is_ascii_digit());
    if !mixed || !data.bytes().all(alphabet) {
        return None;
    }
    base64::engine::general_purpose::STANDARD.decode(data).ok()
}

/// `value` with the string at each `(pointer, text)` replaced by `text`.
pub fn replaced(value: &Value, replacements: &[(String, String)]) -> Value {
    let mut copy = value.clone();
    for (pointer, text) in replacements {
        if let Some(slot) = copy.pointer_mut(pointer) {
            *slot = Value::String(text.clone());
        }
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn binary_strings_are_found_anywhere_and_text_is_left_alone() {
        let png: Vec<u8> = (0..600u32).map(|i| (i * 7 % 256) as u8).collect();
        let text_b64 = b64("plain words ".repeat(40).as_bytes());
        let v = json!({
            "image": {"data": b64(&png), "mimeType": "image/png"},
            "list": ["short", format!("data:image/gif;base64,{}", b64(&png))],
            "a/b~c": b64(&png),
            "readable": text_b64,
            "prose": "x".repeat(1000),
        });
        let found = find(&v, &[]);
        let pointers: Vec<&str> = found.iter().map(|f| f.pointer.as_str()).collect();
        assert_eq!(pointers, ["/a~1b~0c", "/image/data", "/list/1"]);
        assert!(found.iter().all(|f| f.bytes == png));
        assert_eq!(found[2].mime, "image/gif");
        assert_eq!(found[1].mime, "application/octet-stream");
        let r = replaced(&v, &[("/image/data".into(), "[artifact]".into())]);
        assert_eq!(r["image"]["data"], "[artifact]");
        assert_eq!(v["image"]["data"], b64(&png), "the original is unchanged");
    }

    #[test]
    fn a_tiny_image_is_found_by_its_shape_or_its_content_block() {
        use sha2::Digest;
        // A 1x1 PNG is 67 bytes: 92 base64 chars, under MIN_BINARY_CHARS.
        let tiny: Vec<u8> = (0..67u8).map(|i| i.wrapping_mul(37) ^ 0x89).collect();
        let known: [u8; 32] = sha2::Sha256::digest(&tiny).into();
        let v = json!({
            "image": {"type": "image", "data": b64(&tiny), "mimeType": "image/png"},
            "copy": b64(&tiny),
            "url": format!("data:image/gif;base64,{}", b64(&tiny)),
            "id": "AbCdEf0123456789",
            "doc": {"data": "SGVsbG8=", "mimeType": "text/plain"},
            "word": "data",
        });
        let found = find(&v, &[known]);
        let pointers: Vec<&str> = found.iter().map(|f| f.pointer.as_str()).collect();
        assert_eq!(pointers, ["/copy", "/image/data", "/url"]);
        assert!(found.iter().all(|f| f.bytes == tiny));
        assert_eq!(found[1].mime, "image/png");
        // Without the content block, the bare copy is not flagged: short ids stay.
        let found = find(&v, &[]);
        assert_eq!(found.len(), 2, "{found:?}");
    }
}
