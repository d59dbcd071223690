//! Counting a JSON text's values before parsing it: the one rule both ends
//! of the wire use to refuse a message whose parsed form would be many
//! times its size (each value takes tens of bytes once parsed: a 4 MiB
//! body of `[{},{},…]` took ~360 MB).

/// About how many JSON values `text` holds, counted without parsing it: its
/// objects and arrays, and the members or items after a first (its commas
/// outside strings). Never fewer than the values a parser makes of it, less
/// its scalars that stand alone. Linear, no allocation.
pub fn json_values(text: &[u8]) -> usize {
    let (mut n, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b'{' | b'[' | b',' => n += 1,
                _ => {}
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::json_values;

    #[test]
    fn counts_containers_and_items_outside_strings() {
        assert_eq!(json_values(br#"{"a":[1,2,3]}"#), 4);
        assert_eq!(json_values(br#"{"a":"[{,,}]\",{"}"#), 1);
        assert_eq!(json_values(b"[{},{},{}]"), 6);
        assert_eq!(json_values(b"12"), 0);
    }
}
