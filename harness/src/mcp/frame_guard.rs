//! Guards the byte stream from a server before rmcp reads it.
//!
//! rmcp's line transport silently drops a line over its 16 MiB limit and
//! ignores a line that is not JSON, so the call it answered waits out its
//! timeout and ends `unknown`. Here every line is checked first, holding at
//! most [`MAX_FRAME_BYTES`] of it:
//! * a line that fits and parses as a message (rmcp's own type, so what
//!   rmcp would drop is caught here) passes through unchanged;
//! * an oversized or unparseable line, or one of more than
//!   [`MAX_FRAME_JSON_VALUES`] JSON values, is replaced by a JSON-RPC error
//!   response for the request id found at the start of the frame (rmcp and
//!   most servers write `{"jsonrpc":"2.0","id":…` first), so that one call
//!   fails promptly with a clear message;
//! * if no id can be found, the stream is ended (logged): the connection is
//!   lost and every pending call fails at once instead of timing out;
//! * a line that does not start as JSON does (`{` or `[`) is not a frame at
//!   all but a server's stray output (a banner, a log line on stdout): it
//!   is skipped (logged, then at each power of two), as the official SDKs
//!   skip it. Such a server ended its connection here and worked in every
//!   other client (a helper's find).

use rmcp::service::{RoleClient, RxJsonRpcMessage};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader, DuplexStream};

/// Longest frame passed on (the newline excluded): rmcp's line limit.
pub const MAX_FRAME_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH - 1;

/// Most JSON values one frame may hold ([`wasm_mcp_protocol::json_values`],
/// counted before parsing): a 15 MiB frame of `[{},{},…]` (5 million
/// objects) peaked at 1 GB in the harness. Ten times the server's bound on
/// a request: a result listing 100,000 entries of a few fields fits.
pub const MAX_FRAME_JSON_VALUES: usize = 1_000_000;

/// Bytes at the start of a frame searched for its id.
const ID_WINDOW: usize = 4096;

/// JSON-RPC error code of a synthesized response (implementation-defined
/// server error range).
pub const FRAME_ERROR_CODE: i32 = -32099;

type Reader = Box<dyn AsyncRead + Send + Unpin>;

/// Wrap `inner`: the returned reader yields only frames that fit and parse,
/// or synthesized errors in their place.
pub fn guard(inner: Reader, max_frame: usize) -> Reader {
    let (out, reader) = tokio::io::duplex(64 << 10);
    tokio::spawn(pump(inner, out, max_frame));
    Box::new(reader)
}

/// One frame as read: whole, or cut because it was too long.
enum Frame {
    Whole(Vec<u8>),
    Oversized { head: Vec<u8>, bytes: usize },
}

async fn pump(inner: Reader, mut out: DuplexStream, max_frame: usize) {
    let mut reader = BufReader::new(inner);
    let mut stray = 0u64;
    loop {
        let frame = match read_frame(&mut reader, max_frame).await {
            Ok(Some(f)) => f,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("reading from server: {e}");
                return;
            }
        };
        if let Some(head) = stray_output(&frame) {
            stray += 1;
            if stray.is_power_of_two() {
                let head = String::from_utf8_lossy(head);
                tracing::warn!(
                    lines = stray,
                    "the server wrote a line that is not JSON-RPC on its stdout; skipped: {head:?}"
                );
            }
            continue;
        }
        let Some(line) = vet(frame, max_frame) else {
            return; // broken: EOF for rmcp, pending calls fail now
        };
        if out.write_all(&line).await.is_err() || out.write_all(b"\n").await.is_err() {
            return;
        }
    }
}

/// Read one `\n`-terminated frame, keeping at most `max` bytes of it.
async fn read_frame(reader: &mut BufReader<Reader>, max: usize) -> std::io::Result<Option<Frame>> {
    let mut line = Vec::new();
    let mut total = 0usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            // EOF; an unterminated tail is not a frame.
            return Ok(None);
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let chunk = &available[..newline.unwrap_or(available.len())];
        total = total.saturating_add(chunk.len());
        if total <= max {
            line.extend_from_slice(chunk);
        } else {
            // Oversized: keep only the start (where the id is).
            line.truncate(ID_WINDOW);
            let want = ID_WINDOW - line.len();
            line.extend_from_slice(&chunk[..want.min(chunk.len())]);
        }
        let consumed = chunk.len() + usize::from(newline.is_some());
        reader.consume(consumed);
        if newline.is_some() {
            return Ok(Some(if total <= max {
                Frame::Whole(line)
            } else {
                Frame::Oversized {
                    head: line,
                    bytes: total,
                }
            }));
        }
    }
}

/// The head of `frame` (at most 120 bytes) when it is not a frame at all:
/// not blank, and not starting as a JSON object or array does.
fn stray_output(frame: &Frame) -> Option<&[u8]> {
    let bytes = match frame {
        Frame::Whole(line) => line.as_slice(),
        Frame::Oversized { head, .. } => head.as_slice(),
    };
    let start = skip_ws(bytes);
    match start.first() {
        None | Some(b'{') | Some(b'[') => None,
        Some(_) => Some(&start[..start.len().min(120)]),
    }
}

/// The line to pass on, or `None` when the connection must end.
fn vet(frame: Frame, max_frame: usize) -> Option<Vec<u8>> {
    let (head, why) = match frame {
        Frame::Whole(line) if line.iter().all(u8::is_ascii_whitespace) => return Some(line),
        Frame::Whole(line) if wasm_mcp_protocol::json_values(&line) > MAX_FRAME_JSON_VALUES => (
            line,
            format!(
                "the server's response frame holds more than {MAX_FRAME_JSON_VALUES} JSON values; it was not read"
            ),
        ),
        // Parsed as rmcp will parse it: what it would drop (a frame that is
        // not JSON, or JSON that is not a message, `"jsonrpc":"1.0"`, a
        // result with an error) is an error here, not a silent timeout.
        Frame::Whole(line) => match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(&line) {
            Ok(_) => return Some(line),
            Err(e) => {
                let what = match e.classify() {
                    serde_json::error::Category::Data => "not a JSON-RPC message",
                    _ => "not valid JSON",
                };
                (line, format!("the server sent a frame that is {what} ({e})"))
            }
        },
        Frame::Oversized { head, bytes } => (
            head,
            format!(
                "the server's response frame of {bytes} bytes exceeds the frame limit of {max_frame} bytes"
            ),
        ),
    };
    let window = &head[..head.len().min(ID_WINDOW)];
    match frame_id(window) {
        Some(id) => {
            tracing::warn!(%id, "{why}: answering that request with an error");
            Some(error_response(id, &why))
        }
        None => {
            tracing::error!("{why}, and it names no request id: closing the connection");
            None
        }
    }
}

fn error_response(id: Value, message: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": FRAME_ERROR_CODE, "message": message}})
        .to_string()
        .into_bytes()
}

/// The value of the first `"id"` key in a frame's start: a number or a
/// string (what JSON-RPC allows).
fn frame_id(head: &[u8]) -> Option<Value> {
    let key = head.windows(4).position(|w| w == b"\"id\"")?;
    let rest = &head[key + 4..];
    let rest = skip_ws(rest).strip_prefix(b":")?;
    let rest = skip_ws(rest);
    match rest.first()? {
        b'"' => {
            let end = string_end(rest)?;
            serde_json::from_slice::<Value>(&rest[..=end]).ok()
        }
        b'-' | b'0'..=b'9' => {
            let len = rest
                .iter()
                .position(|b| !(b.is_ascii_digit() || *b == b'-'))
                .unwrap_or(rest.len());
            let n: i64 = std::str::from_utf8(&rest[..len]).ok()?.parse().ok()?;
            Some(Value::from(n))
        }
        _ => None,
    }
}

fn skip_ws(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

/// Index of the closing quote of the JSON string starting at `s[0]`.
fn string_end(s: &[u8]) -> Option<usize> {
    let mut escaped = false;
    for (i, &c) in s.iter().enumerate().skip(1) {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, b'\\') => escaped = true,
            (false, b'"') => return Some(i),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn through(input: Vec<u8>, max: usize) -> String {
        let mut out = String::new();
        guard(Box::new(std::io::Cursor::new(input)), max)
            .read_to_string(&mut out)
            .await
            .unwrap();
        out
    }

    #[tokio::test]
    async fn good_frames_pass_and_bad_ones_become_errors_for_their_id() {
        let good = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":"a\"b","result":{{"x":"{}"}}}}"#,
            "y".repeat(500)
        );
        let broken = r#"{"jsonrpc":"2.0","id":-7,"result":{"x":"#;
        let input = format!("{good}\n{big}\n\n{broken}\n{good}\n");
        let out = through(input.into_bytes(), 200).await;
        let lines: Vec<Value> = out
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert_eq!(lines[0], serde_json::from_str::<Value>(good).unwrap());
        assert_eq!(lines[1]["id"], "a\"b");
        let m = lines[1]["error"]["message"].as_str().unwrap();
        assert!(m.contains("frame limit of 200 bytes"), "{m}");
        assert_eq!(lines[2]["id"], -7);
        assert!(lines[2]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"));
        assert_eq!(lines[3]["id"], 1);
    }

    /// A frame of `[{},{},…]` is small on the wire and huge parsed (a
    /// 15 MiB one peaked at 1 GB): past the value bound it is that call's
    /// error, never parsed; at the bound it passes.
    #[tokio::test]
    async fn a_frame_of_too_many_json_values_is_its_calls_error() {
        let frame = |items: usize| {
            let list = vec!["{}"; items].join(",");
            format!(r#"{{"jsonrpc":"2.0","id":5,"result":{{"x":[{list}]}}}}"#)
        };
        // Two top-level commas, `{`, `{`, `[`, then a `{` per item and a
        // comma per further item: 2 × items + 4.
        let fits = (MAX_FRAME_JSON_VALUES - 4) / 2;
        assert_eq!(
            wasm_mcp_protocol::json_values(frame(fits).as_bytes()),
            MAX_FRAME_JSON_VALUES
        );
        let input = format!("{}\n{}\n", frame(fits), frame(fits + 1));
        let out = through(input.into_bytes(), MAX_FRAME_BYTES).await;
        let lines: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["result"]["x"].as_array().unwrap().len(), fits);
        assert_eq!(lines[1]["id"], 5);
        let m = lines[1]["error"]["message"].as_str().unwrap();
        assert!(m.contains(&MAX_FRAME_JSON_VALUES.to_string()), "{m}");
    }

    /// JSON that rmcp would not read as a message (and so drop, leaving
    /// its call to time out) is that call's error at once.
    #[tokio::test]
    async fn json_that_is_not_a_message_is_its_calls_error() {
        let input = concat!(
            r#"{"jsonrpc":"1.0","id":3,"result":{}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":4,"result":{},"error":{"code":1,"message":"x"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":5,"result":{}}"#,
            "\n"
        );
        let out = through(input.as_bytes().to_vec(), 200).await;
        let lines: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{out}");
        for (line, id) in lines[..2].iter().zip([3, 4]) {
            assert_eq!(line["id"], id, "{out}");
            assert_eq!(line["error"]["code"], FRAME_ERROR_CODE, "{out}");
        }
        assert_eq!(lines[2], json!({"jsonrpc":"2.0","id":5,"result":{}}));
    }

    #[tokio::test]
    async fn a_bad_frame_without_an_id_ends_the_stream() {
        let out = through(
            b"{\"jsonrpc\":\"2.0\",\"result\"\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
                .to_vec(),
            200,
        )
        .await;
        assert_eq!(out, "");
    }

    /// A server's banner or log line on stdout is skipped, as the official
    /// SDKs skip it; the frames around it pass.
    #[tokio::test]
    async fn stray_output_is_skipped() {
        let ok = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
        let input = format!("Server v1.2 starting...\n{ok}\n  INFO listening\n{ok}\n");
        let out = through(input.into_bytes(), 200).await;
        assert_eq!(out, format!("{ok}\n{ok}\n"));
    }

    #[test]
    fn ids_are_read_from_the_frame_start() {
        assert_eq!(
            frame_id(br#"{"jsonrpc":"2.0", "id" : 42,"#),
            Some(json!(42))
        );
        assert_eq!(frame_id(br#"{"id":"x\\","#), Some(json!("x\\")));
        assert_eq!(frame_id(br#"{"jsonrpc":"2.0","result""#), None);
        assert_eq!(frame_id(br#"{"id":null}"#), None);
    }
}
