use super::*;
use std::io::Read;

/// The inside of `text`'s JSON string as the SDK's encoder writes it.
fn json_len(text: &str) -> usize {
    sonic_rs::to_string(text).unwrap().len() - 2
}

/// What `read_file` returned when it read the whole file first: the first
/// `cap` bytes, `String::from_utf8_lossy`, then lines as `split_inclusive`
/// counts them; then, if the window's JSON text is longer than `max_out`
/// bytes, its longest prefix that fits, cut back to its last line end when
/// it has one (a first line too long alone is cut inside, at a character).
fn reference(data: &[u8], cap: u64, offset: u64, limit: u64, max_out: usize) -> (String, Window) {
    let kept = &data[..data.len().min(cap as usize)];
    let text = String::from_utf8_lossy(kept);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let window: String = lines
        .iter()
        .skip(offset as usize)
        .take(limit as usize)
        .copied()
        .collect();
    let cut = json_len(&window) > max_out;
    let window = if cut {
        let (mut used, mut end) = (0, 0);
        for c in window.chars() {
            used += json_len(c.encode_utf8(&mut [0; 4]));
            if used > max_out {
                break;
            }
            end += c.len_utf8();
        }
        let fits = &window[..end];
        match fits.rfind('\n') {
            Some(nl) => fits[..=nl].to_string(),
            None => fits.to_string(),
        }
    } else {
        window
    };
    let w = Window {
        total_lines: lines.len() as u64,
        lines_returned: window.split_inclusive('\n').count() as u64,
        bytes_read: kept.len() as u64,
        capped: data.len() as u64 > cap,
        cut,
    };
    (window, w)
}

/// The window read through [`stream_window`], its JSON text decoded.
fn streamed(
    src: impl Read,
    chunk: usize,
    cap: u64,
    offset: u64,
    limit: u64,
    max_out: usize,
) -> (String, Vec<u8>, Window) {
    let mut out = Vec::new();
    let w = stream_window(src, chunk, cap, offset, limit, max_out, &mut out).unwrap();
    let quoted = [&b"\""[..], &out, b"\""].concat();
    let text: String = serde_json::from_slice(&quoted)
        .unwrap_or_else(|e| panic!("not a JSON string body ({e}): {out:?}"));
    (text, out, w)
}

/// A reader that hands out at most `step` bytes per read and is
/// interrupted before every other one.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
    interrupt: bool,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.interrupt = !self.interrupt;
        if self.interrupt {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(self.step).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// A small deterministic generator (xorshift), so the test needs no crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Pieces a file is made of: ASCII, line ends, 2- and 4-byte characters,
/// bytes JSON must escape, and invalid UTF-8 (a stray continuation byte, a
/// byte never valid, a 4-byte sequence cut short, an overlong form).
const PIECES: &[&[u8]] = &[
    b"a",
    b"xyz",
    b"\n",
    b"\n",
    "é".as_bytes(),
    "😀".as_bytes(),
    b"\"",
    b"\\",
    b"\x01",
    b"\t",
    b"\x80",
    b"\xff",
    b"\xf0\x9f\x98",
    b"\xc0\xaf",
];

fn random_file(rng: &mut Rng, max_pieces: u64) -> Vec<u8> {
    let n = rng.below(max_pieces + 1);
    (0..n)
        .flat_map(|_| {
            PIECES[rng.below(PIECES.len() as u64) as usize]
                .iter()
                .copied()
        })
        .collect()
}

/// Small chunks (from the smallest buffer, 4 bytes, so that characters
/// are split at every offset; 1-byte reads are `short_and_interrupted_…`),
/// caps that cut characters, windows inside and past the text: the
/// streamed window, its counts, and its JSON text are what reading the
/// whole file gave.
#[test]
fn a_streamed_window_is_the_window_of_the_whole_file() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut checked, mut cut) = (0, 0);
    for _ in 0..3000 {
        let data = random_file(&mut rng, 40);
        let cap = match rng.below(3) {
            0 => data.len() as u64 + 1,
            1 => data.len() as u64,
            _ => rng.below(data.len() as u64 + 1),
        };
        let chunk = [4, 5, 6, 7, 8, 16, 64][rng.below(7) as usize];
        let offset = rng.below(6);
        let limit = 1 + rng.below(6);
        // No bound, or one that may cut anywhere in the window's JSON text.
        let (whole, _) = reference(&data, cap, offset, limit, usize::MAX);
        let max_out = match rng.below(3) {
            0 => usize::MAX,
            _ => rng.below(json_len(&whole) as u64 + 3) as usize,
        };
        let (want_text, want) = reference(&data, cap, offset, limit, max_out);
        let (text, json, got) = streamed(&data[..], chunk, cap, offset, limit, max_out);
        let case =
            format!("{data:?} cap {cap} chunk {chunk} window {offset}+{limit} max_out {max_out}");
        assert_eq!(text, want_text, "{case}");
        assert_eq!(got, want, "{case}");
        // Byte for byte what the SDK's encoder writes for the string.
        let encoded = sonic_rs::to_string(&want_text).unwrap();
        assert_eq!(json, encoded.as_bytes()[1..encoded.len() - 1], "{case}");
        assert!(json.len() <= max_out, "{case}");
        checked += 1;
        cut += usize::from(got.cut);
    }
    assert_eq!(checked, 3000);
    assert!(cut > 500, "{cut} windows cut");
}

#[test]
fn short_and_interrupted_reads_change_nothing() {
    let mut rng = Rng(7);
    for _ in 0..300 {
        let data = random_file(&mut rng, 60);
        let whole = streamed(&data[..], 16, 1 << 20, 1, 3, 40);
        for step in [1, 2, 3, 5] {
            let trickle = Trickle {
                data: &data,
                step,
                interrupt: false,
            };
            assert_eq!(streamed(trickle, 16, 1 << 20, 1, 3, 40), whole, "{data:?}");
        }
    }
}

#[test]
fn windows_and_counts() {
    let read = |data: &[u8], offset, limit| {
        let (text, _, w) = streamed(data, CHUNK, 1 << 20, offset, limit, usize::MAX);
        (text, w.lines_returned, w.total_lines)
    };
    assert_eq!(read(b"a\nb\nc\n", 0, 1000), ("a\nb\nc\n".into(), 3, 3));
    assert_eq!(read(b"a\nb\nc", 1, 1), ("b\n".into(), 1, 3));
    assert_eq!(read(b"a\nb\nc", 2, 5), ("c".into(), 1, 3));
    assert_eq!(read(b"a\nb\n", 7, 5), ("".into(), 0, 2));
    assert_eq!(read(b"", 0, 5), ("".into(), 0, 0));
    assert_eq!(read(b"\xff\n", 0, 5), ("\u{fffd}\n".into(), 1, 1));
    // A 4-byte character cut by the end of the file is one U+FFFD.
    assert_eq!(read(&"a😀".as_bytes()[..3], 0, 5).0, "a\u{fffd}");
    // A limit near u64::MAX does not overflow the window's end.
    assert_eq!(read(b"a\nb", 1, u64::MAX), ("b".into(), 1, 2));
}

#[test]
fn the_cap_cuts_the_text_and_says_so() {
    let data = "é\n".repeat(10);
    let bytes = data.as_bytes();
    // 30 bytes kept of 30: not capped.
    let (_, _, w) = streamed(bytes, 4, 30, 0, 100, usize::MAX);
    assert_eq!((w.bytes_read, w.capped, w.total_lines), (30, false, 10));
    // 4 bytes kept: "é\n" then the first byte of "é", which becomes U+FFFD.
    let (text, _, w) = streamed(bytes, 4, 4, 0, 100, usize::MAX);
    assert_eq!(text, "é\n\u{fffd}");
    assert_eq!((w.bytes_read, w.capped, w.total_lines), (4, true, 2));
}

/// Line ends on every position of a 16-byte SIMD block, across chunk
/// boundaries of every phase.
#[test]
fn long_lines_across_chunks() {
    for line_len in [1, 15, 16, 17, 31, 33, 100] {
        let line = format!("{}\n", "é".repeat(line_len / 2) + &"x".repeat(line_len % 2));
        for tail in ["", "tail"] {
            let data = line.repeat(40) + tail;
            for chunk in [5, 16, 17, 64] {
                for (offset, limit) in [(0, 1000), (3, 7), (39, 2), (40, 1), (41, 1)] {
                    for max_out in [usize::MAX, 1000, 77, 7] {
                        let (want_text, want) =
                            reference(data.as_bytes(), 1 << 20, offset, limit, max_out);
                        let (text, _, got) =
                            streamed(data.as_bytes(), chunk, 1 << 20, offset, limit, max_out);
                        assert_eq!(
                            (text, got),
                            (want_text, want),
                            "{line_len} {chunk} {offset} {max_out}"
                        );
                    }
                }
            }
        }
    }
}

/// The bound on the JSON text counts escapes (6 bytes for `\u0001`, 3
/// for U+FFFD), cuts at the last line end that fits, and cuts a first line
/// too long alone at a character: never inside an escape.
#[test]
fn the_json_bound_cuts_at_a_line_end_or_a_character() {
    // Three lines of 6 bytes each, 29 bytes of JSON text each.
    let data = b"\x01\x01\x01\x01\xff\n".repeat(3);
    let read = |offset, max_out| {
        let (text, json, w) = streamed(&data[..], 4, 1 << 20, offset, 100, max_out);
        assert!(json.len() <= max_out, "{offset} {max_out}");
        (text, w.lines_returned, w.total_lines, w.cut)
    };
    let line = "\u{1}\u{1}\u{1}\u{1}\u{fffd}\n";
    assert_eq!(read(0, 87), (line.repeat(3), 3, 3, false));
    assert_eq!(read(0, 86), (line.repeat(2), 2, 3, true));
    assert_eq!(read(1, 58), (line.repeat(2), 2, 3, false));
    assert_eq!(read(1, 57), (line.into(), 1, 3, true));
    // The first line does not fit: as much of it as does, whole escapes
    // and characters only.
    assert_eq!(
        read(2, 28),
        ("\u{1}\u{1}\u{1}\u{1}\u{fffd}".into(), 1, 3, true)
    );
    assert_eq!(read(2, 23), ("\u{1}\u{1}\u{1}".into(), 1, 3, true));
    assert_eq!(read(2, 5), ("".into(), 0, 3, true));
}

/// A file that escapes to 6× its size in JSON: the bound holds however the
/// window is chunked, and reading on from `offset + lines_returned` reads
/// it all, line by line, with nothing lost or repeated.
#[test]
fn windows_under_the_bound_continue_where_they_stopped() {
    let data = (0..300)
        .map(|i| format!("{}\n", "\u{1}".repeat(i % 37)))
        .collect::<String>();
    for chunk in [5, 64, CHUNK] {
        for max_out in [250, 1000, 4096] {
            let (mut offset, mut all) = (0, String::new());
            loop {
                let (text, json, w) =
                    streamed(data.as_bytes(), chunk, 1 << 20, offset, 100, max_out);
                assert!(json.len() <= max_out);
                assert!(w.lines_returned > 0 || offset == w.total_lines);
                all += &text;
                offset += w.lines_returned;
                if offset >= w.total_lines {
                    break;
                }
            }
            assert_eq!(all, data, "{chunk} {max_out}");
        }
    }
}

/// The bound's count of escaped bytes is what the escaping writes.
#[test]
fn escaped_len_is_what_escaping_writes() {
    let chars = (0..0x80u8)
        .map(char::from)
        .chain(['é', '\u{2028}', '\u{fffd}', '😀']);
    for c in chars {
        let mut out = Vec::new();
        escape_into(&mut out, c.encode_utf8(&mut [0; 4]));
        assert_eq!(escaped_len(c), out.len(), "{c:?}");
    }
}
