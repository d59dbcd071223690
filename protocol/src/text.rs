//! Text bounds on char boundaries: descriptions and other model- or
//! client-visible text. One family, so every cap cuts the same way.

/// Longest description passed on to clients (in chars).
pub const MAX_DESCRIPTION: usize = 2000;

/// The first `max_chars` chars of `s`.
pub fn head_chars(s: &str, max_chars: usize) -> &str {
    match s.char_indices().nth(max_chars) {
        Some((end, _)) => &s[..end],
        None => s,
    }
}

/// The longest prefix of `s` of at most `max_bytes` bytes, cut on a char boundary.
pub fn head_bytes(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The longest suffix of `s` of at most `max_bytes` bytes, cut on a char boundary.
pub fn tail_bytes(s: &str, max_bytes: usize) -> &str {
    let mut start = s.len().saturating_sub(max_bytes);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Cut `s` to at most `max_bytes` bytes (char boundary) and append `marker`
/// when anything was cut.
pub fn truncate_marked(mut s: String, max_bytes: usize, marker: &str) -> String {
    if s.len() > max_bytes {
        let keep = head_bytes(&s, max_bytes).len();
        s.truncate(keep);
        s.push_str(marker);
    }
    s
}

/// Cap a description at [`MAX_DESCRIPTION`] chars.
pub fn cap_description(d: &str) -> String {
    head_chars(d, MAX_DESCRIPTION).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_capped_in_chars() {
        assert_eq!(
            cap_description(&"é".repeat(3000)).chars().count(),
            MAX_DESCRIPTION
        );
        assert_eq!(cap_description("short"), "short");
    }

    #[test]
    fn cuts_land_on_char_boundaries() {
        let s = "aé€😀"; // 1 + 2 + 3 + 4 bytes
        assert_eq!(head_chars(s, 2), "aé");
        assert_eq!(head_chars(s, 10), s);
        assert_eq!(head_bytes(s, 4), "aé");
        assert_eq!(head_bytes(s, 6), "aé€");
        assert_eq!(head_bytes(s, 100), s);
        assert_eq!(tail_bytes(s, 5), "😀");
        assert_eq!(tail_bytes(s, 7), "€😀");
        assert_eq!(tail_bytes(s, 100), s);
        assert_eq!(truncate_marked(s.into(), 2, "[cut]"), "a[cut]");
        assert_eq!(truncate_marked(s.into(), 10, "[cut]"), s);
    }
}
