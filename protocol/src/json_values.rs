//! Weighing a JSON text before parsing it: how many values it holds (the
//! rule both ends of the wire use to refuse a message whose parsed form
//! would be many times its size: a 4 MiB body of `[{},{},…]` took ~360 MB)
//! and how much heap its parsed form can take (the rule a tool's result is
//! held to: one 5 MiB result of `[{"":0},…]` took ~600 MB once parsed).

/// A writer that counts the bytes written to it and keeps none: how long
/// a value's JSON is, found by serializing it into this.
#[derive(Debug, Default)]
pub struct ByteCounter(pub usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// About how many JSON values `text` holds, counted without parsing it: its
/// objects and arrays, and the members or items after a first (its commas
/// outside strings). Never fewer than the values a parser makes of it, less
/// its scalars that stand alone. Linear, no allocation.
pub fn json_values(text: &[u8]) -> usize {
    let (mut n, mut i) = (0usize, 0);
    while i < text.len() {
        match text[i] {
            b'"' => i = string_end(text, i + 1),
            b'{' | b'[' | b',' => n += 1,
            _ => {}
        }
        i += 1;
    }
    n
}

/// The index of the `"` closing the string whose content starts at
/// `from` (`text.len()` if it is never closed). Skips to each `"` or `\\`
/// with `memchr`: a result is mostly a few long strings.
fn string_end(text: &[u8], mut from: usize) -> usize {
    while let Some(at) = memchr::memchr2(b'"', b'\\', &text[from.min(text.len())..]) {
        let at = from + at;
        if text[at] == b'"' {
            return at;
        }
        from = at + 2; // the escape and the byte it escapes
    }
    text.len()
}

/// One `serde_json::Value`: the slot an array item or object value takes.
const VALUE: usize = std::mem::size_of::<serde_json::Value>();
/// An array item: its slot, the spare capacity of a vector that doubles as
/// it grows (at most one more), and the old buffer while it moves (one more).
const ARRAY_ITEM: usize = 3 * VALUE;
/// A non-empty array's first buffer: four slots (`Vec`'s first capacity for
/// items this size).
const ARRAY: usize = 4 * VALUE;
/// A non-empty object's first B-tree node: eleven keys and values, rounded
/// up as the allocator does (`serde_json::Map` is a `BTreeMap`).
const OBJECT: usize = 640;
/// Members the first node holds (B-tree nodes hold eleven).
const FIRST_NODE_MEMBERS: u32 = 11;
/// Each member past the first node's: its share of the nodes, which are at
/// least five-elevenths full after a split, and of the inner nodes above
/// them.
const MEMBER: usize = 160;
/// A string's allocation beyond its bytes (the text counts those): the
/// allocator's smallest chunk.
const STRING: usize = 32;
/// Heap per byte of text: the strings made of it (at most its length), and
/// the scratch buffer a string with escapes is unescaped in (kept for the
/// whole parse, doubling as it grows: at most twice the longest).
const TEXT_TIMES: usize = 3;
/// serde_json's recursion limit: its parse fails on the container that
/// would be deeper, so the text past that point is never parsed.
const PARSED_DEPTH: usize = 128;

/// An upper bound of the heap bytes `serde_json::from_slice::<Value>(text)`
/// takes at its peak, computed without parsing: [`TEXT_TIMES`] its bytes
/// (for its strings) plus a price per string, array item, object member
/// and non-empty container, from how `serde_json::Value` stores each on a
/// 64-bit target. Text past a container deeper than serde_json parses is
/// not weighed (its parse fails there). Linear; allocates only a stack of
/// container kinds (at most [`PARSED_DEPTH`]).
pub fn parsed_bytes(text: &[u8]) -> usize {
    let mut weigh = Weigh::default();
    let mut i = 0;
    while i < text.len() {
        if !weigh.byte(text[i]) {
            break; // serde_json's parse stops here
        }
        if text[i] == b'"' {
            i = string_end(text, i + 1);
        }
        i += 1;
    }
    let weighed = i.min(text.len());
    weigh
        .total
        .saturating_add(TEXT_TIMES.saturating_mul(weighed))
}

#[derive(Default)]
struct Weigh {
    total: usize,
    /// Open containers, innermost last: whether each is an object, and
    /// its items so far.
    open: Vec<(bool, u32)>,
    /// Just after `{` or `[`: the next token is a first item or the close.
    opened: bool,
}

impl Weigh {
    /// Weigh one byte outside strings (a `"` opens one, which the caller
    /// skips); `false` where serde_json's parse would stop.
    fn byte(&mut self, b: u8) -> bool {
        if b.is_ascii_whitespace() {
            return true;
        }
        if std::mem::take(&mut self.opened) && b != b'}' && b != b']' {
            self.add(if self.in_object() { OBJECT } else { ARRAY });
            self.add_item();
        }
        match b {
            b'"' => self.add(STRING),
            b',' => self.add_item(),
            b'{' | b'[' if self.open.len() == PARSED_DEPTH => return false,
            b'{' | b'[' => {
                self.open.push((b == b'{', 0));
                self.opened = true;
            }
            b'}' | b']' => {
                self.open.pop();
            }
            _ => {}
        }
        true
    }

    fn add(&mut self, bytes: usize) {
        self.total = self.total.saturating_add(bytes);
    }

    /// One more item of the innermost container: an array's slot, or an
    /// object's member past those its first node holds.
    fn add_item(&mut self) {
        let Some((object, items)) = self.open.last_mut() else {
            return;
        };
        *items += 1;
        let price = match *object {
            true if *items > FIRST_NODE_MEMBERS => MEMBER,
            true => 0,
            false => ARRAY_ITEM,
        };
        self.add(price);
    }

    fn in_object(&self) -> bool {
        self.open.last().is_some_and(|&(object, _)| object)
    }
}

#[cfg(test)]
mod tests {
    use super::{json_values, parsed_bytes};

    #[test]
    fn counts_containers_and_items_outside_strings() {
        assert_eq!(json_values(br#"{"a":[1,2,3]}"#), 4);
        assert_eq!(json_values(br#"{"a":"[{,,}]\",{"}"#), 1);
        assert_eq!(json_values(b"[{},{},{}]"), 6);
        assert_eq!(json_values(b"12"), 0);
    }

    #[test]
    fn empty_containers_and_scalars_cost_their_bytes() {
        assert_eq!(parsed_bytes(b"12"), 3 * 2);
        assert_eq!(parsed_bytes(b"{ }"), 3 * 3);
        assert_eq!(parsed_bytes(b"[]"), 3 * 2);
        // One member: its node and its key's allocation.
        assert_eq!(parsed_bytes(br#"{"a":1}"#), 3 * 7 + 640 + 32);
        // Commas and brackets inside strings are text.
        assert_eq!(parsed_bytes(br#"["[,{"]"#), 3 * 7 + 128 + 96 + 32);
        // serde_json stops at depth 128: nothing past it is weighed.
        let deep = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
        let parsed_part = format!("{}0", "[".repeat(128));
        assert!(parsed_bytes(deep.as_bytes()) <= parsed_bytes(parsed_part.as_bytes()));
        assert!(serde_json::from_str::<serde_json::Value>(&deep).is_err());
    }
}
