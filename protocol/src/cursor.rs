//! Opaque pagination cursors for `tools/list`.

use base64::Engine as _;

const CURSOR: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Opaque pagination cursor: the id of the tool list it pages through (the
/// server's `Catalog::list_id`) + offset, base64url.
pub fn encode_cursor(list: u64, offset: usize) -> String {
    CURSOR.encode(format!("v1:{list}:{offset}"))
}

/// Decode a cursor made by [`encode_cursor`]; `None` for anything else.
pub fn decode_cursor(cursor: &str) -> Option<(u64, usize)> {
    if cursor.len() > 128 {
        return None;
    }
    let raw = CURSOR.decode(cursor).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let mut parts = text.split(':');
    if parts.next()? != "v1" {
        return None;
    }
    let version = parts.next()?.parse().ok()?;
    let offset = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((version, offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_roundtrip_and_garbage() {
        let c = encode_cursor(7, 50);
        assert_eq!(decode_cursor(&c), Some((7, 50)));
        assert_eq!(decode_cursor("not-a-cursor"), None);
        assert_eq!(decode_cursor(""), None);
        assert_eq!(decode_cursor(&"A".repeat(1000)), None);
        let extra = CURSOR.encode("v1:1:2:3");
        assert_eq!(decode_cursor(&extra), None);
        let neg = CURSOR.encode("v1:1:-2");
        assert_eq!(decode_cursor(&neg), None);
    }
}
