//! The tool-name rule shared by server and client, and how a declared name
//! that breaks it is shown.

use std::borrow::Cow;

use crate::text::head_bytes;

/// The rule [`valid_tool_name`] checks, as shown in error messages.
pub const TOOL_NAME_RULE: &str = "[A-Za-z0-9_-]{1,64}";

/// Whether `name` matches [`TOOL_NAME_RULE`].
pub fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Most bytes of a declared name that messages and logs show: every valid
/// name fits; a longer one (a plugin may declare megabytes) is cut.
pub const SHOWN_NAME_BYTES: usize = 64;

/// A declared tool name as messages and logs show it: whole when it is at
/// most [`SHOWN_NAME_BYTES`], else its head (on a char boundary) and `…`.
pub fn shown_name(name: &str) -> Cow<'_, str> {
    if name.len() <= SHOWN_NAME_BYTES {
        return Cow::Borrowed(name);
    }
    Cow::Owned(format!("{}…", head_bytes(name, SHOWN_NAME_BYTES)))
}

/// [`shown_name`] quoted, with the name's length when it was cut:
/// `"bad name!"`, `"nnnn…" (4194304 bytes)`.
pub fn quoted_name(name: &str) -> String {
    let shown = shown_name(name);
    match shown {
        Cow::Borrowed(_) => format!("{shown:?}"),
        Cow::Owned(_) => format!("{shown:?} ({} bytes)", name.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(valid_tool_name("read_file"));
        assert!(valid_tool_name("a-b_C9"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("has space"));
        assert!(!valid_tool_name("dot.ted"));
        assert!(!valid_tool_name(&"x".repeat(65)));
    }

    #[test]
    fn long_names_are_shown_by_their_head_and_length() {
        assert_eq!(quoted_name("bad name!"), r#""bad name!""#);
        let long = "é".repeat(1 << 20);
        let quoted = quoted_name(&long);
        assert_eq!(quoted, format!("\"{}…\" (2097152 bytes)", "é".repeat(32)));
        assert_eq!(shown_name(&"x".repeat(64)), "x".repeat(64));
        assert!(shown_name(&"x".repeat(65)).ends_with("x…"));
    }
}
