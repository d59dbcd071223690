//! Text bounds on char boundaries: descriptions and other model- or
//! client-visible text, and what a log line shows of text a plugin made.
//! One family, so every cap cuts the same way.

use std::fmt;

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

/// Bytes of plugin-made text (an error, a refusal reason, a validator's
/// message quoting a value) one log line or message item shows.
pub const SHOWN_TEXT_BYTES: usize = 1024;

/// Bytes of a trap's or a refused load's detail (a wasm backtrace, a
/// validator's or linker's message naming the component's own names) one
/// log line shows.
pub const LOG_DETAIL_BYTES: usize = 4 << 10;

/// What [`display_clipped`] appends to text it cut.
pub const CUT_MARK: &str = " … [cut]";

/// `value` formatted, when that takes at most `max_bytes`; else `Err` with
/// the head written so far. The formatting itself stops at the bound, so a
/// huge value is never written out whole. Control characters are escaped
/// (`\n`, `\u{1b}`: counted in the bound), so a plugin's text cannot start
/// a line of its own in a log.
pub fn display_within(value: &dyn fmt::Display, max_bytes: usize) -> Result<String, String> {
    let mut w = Bounded {
        out: String::new(),
        max: max_bytes,
        cut: false,
    };
    let _ = fmt::write(&mut w, format_args!("{value}"));
    match w.cut {
        false => Ok(w.out),
        true => Err(w.out),
    }
}

/// `value` formatted, at most `max_bytes` of it and [`CUT_MARK`] when cut.
pub fn display_clipped(value: &dyn fmt::Display, max_bytes: usize) -> String {
    display_within(value, max_bytes).unwrap_or_else(|head| head + CUT_MARK)
}

/// A `fmt::Write` that keeps at most `max` bytes, control characters
/// escaped, then fails every write.
struct Bounded {
    out: String,
    max: usize,
    cut: bool,
}

impl fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.cut {
            return Err(fmt::Error);
        }
        for c in s.chars() {
            let start = self.out.len();
            match c.is_control() {
                true => self.out.extend(c.escape_debug()),
                false => self.out.push(c),
            }
            if self.out.len() > self.max {
                self.out.truncate(start);
                self.cut = true;
                return Err(fmt::Error);
            }
        }
        Ok(())
    }
}

/// Cap a description at [`MAX_DESCRIPTION`] chars.
pub fn cap_description(d: &str) -> String {
    head_chars(d, MAX_DESCRIPTION).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_stops_at_its_bound() {
        let big = "é".repeat(1 << 20);
        assert_eq!(display_within(&"short", 8), Ok("short".into()));
        let head = display_within(&big, 9).unwrap_err();
        assert_eq!(head, "éééé");
        assert_eq!(display_clipped(&big, 9), format!("éééé{CUT_MARK}"));
        // A value that writes in many small pieces stops too.
        let pieces = format_args!("{}{}{}", "ab", "cd", "ef");
        assert_eq!(display_clipped(&pieces, 3), format!("abc{CUT_MARK}"));
        // A forged log line stays on the line it was written on.
        let forged = "x\n2026-12-05T00:00:00Z ERROR forged\r\u{1b}[2J";
        let shown = display_clipped(&forged, 1024);
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert!(shown.starts_with("x\\n2026") && shown.ends_with("\\u{1b}[2J"));
        // An escape is counted whole against the bound, never split.
        assert_eq!(display_within(&"ab\n", 3), Err("ab".into()));
    }

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
