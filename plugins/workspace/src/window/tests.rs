use super::*;

/// What `read_file` returned when it read the whole file first: the first
/// `cap` bytes, `String::from_utf8_lossy`, then lines as `split_inclusive`
/// counts them.
fn reference(data: &[u8], cap: u64, offset: u64, limit: u64) -> (String, Window) {
    let kept = &data[..data.len().min(cap as usize)];
    let text = String::from_utf8_lossy(kept);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let window: Vec<&str> = lines
        .iter()
        .skip(offset as usize)
        .take(limit as usize)
        .copied()
        .collect();
    let w = Window {
        total_lines: lines.len() as u64,
        lines_returned: window.len() as u64,
        bytes_read: kept.len() as u64,
        capped: data.len() as u64 > cap,
    };
    (window.concat(), w)
}

/// The window read through [`stream_window`], its JSON text decoded.
fn streamed(
    src: impl Read,
    chunk: usize,
    cap: u64,
    offset: u64,
    limit: u64,
) -> (String, Vec<u8>, Window) {
    let mut out = Vec::new();
    let w = stream_window(src, chunk, cap, offset, limit, &mut out).unwrap();
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
    let mut checked = 0;
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
        let (want_text, want) = reference(&data, cap, offset, limit);
        let (text, json, got) = streamed(&data[..], chunk, cap, offset, limit);
        let case = format!("{data:?} cap {cap} chunk {chunk} window {offset}+{limit}");
        assert_eq!(text, want_text, "{case}");
        assert_eq!(got, want, "{case}");
        // Byte for byte what the SDK's encoder writes for the string.
        let encoded = sonic_rs::to_string(&want_text).unwrap();
        assert_eq!(json, encoded.as_bytes()[1..encoded.len() - 1], "{case}");
        checked += 1;
    }
    assert_eq!(checked, 3000);
}

#[test]
fn short_and_interrupted_reads_change_nothing() {
    let mut rng = Rng(7);
    for _ in 0..300 {
        let data = random_file(&mut rng, 60);
        let whole = streamed(&data[..], 16, 1 << 20, 1, 3);
        for step in [1, 2, 3, 5] {
            let trickle = Trickle {
                data: &data,
                step,
                interrupt: false,
            };
            assert_eq!(streamed(trickle, 16, 1 << 20, 1, 3), whole, "{data:?}");
        }
    }
}

#[test]
fn windows_and_counts() {
    let read = |data: &[u8], offset, limit| {
        let (text, _, w) = streamed(data, CHUNK, 1 << 20, offset, limit);
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
    let (_, _, w) = streamed(bytes, 4, 30, 0, 100);
    assert_eq!((w.bytes_read, w.capped, w.total_lines), (30, false, 10));
    // 4 bytes kept: "é\n" then the first byte of "é", which becomes U+FFFD.
    let (text, _, w) = streamed(bytes, 4, 4, 0, 100);
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
                    let (want_text, want) = reference(data.as_bytes(), 1 << 20, offset, limit);
                    let (text, _, got) = streamed(data.as_bytes(), chunk, 1 << 20, offset, limit);
                    assert_eq!(
                        (text, got),
                        (want_text, want),
                        "{line_len} {chunk} {offset}"
                    );
                }
            }
        }
    }
}
