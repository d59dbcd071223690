//! The tool-name rule shared by server and client.

/// The rule [`valid_tool_name`] checks, as shown in error messages.
pub const TOOL_NAME_RULE: &str = "[A-Za-z0-9_-]{1,64}";

/// Whether `name` matches [`TOOL_NAME_RULE`].
pub fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
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
}
