//! The stdio transport's reader: one JSON-RPC message per line, each line
//! bounded ([`MAX_LINE_BYTES`], as rmcp's reader, which this replaces) and
//! parsed once.
//!
//! What it adds: a line that cannot be taken as a message is answered
//! whenever its request id can be read from it, so the client waiting for
//! that id gets an error instead of waiting forever: `-32700` (parse error)
//! for a line that is not JSON the server can read (bytes that are not
//! UTF-8, a lone surrogate, nesting past the parser's depth, two values on
//! one line), `-32600` (invalid request) for JSON of the wrong shape or a
//! line over the bound. An id that is a number no id can be here (`1.5`,
//! past `i64`) is answered with a null id, as JSON-RPC answers an id it
//! cannot read. A line with no id is dropped, as rmcp and
//! the official SDKs do (an answer to garbage can start an echo storm with
//! a peer that answers garbage too), and the log says so.

use rmcp::model::{ErrorCode, ErrorData, NumberOrString, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use crate::repeats::Repeats;

/// Longest line read (rmcp's `DEFAULT_MAX_LINE_LENGTH`): a request is
/// small, and the largest argument a tool takes is far below it.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// How much of a line over the bound is kept to find its id in.
const KEPT_OF_OVERSIZED: usize = 64 << 10;

/// Most JSON values (objects, arrays and the items or members they hold)
/// one message may have. Parsed, each takes tens of bytes: a 4 MiB body
/// of `[{},{},…]` (1.3 million objects) took ~360 MB, ~90× its size, and
/// sixteen at once stalled other calls for seconds. No tool's arguments
/// come near this (a file's content is one string).
pub const MAX_JSON_VALUES: usize = 100_000;

/// What one line was.
#[derive(Debug)]
pub enum Line {
    Message(RxJsonRpcMessage<RoleServer>),
    /// Not a message, but with an id (or a batch with requests in it):
    /// this answer goes back.
    Refused(Answer),
    /// Nothing to do (a blank line, or one with no id to answer).
    Skipped,
    /// The input ended (or failed).
    End,
}

/// What goes back for a line that is not run: one error, or for a batch
/// an array of them (as JSON-RPC answers a batch).
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)] // made only for a refused line, moved once
pub enum Answer {
    One(TxJsonRpcMessage<RoleServer>),
    Batch(Vec<TxJsonRpcMessage<RoleServer>>),
}

impl Answer {
    /// One error, for the request `id` (`None`: an id that cannot be read).
    pub fn error(error: ErrorData, id: Option<RequestId>) -> Answer {
        Answer::One(TxJsonRpcMessage::<RoleServer>::error(error, id))
    }
}

pub struct LineReader<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// The line being read is over the bound: only its head is kept.
    oversized: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(read: R) -> Self {
        LineReader {
            read: BufReader::new(read),
            line: Vec::new(),
            oversized: false,
        }
    }

    /// The next line. Cancel-safe (rmcp polls `receive` in a `select!`):
    /// what is read is moved into `self.line` with no await in between, so
    /// a dropped call leaves a partial line for the next one to finish.
    pub async fn next(&mut self) -> Line {
        loop {
            let (used, ended) = {
                let available = match self.read.fill_buf().await {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::error!("reading stdin: {e}");
                        return Line::End;
                    }
                };
                if available.is_empty() {
                    return Line::End;
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let used = newline.map_or(available.len(), |i| i + 1);
                keep(&mut self.line, &mut self.oversized, &available[..used]);
                (used, newline.is_some())
            };
            self.read.consume(used);
            if ended {
                let line = std::mem::take(&mut self.line);
                let oversized = std::mem::take(&mut self.oversized);
                let read = if oversized {
                    refuse_oversized(&line)
                } else {
                    parse_line(&line)
                };
                self.line = line;
                self.line.clear();
                return read;
            }
        }
    }
}

/// Appends `bytes` to `line`, keeping only the head of one over the bound
/// (`oversized` then set).
fn keep(line: &mut Vec<u8>, oversized: &mut bool, bytes: &[u8]) {
    if !*oversized && line.len() + bytes.len() > MAX_LINE_BYTES {
        *oversized = true;
        line.truncate(KEPT_OF_OVERSIZED);
    }
    let room = if *oversized {
        KEPT_OF_OVERSIZED.saturating_sub(line.len())
    } else {
        bytes.len()
    };
    line.extend_from_slice(&bytes[..room.min(bytes.len())]);
}

/// One whole line (its `\n` included) as a message, an answer or nothing.
pub fn parse_line(line: &[u8]) -> Line {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Skipped;
    }
    let values = wasm_mcp_protocol::json_values(line);
    if values > MAX_JSON_VALUES {
        let message =
            format!("the request holds more than {MAX_JSON_VALUES} JSON values; it was not read");
        return answer_or_drop(line, ErrorData::invalid_request(message, None));
    }
    if let Some(refused) = refuse_batch(line) {
        return refused;
    }
    let error = match serde_json::from_slice(line) {
        Ok(message) => return refuse_if_kept_and_large(message, line.len(), values),
        Err(e) => e,
    };
    let code = match error.classify() {
        serde_json::error::Category::Data => ErrorCode::INVALID_REQUEST,
        _ => ErrorCode::PARSE_ERROR,
    };
    let what = if code == ErrorCode::PARSE_ERROR {
        "the request is not JSON this server can read"
    } else {
        "the request is not a JSON-RPC message this server knows"
    };
    answer_or_drop(line, ErrorData::new(code, format!("{what}: {error}"), None))
}

/// Characters of a client's request id a log line shows.
pub const SHOWN_ID_CHARS: usize = 64;

/// Most bytes of a request the server keeps for long: `initialize` (its
/// parameters live as long as the session) and `subscriptions/listen` (its
/// `_meta` as long as the stream). A client's 4 MB `capabilities` kept 256
/// sessions at 1 GB, and listen streams with 4.5 MB `clientInfo` each took
/// ~850 MB (a helper's find); a real one is a few hundred bytes.
pub const MAX_KEPT_REQUEST_BYTES: usize = 64 << 10;

/// Most JSON values of a request the server keeps for long. Bytes alone
/// did not bound what is kept: 64 KiB of one-member objects parse to ~6 MB,
/// and 256 sessions of them held 1.6 GB, 700 stdio listen streams 4 GB (a
/// helper's find); at 1,024 nested ones still ~700 KB a session (the next
/// round's). A real one holds a few dozen; 256 hold ~175 KB at most.
pub const MAX_KEPT_REQUEST_VALUES: usize = 256;

/// `message`, or its refusal (-32602) when it is a request the server
/// keeps and its line is longer than [`MAX_KEPT_REQUEST_BYTES`] or holds
/// more than [`MAX_KEPT_REQUEST_VALUES`] JSON values.
fn refuse_if_kept_and_large(
    message: RxJsonRpcMessage<RoleServer>,
    bytes: usize,
    values: usize,
) -> Line {
    let rmcp::model::JsonRpcMessage::Request(request) = &message else {
        return Line::Message(message);
    };
    let method = request.request.method();
    if !matches!(method, "initialize" | "subscriptions/listen") {
        return Line::Message(message);
    }
    let over = if bytes > MAX_KEPT_REQUEST_BYTES {
        format!("at most {MAX_KEPT_REQUEST_BYTES} bytes; this one is {bytes}")
    } else if values > MAX_KEPT_REQUEST_VALUES {
        format!("at most {MAX_KEPT_REQUEST_VALUES} JSON values; this one holds {values}")
    } else {
        return Line::Message(message);
    };
    let error = ErrorData::invalid_params(
        format!("a {method} request is kept while its session or stream lasts, and may be {over}"),
        None,
    );
    Line::Refused(Answer::error(error, Some(request.id.clone())))
}

/// A JSON-RPC batch (an array of messages), which no MCP revision served
/// here has (2025-06-18 removed them): each request in it is answered
/// -32600 by its id, in one array; a batch with none (notifications only)
/// is dropped. It got no answer at all, and its client waited. `None`: not
/// an array of JSON values (handled as any line).
fn refuse_batch(line: &[u8]) -> Option<Line> {
    if line.trim_ascii_start().first() != Some(&b'[') {
        return None;
    }
    let items: Vec<serde_json::Value> = serde_json::from_slice(line).ok()?;
    let message = "JSON-RPC batches are not supported (MCP removed them in 2025-06-18): send each message on its own line";
    let answers: Vec<_> = items
        .iter()
        .filter(|item| item.get("method").is_some())
        .filter_map(|item| RequestId::deserialize(item.get("id")?).ok())
        .map(|id| {
            let error = ErrorData::invalid_request(message, None);
            TxJsonRpcMessage::<RoleServer>::error(error, Some(id))
        })
        .collect();
    Some(match answers.is_empty() {
        true => Line::Skipped,
        false => Line::Refused(Answer::Batch(answers)),
    })
}

fn refuse_oversized(head: &[u8]) -> Line {
    let message = format!("the request is longer than {MAX_LINE_BYTES} bytes; it was not read");
    answer_or_drop(head, ErrorData::invalid_request(message, None))
}

/// `error` as the answer to the request `line` is, when its id can be
/// read; otherwise nothing (logged: the first time, then at each power of
/// two, so garbage cannot flood the log).
fn answer_or_drop(line: &[u8], error: ErrorData) -> Line {
    // Logged the first time and at each power of two, the id by its head:
    // each refused line's id went to the log whole (cut at 4 KiB), ~4 KiB
    // of log per request at the client's rate, 71 MB/s from four clients
    // (a helper's find).
    static REFUSED: Repeats = Repeats::new();
    if let Some(id) = request_id(line) {
        if let Some(n) = REFUSED.note() {
            let shown = id.to_string();
            let id = wasm_mcp_protocol::text::head_chars(&shown, SHOWN_ID_CHARS);
            tracing::info!(id, refused = n, "request refused: {}", error.message);
        }
        return Line::Refused(Answer::error(error, Some(id)));
    }
    if let Some(id) = unusable_number_id(line) {
        // JSON-RPC: an id that cannot be read is answered as null.
        let message = format!(
            "Invalid Request: the id {id} is not a string or an integer within 64-bit signed range (answered with a null id)"
        );
        if let Some(n) = REFUSED.note() {
            let shown = wasm_mcp_protocol::text::head_chars(&message, 256);
            tracing::info!(refused = n, "request refused: {shown}");
        }
        return Line::Refused(Answer::error(
            ErrorData::invalid_request(message, None),
            None,
        ));
    }
    static DROPPED: Repeats = Repeats::new();
    if let Some(n) = DROPPED.note() {
        tracing::warn!(
            dropped = n,
            "a line with no request id to answer was dropped: {}",
            error.message
        );
    }
    Line::Skipped
}

/// The `id` of the object `line` is, read from its top level without
/// parsing the rest: a number that fits `i64` or a string of valid UTF-8.
/// `None` for anything else, and for a line cut before its id.
pub fn request_id(line: &[u8]) -> Option<RequestId> {
    at_id(line)?.id()
}

/// An `id` that is a JSON number but not one a request id can be here
/// (`1.5`, `1e3`, past `i64`: rmcp's ids are `i64` or strings), as
/// written (its head): such a request was dropped unanswered, and its
/// client waited forever (a helper's find).
fn unusable_number_id(line: &[u8]) -> Option<&str> {
    let mut s = at_id(line)?;
    let start = s.i;
    let number = |c: u8| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E');
    while s.peek().is_some_and(number) {
        s.i += 1;
    }
    let text = std::str::from_utf8(&line[start..s.i]).ok()?;
    let starts_a_number = text.starts_with(|c: char| c == '-' || c.is_ascii_digit());
    starts_a_number.then(|| wasm_mcp_protocol::text::head_chars(text, 64))
}

/// A scan of `line` standing at the value of its top-level `id`.
fn at_id(line: &[u8]) -> Option<Scan<'_>> {
    let mut s = Scan { b: line, i: 0 };
    s.ws();
    s.eat(b'{')?;
    loop {
        s.ws();
        let is_id = s.string()? == b"id";
        s.ws();
        s.eat(b':')?;
        s.ws();
        if is_id {
            return Some(s);
        }
        s.skip_value()?;
        s.ws();
        match s.next()? {
            b',' => {}
            _ => return None,
        }
    }
}

/// A cursor over a line's bytes.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn ws(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    /// A string's raw bytes between its quotes (escapes left as written).
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            match self.next()? {
                b'"' => return Some(&self.b[start..self.i - 1]),
                b'\\' => {
                    self.next()?;
                }
                _ => {}
            }
        }
    }

    /// The id's value: an integer, or a string with no escapes to decode.
    fn id(&mut self) -> Option<RequestId> {
        if self.peek()? == b'"' {
            let raw = self.string()?;
            if raw.contains(&b'\\') {
                return None;
            }
            let text = std::str::from_utf8(raw).ok()?;
            return Some(NumberOrString::String(text.into()));
        }
        let start = self.i;
        while self.peek().is_some_and(|c| c == b'-' || c.is_ascii_digit()) {
            self.i += 1;
        }
        let digits = std::str::from_utf8(&self.b[start..self.i]).ok()?;
        match self.peek() {
            Some(b',' | b'}' | b' ' | b'\t' | b'\r' | b'\n') => {}
            _ => return None,
        }
        Some(NumberOrString::Number(digits.parse().ok()?))
    }

    /// Passes over one value of any depth (counted, not recursed into).
    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match self.peek()? {
                b'"' => {
                    self.string()?;
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.i += 1;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    self.i += 1;
                }
                b',' if depth == 0 => return Some(()),
                _ => self.i += 1,
            }
            if depth == 0 && matches!(self.peek(), Some(b',' | b'}')) {
                return Some(());
            }
        }
    }
}

#[cfg(test)]
mod tests;
