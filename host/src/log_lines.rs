//! The server's log is bounded per line: a client's strings reach it
//! whole through rmcp's warnings (an unknown method name, a mismatched
//! `protocolVersion`, the id of every request answered with an error) and
//! our own (`call cancelled`, with its request id). One client posting 4 MB
//! strings wrote ~200 MB/s to stderr with the default filter (a helper's
//! find). Every event's line is cut to [`MAX_LOG_LINE_BYTES`] here, at the
//! writer, so no source of a long field can be missed; the cut line says how
//! much was left out.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Mutex;

use tracing::callsite::Identifier;
use tracing::Metadata;
use tracing_subscriber::fmt::MakeWriter;

use crate::repeats::Repeats;

/// Whether an event of `meta` is written: each event line of rmcp's is
/// written the first time and then at each power of two (per line of
/// rmcp's code, its callsite). Those lines name what a client did (an
/// unknown method, the error answered to each of its requests), so a
/// client wrote them at its own rate: 22 MB/s of 4 KiB lines from requests
/// naming 4,100-byte methods (a helper's find). Our own lines, and spans,
/// are not counted here.
pub fn written_at_powers_of_two(meta: &Metadata<'_>) -> bool {
    static SEEN: Mutex<Option<HashMap<Identifier, Repeats>>> = Mutex::new(None);
    if !meta.is_event() || !meta.target().starts_with("rmcp") {
        return true;
    }
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let repeats = seen
        .get_or_insert_with(HashMap::new)
        .entry(meta.callsite())
        .or_default();
    repeats.note().is_some()
}

/// [`written_at_powers_of_two`] as a per-layer filter, asked at every
/// event (a filter's answer is otherwise kept per callsite).
pub fn at_powers_of_two<S: tracing::Subscriber>() -> impl tracing_subscriber::layer::Filter<S> {
    tracing_subscriber::filter::DynFilterFn::new(|meta: &Metadata<'_>, _: &_| {
        written_at_powers_of_two(meta)
    })
    .with_callsite_filter(|_| tracing::subscriber::Interest::sometimes())
}

/// Most bytes of one log line, its cut notice aside. Plugin load errors,
/// the longest lines the server writes of its own, fit with room to spare.
pub const MAX_LOG_LINE_BYTES: usize = 4096;

/// A [`MakeWriter`] whose writers keep the first [`MAX_LOG_LINE_BYTES`] of
/// what one event writes. `tracing_subscriber::fmt` formats an event whole
/// and writes it through one writer, which is made for that event.
pub struct CappedLines<M>(pub M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for CappedLines<M> {
    type Writer = CappedLine<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        CappedLine {
            inner: self.0.make_writer(),
            written: 0,
            cut: None,
        }
    }
}

/// One event's writer: passes its first [`MAX_LOG_LINE_BYTES`] on, counts
/// the rest, and ends a cut line with how many bytes were left out.
pub struct CappedLine<W: Write> {
    inner: W,
    written: usize,
    /// Bytes left out (a line end aside), once the line has been cut.
    cut: Option<usize>,
}

impl<W: Write> Write for CappedLine<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = MAX_LOG_LINE_BYTES - self.written;
        if self.cut.is_none() && buf.len() <= room {
            self.inner.write_all(buf)?;
            self.written += buf.len();
            return Ok(buf.len());
        }
        let keep = if self.cut.is_none() {
            char_boundary(buf, room)
        } else {
            0
        };
        self.inner.write_all(&buf[..keep])?;
        self.written += keep;
        // The line end comes with the notice, at drop.
        let line_end = usize::from(buf.ends_with(b"\n"));
        *self.cut.get_or_insert(0) += buf.len() - keep - line_end;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Drop for CappedLine<W> {
    fn drop(&mut self) {
        let end = match self.cut {
            None => return,
            Some(0) => "\n".to_string(),
            Some(n) => format!(" … [{n} bytes of this log line left out]\n"),
        };
        let _ = self.inner.write_all(end.as_bytes());
    }
}

/// The longest head of `buf` of at most `max` bytes that does not end
/// inside a UTF-8 sequence.
fn char_boundary(buf: &[u8], max: usize) -> usize {
    let mut end = max.min(buf.len());
    while end > 0 && end < buf.len() && (buf[end] & 0b1100_0000) == 0b1000_0000 {
        end -= 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn written(lines: &[&[u8]]) -> String {
        let sink = Sink::default();
        let make = CappedLines({
            let sink = sink.clone();
            move || sink.clone()
        });
        for line in lines {
            let mut w = make.make_writer();
            w.write_all(line).unwrap();
        }
        let bytes = sink.0.lock().unwrap().clone();
        String::from_utf8(bytes).expect("lines stay UTF-8")
    }

    #[test]
    fn a_long_line_is_cut_with_a_notice_and_short_ones_pass_whole() {
        let long = format!("WARN method={}\n", "é".repeat(1 << 20));
        let out = written(&[b"first\n", long.as_bytes(), b"last\n"]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{}", &out[..200]);
        assert_eq!(lines[0], "first");
        assert_eq!(lines[2], "last");
        assert!(
            lines[1].len() < MAX_LOG_LINE_BYTES + 80,
            "{}",
            lines[1].len()
        );
        let left_out = long.len() - 1 - lines[1].split(" … ").next().unwrap().len();
        assert!(
            lines[1].ends_with(&format!("[{left_out} bytes of this log line left out]")),
            "{}",
            &lines[1][MAX_LOG_LINE_BYTES - 20..]
        );
    }

    #[test]
    fn a_line_of_exactly_the_limit_keeps_its_line_end() {
        let line = format!("{}\n", "y".repeat(MAX_LOG_LINE_BYTES));
        let out = written(&[line.as_bytes(), b"next\n"]);
        assert_eq!(out, format!("{}\nnext\n", "y".repeat(MAX_LOG_LINE_BYTES)));
    }

    #[test]
    fn a_line_written_in_pieces_is_cut_once() {
        let piece = vec![b'x'; 3000];
        let sink = Sink::default();
        let make = CappedLines({
            let sink = sink.clone();
            move || sink.clone()
        });
        {
            let mut w = make.make_writer();
            for _ in 0..4 {
                w.write_all(&piece).unwrap();
            }
            w.write_all(b"\n").unwrap();
        }
        let out = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(out.matches('\n').count(), 1);
        assert!(
            out.ends_with(&format!(
                "[{} bytes of this log line left out]\n",
                12_000 - MAX_LOG_LINE_BYTES
            )),
            "{}",
            &out[4000..]
        );
    }
}
