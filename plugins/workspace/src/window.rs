//! `read_file`'s core: a window of a file's lines, read a chunk at a time
//! and written straight into the result's JSON text as an escaped string.
//!
//! The file is never held whole: each chunk is checked as UTF-8 (invalid
//! sequences become U+FFFD, as `String::from_utf8_lossy` does over the
//! whole file), its line ends are counted, and the part inside the window
//! is escaped onto the end of the output. A large read touches the output's
//! pages and one small buffer, not a second copy of the file: in a fresh
//! instance every page touched is a page fault, and reading the whole file
//! first was ~0.7 ms of a 1.9 MB read served (the copy into guest memory,
//! faulting in ~460 pages). The three passes over each chunk use wasm
//! SIMD (`simd128`): `simdutf8` for the UTF-8 check, `memchr` for line
//! ends, `sonic-rs` for the escaping.
//!
//! The escaped text is bounded too (`max_out` bytes): escaping can make
//! it up to 6× the bytes read (`\u0001`), more than the host lets a tool
//! return. Each chunk's part is escaped in two calls, split after its last
//! line end, so the output's length at the window's last complete line is
//! known without another pass; only the part that goes over the bound is
//! looked at again, once, to find where to cut.

use std::io;

use wasm_mcp_guest::fs::ReadChunk;

use sonic_rs::format::{CompactFormatter, Formatter};

/// Bytes read at a time: 16 pages touched besides the output's, and ~30
/// reads for the 2 MiB cap, whose per-read cost is noise next to the copy.
pub const CHUNK: usize = 64 << 10;

/// What [`stream_window`] counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Lines of the text read (at most `cap` bytes), as
    /// `str::split_inclusive('\n')` counts them: a last line without `\n`
    /// counts, an empty text has none.
    pub total_lines: u64,
    /// Lines `offset..offset + limit` of them that exist.
    pub lines_returned: u64,
    /// Bytes read (at most `cap`).
    pub bytes_read: u64,
    /// The source had more than `cap` bytes.
    pub capped: bool,
    /// The window's escaped text was longer than `max_out` bytes, so it was
    /// cut: after the last whole line that fits, or, when not even the
    /// window's first line fits, inside that line after the last character
    /// that fits (never inside a character or an escape). `lines_returned`
    /// counts the lines written, a cut line included (as the `cap` cutting
    /// a line counts it), so `offset + lines_returned` is where to go on.
    pub cut: bool,
}

/// Reads at most `cap` bytes of `src`, `chunk` at a time, and appends lines
/// `offset..offset + limit` of it (terminators included), as UTF-8 with
/// invalid sequences replaced, JSON-escaped without quotes, to `out`: at
/// most `max_out` bytes of it (see [`Window::cut`]). Each chunk is decoded
/// where the source put it: a character cut by a chunk's end (at most 3
/// bytes kept) is finished with the next chunk's first bytes.
pub fn stream_window(
    mut src: impl ReadChunk,
    chunk: usize,
    cap: u64,
    offset: u64,
    limit: u64,
    max_out: usize,
    out: &mut Vec<u8>,
) -> io::Result<Window> {
    let chunk = chunk.max(4);
    let mut lines = Lines::new(offset, limit, out.len(), max_out);
    // The bytes of an unfinished UTF-8 sequence left by the last chunk.
    let mut carry: Vec<u8> = Vec::new();
    let mut read = 0u64;
    loop {
        let room = chunk.min(usize::try_from(cap - read).unwrap_or(usize::MAX));
        let data = if room == 0 {
            Vec::new()
        } else {
            src.read_chunk(room)?
        };
        read += data.len() as u64;
        let at_end = data.is_empty() || read == cap;
        let start = finish_carry(&mut carry, &data, at_end, |s| lines.push(s, out));
        let rest = &data[start..];
        if !rest.is_empty() || at_end {
            let used = decode_lossy(rest, at_end, |s| lines.push(s, out));
            carry.extend_from_slice(&rest[used..]);
        }
        if at_end {
            let capped = read == cap && !src.read_chunk(1)?.is_empty();
            return Ok(lines.finish(read, capped));
        }
    }
}

/// Finishes the character `carry` holds the start of (what the last chunk
/// ended inside) with the first bytes of `data` (at most 3), passing its
/// text to `emit`, and returns where the rest of `data` starts. `carry` is
/// left empty, or, when `data` ran out before the character did, holding
/// all of it. Decoding the two apart is decoding them whole: the carry
/// starts at a character, and a piece cut again is cut as
/// [`unfinished_tail`] cuts.
fn finish_carry(carry: &mut Vec<u8>, data: &[u8], at_end: bool, emit: impl FnOnce(&str)) -> usize {
    if carry.is_empty() {
        return 0;
    }
    let head = (4 - carry.len()).min(data.len());
    carry.extend_from_slice(&data[..head]);
    let used = decode_lossy(carry, at_end && head == data.len(), emit);
    let unused = carry.len() - used;
    if unused > head {
        // Still unfinished, and `data` (all of it in `carry` now) used up.
        carry.drain(..used);
        return data.len();
    }
    carry.clear();
    head - unused
}

/// Passes the text of `bytes` to `emit`, with U+FFFD for each invalid
/// sequence (`String::from_utf8_lossy`, per chunk: a chunk with invalid
/// bytes is decoded once into a new string, not handed on a piece at a
/// time, which made a file of invalid bytes ~5× slower than decoding it
/// whole; a reviewer's find). An unfinished sequence at the end is left
/// unread (the count returned stops before it) unless `at_end`, where it
/// is invalid too.
fn decode_lossy(bytes: &[u8], at_end: bool, emit: impl FnOnce(&str)) -> usize {
    let end = bytes.len() - if at_end { 0 } else { unfinished_tail(bytes) };
    let text = &bytes[..end];
    match simdutf8::basic::from_utf8(text) {
        Ok(text) => emit(text),
        Err(_) => emit(&String::from_utf8_lossy(text)),
    }
    end
}

/// The length of the UTF-8 sequence that `bytes` ends in the middle of
/// (at most 3), or 0. It starts at the last byte that is not a
/// continuation byte, so decoding what comes before it cannot reach into
/// it: cutting there decodes as the whole would.
fn unfinished_tail(bytes: &[u8]) -> usize {
    let from = bytes.len().saturating_sub(3);
    let Some(lead) = bytes[from..].iter().rposition(|&b| b & 0xc0 != 0x80) else {
        return 0;
    };
    let tail = &bytes[from + lead..];
    match std::str::from_utf8(tail) {
        Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => tail.len(),
        _ => 0,
    }
}

/// Counts lines as text arrives and writes the window's part of it.
struct Lines {
    offset: u64,
    end: u64,
    /// `\n`s seen: the index of the line the next byte belongs to.
    line: u64,
    /// Whether the text so far is empty, and whether it ends with `\n`.
    empty: bool,
    ends_with_newline: bool,
    /// Where the window's text starts in `out`, and the most it may take.
    start: usize,
    max_out: usize,
    /// Whole lines of the window written, and `out`'s length after them.
    whole: u64,
    whole_end: usize,
    /// Lines written when the bound cut the window (nothing is written
    /// after that).
    cut: Option<u64>,
}

impl Lines {
    fn new(offset: u64, limit: u64, start: usize, max_out: usize) -> Self {
        Lines {
            offset,
            end: offset.saturating_add(limit),
            line: 0,
            empty: true,
            ends_with_newline: false,
            start,
            max_out,
            whole: 0,
            whole_end: start,
            cut: None,
        }
    }

    /// The window's bytes of `text` (one contiguous range, since lines only
    /// move forward) are escaped onto `out`.
    fn push(&mut self, text: &str, out: &mut Vec<u8>) {
        let Some(&last) = text.as_bytes().last() else {
            return;
        };
        self.empty = false;
        self.ends_with_newline = last == b'\n';
        let first = self.line;
        let mut from = (self.line >= self.offset).then_some(0);
        let mut to = (self.line >= self.end).then_some(0);
        for nl in memchr::memchr_iter(b'\n', text.as_bytes()) {
            self.line += 1;
            if from.is_none() && self.line == self.offset {
                from = Some(nl + 1);
            }
            if to.is_none() && self.line == self.end {
                to = Some(nl + 1);
            }
        }
        let Some(from) = from.filter(|_| self.cut.is_none()) else {
            return;
        };
        let to = to.unwrap_or(text.len());
        if from >= to {
            return;
        }
        // The window's lines that end in this part: whole lines up to its
        // last `\n`, then (at most) the start of one more.
        let ended = self
            .line
            .min(self.end)
            .saturating_sub(first.max(self.offset));
        let split = if ended == 0 {
            from
        } else {
            from + memchr::memrchr(b'\n', &text.as_bytes()[from..to]).map_or(0, |i| i + 1)
        };
        if from < split {
            if !self.write(&text[from..split], out) {
                return;
            }
            self.whole += ended;
            self.whole_end = out.len();
        }
        if split < to {
            self.write(&text[split..to], out);
        }
    }

    /// Escapes `part` onto `out`, or, if that goes over the bound, as much
    /// of it as [`Window::cut`] keeps; false then.
    fn write(&mut self, part: &str, out: &mut Vec<u8>) -> bool {
        let base = out.len();
        escape_into(out, part);
        if out.len() - self.start <= self.max_out {
            return true;
        }
        out.truncate(base);
        let room = self.max_out - (base - self.start);
        // The longest prefix of `part` that fits, and its last line end.
        let (mut used, mut fits, mut line_end, mut lines) = (0, 0, None, 0);
        for c in part.chars() {
            used += escaped_len(c);
            if used > room {
                break;
            }
            fits += c.len_utf8();
            if c == '\n' {
                lines += 1;
                line_end = Some((fits, lines));
            }
        }
        if let Some((at, lines)) = line_end {
            escape_into(out, &part[..at]);
            self.cut = Some(self.whole + lines);
        } else if self.whole > 0 {
            out.truncate(self.whole_end);
            self.cut = Some(self.whole);
        } else {
            escape_into(out, &part[..fits]);
            self.cut = Some(u64::from(out.len() > self.start));
        }
        false
    }

    fn finish(&self, bytes_read: u64, capped: bool) -> Window {
        let unterminated = !self.empty && !self.ends_with_newline;
        let total_lines = self.line + u64::from(unterminated);
        Window {
            total_lines,
            lines_returned: self
                .cut
                .unwrap_or_else(|| total_lines.min(self.end).saturating_sub(self.offset)),
            bytes_read,
            capped,
            cut: self.cut.is_some(),
        }
    }
}

/// The length of `c` escaped in a JSON string, as [`escape_into`] writes it.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        '\0'..='\u{1f}' => 6,
        c => c.len_utf8(),
    }
}

/// `text` as the inside of a JSON string, the same bytes `sonic-rs` writes
/// for a `String` field.
pub fn escape_into(out: &mut Vec<u8>, text: &str) {
    CompactFormatter
        .write_string_fast(out, text, false)
        .expect("writing to a Vec cannot fail");
}

#[cfg(test)]
mod tests;
