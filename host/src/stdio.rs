//! The stdio transport: our line reader ([`crate::stdio_reader`]: bounded
//! lines, answers to unreadable requests by their id) and our frame
//! writer, which serializes outgoing messages with `sonic-rs` instead of
//! `serde_json`.
//!
//! Why: a large result's text is escaped once more for the wire, and
//! `serde_json` does that a byte at a time. The profile of a 1.9 MB
//! `read_file` put ~28% of the server's time in that loop; `sonic-rs`
//! finds the bytes to escape 16 at a time (13× faster on that file). The
//! output is the same JSON (the `frames_match_serde_json` test).
//!
//! Every frame, answers and the reader's refusals alike, is written whole
//! under one lock, so frames never interleave.
//!
//! It also keeps the record of requests read and not yet answered
//! ([`Unanswered`]): a request read past [`MAX_UNANSWERED`] of them waits
//! for one to be answered, and reading waits with it (a notification read
//! at the bound goes through: a cancel frees a place); it answers all of
//! them before reporting the end of input, and refuses a request whose id
//! is still in flight.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientNotification, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::stdio_reader::{Answer, Line, LineReader};
use crate::unanswered::{is_listen, Admission, Unanswered, MAX_UNANSWERED};

/// The server's stdin and stdout (non-blocking pipes where possible),
/// stdout widened to `pipe_bytes` when it is a pipe (0: left as it is).
/// `longest_request`: the most a request may take to be answered (the call
/// deadline and a margin), how long the end of input waits for answers.
pub fn stdio(
    pipe_bytes: usize,
    longest_request: Duration,
) -> StdioTransport<rmcp::transport::StdioReader, rmcp::transport::StdioWriter> {
    if pipe_bytes > 0 {
        widen_stdout(pipe_bytes);
    }
    let (read, write) = rmcp::transport::stdio_pipes();
    StdioTransport::new(read, write, longest_request)
}

/// How long closing waits for a write in progress (the end of input has
/// already waited for answers up to the longest request).
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Default capacity asked for on stdout (`--stdout-pipe-bytes`): Linux's
/// default `/proc/sys/fs/pipe-max-size`, the most an unprivileged process
/// may set. A pipe holds 64 KiB by default, so a 1.9 MB frame went through
/// it in ~30 fills, each a wake-up of the reader and of the blocked writer;
/// at 1 MiB it is two. Measured (`just bench --only sequential`, this VM,
/// three interleaved runs of 500 calls each): the 1.9 MB `read_file` p50
/// 7.7–8.1 ms at 64 KiB, 6.9–7.9 at 256 KiB, 7.1–7.3 at 1 MiB. Pages are
/// only held while written and not yet read, but the kernel charges the
/// whole capacity (256 pages) to the user's `pipe-user-pages-soft` (16384
/// pages by default): past ~60 servers of one unprivileged user at once,
/// that user's new pipes start at 8 KiB and widening fails (logged; the
/// server then runs at the default size). Only stdout is widened: requests
/// are small.
pub const PIPE_BYTES: usize = 1 << 20;

/// Widen stdout to `bytes` when it is a pipe. Not a pipe (a file, a
/// terminal, or a socket, as Node.js clients give their servers), it stays
/// as it is without a word; a pipe over the user's pipe-pages limit stays
/// as it is too, which only costs speed, and the log says so.
#[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
fn widen_stdout(bytes: usize) {
    #[cfg(target_os = "linux")]
    let is_pipe = rustix::fs::fstat(std::io::stdout()).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Fifo
    });
    #[cfg(target_os = "linux")]
    if !is_pipe {
        return;
    }
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::pipe::fcntl_setpipe_size(std::io::stdout(), bytes) {
        tracing::info!("stdout pipe left at its size, not widened to {bytes} bytes ({e})");
    }
}

/// Where whole frames go; `None` once closed.
type Out<W> = Arc<Mutex<Option<W>>>;

pub struct StdioTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    reader: LineReader<R>,
    out: Out<W>,
    buffers: FrameBuffers,
    unanswered: Arc<Unanswered>,
    longest_request: Duration,
    /// When the input ended, the last moment to wait for answers.
    input_ended: Option<Instant>,
    /// The write of the last refusal (a line answered without being run).
    refusal: Option<tokio::task::JoinHandle<()>>,
    /// Called once when the input ends (the server's listen streams end).
    on_input_end: Option<Box<dyn FnOnce() + Send>>,
    /// Requests read at the bound of [`MAX_UNANSWERED`], in order: each
    /// waits for a place, and reading stops at [`MAX_HELD`] of them.
    held: VecDeque<RxJsonRpcMessage<RoleServer>>,
    /// The last message handed over was a notification or a listen
    /// request, which the bound does not hold back (see `receive`).
    notified: bool,
}

/// Requests read past [`MAX_UNANSWERED`] and held, at most: up to then the
/// notifications after them are still read, so a client at the bound can
/// cancel a call (reading stopped at the bound, and a cancel sent there
/// was not read until some call ended on its own).
pub const MAX_HELD: usize = 8;

impl<R, W> StdioTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub fn new(read: R, write: W, longest_request: Duration) -> Self {
        StdioTransport {
            reader: LineReader::new(read),
            out: Arc::new(Mutex::new(Some(write))),
            buffers: FrameBuffers::default(),
            unanswered: Arc::new(Unanswered::new(longest_request)),
            longest_request,
            input_ended: None,
            refusal: None,
            on_input_end: None,
            held: VecDeque::new(),
            notified: false,
        }
    }

    /// Runs `end` once when the input ends, before waiting for the
    /// answers still owed.
    pub fn on_input_end(mut self, end: impl FnOnce() + Send + 'static) -> Self {
        self.on_input_end = Some(Box::new(end));
        self
    }

    /// Refuses a request whose id is still in flight (it is not run).
    /// Refuses a request whose id is taken: by a request still in flight,
    /// or (`cancelled`) by one the client cancelled, until its call is
    /// over. The id is echoed in the message by its head only.
    fn refuse_duplicate(&mut self, id: RequestId, cancelled: bool) {
        let shown = wasm_mcp_protocol::display_clipped(&id, 64);
        let by = match cancelled {
            true => "a request the client cancelled (use a new id)",
            false => "a request still in flight",
        };
        let error = ErrorData::invalid_request(
            format!("request id {shown} is already in use by {by}; this request was not run"),
            None,
        );
        self.answer_now(Answer::error(error, Some(id)));
    }

    /// The first held request once there is a place for it (`None`: none
    /// is held, or reading may go on while it waits). Cancel-safe: it is
    /// taken only when it is returned.
    async fn held_next(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        if self.held.is_empty() {
            return None;
        }
        // Nothing more to read (the input ended, or enough is held): wait.
        if self.held.len() >= MAX_HELD || self.input_ended.is_some() {
            self.unanswered.until_fewer_than(MAX_UNANSWERED).await;
        }
        if self.unanswered.counted() >= MAX_UNANSWERED {
            return None;
        }
        // Its deadline starts now: past the end of input, the wait for
        // answers does too (it was cut at the end's own deadline).
        if self.input_ended.is_some() {
            self.input_ended = Some(Instant::now() + self.longest_request);
        }
        // Not run once nobody can read their answers (the place may have
        // been freed by the very write that found stdout closed).
        if self.output_lost() {
            self.held.clear();
            return None;
        }
        self.held.pop_front()
    }

    /// `message` if it is let through; a request whose id is taken is
    /// answered with an error instead (`None`).
    fn admitted(
        &mut self,
        message: RxJsonRpcMessage<RoleServer>,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        match self.unanswered.admit(&message) {
            Admission::Pass => return Some(message),
            Admission::Duplicate(id) => {
                tracing::warn!("request refused: its id is still in flight");
                self.refuse_duplicate(id, false);
            }
            Admission::ReusesCancelled(id) => {
                tracing::warn!("request refused: its id is a cancelled request's");
                self.refuse_duplicate(id, true);
            }
        }
        None
    }

    /// Writes `message` from a task of its own: `receive` may be dropped at
    /// any await, and a frame must never be cut. The next line is read once
    /// it is written ([`StdioTransport::refusal_written`]).
    fn answer_now(&mut self, message: Answer) {
        let mut frame = Vec::new();
        if encode_frame_into(&mut frame, &message).is_err() {
            return;
        }
        let out = self.out.clone();
        self.refusal = Some(tokio::spawn(async move {
            let _ = write_frame(&out, &frame).await;
        }));
    }

    /// A write to stdout failed (the client closed its end): the writer was
    /// dropped. A write in progress holds the lock: not lost.
    fn output_lost(&self) -> bool {
        matches!(self.out.try_lock(), Ok(out) if out.is_none())
    }

    /// Waits for the last refusal to be written, so refusals a client does
    /// not read stop the reading as unanswered requests do (with stdout
    /// unread, 800 refused lines with 1 MiB ids held 889 MB). Cancel-safe:
    /// the write goes on, and a later call waits for it again.
    async fn refusal_written(&mut self) {
        if let Some(write) = &mut self.refusal {
            let _ = write.await;
            self.refusal = None;
        }
    }
}

/// The request `message` cancels, if it is a cancel naming one.
fn cancelled_id(message: &RxJsonRpcMessage<RoleServer>) -> Option<&RequestId> {
    match message {
        JsonRpcMessage::Notification(n) => match &n.notification {
            ClientNotification::CancelledNotification(c) => c.params.request_id.as_ref(),
            _ => None,
        },
        _ => None,
    }
}

/// One message as one line in `frame` (cleared first): JSON, then `\n`.
fn encode_frame_into<T: serde::Serialize>(frame: &mut Vec<u8>, message: &T) -> io::Result<()> {
    frame.clear();
    sonic_rs::to_writer(&mut *frame, message).map_err(io::Error::other)?;
    frame.push(b'\n');
    Ok(())
}

/// Frame buffers kept between frames. `sonic-rs` reserves room for the
/// worst case of every string it escapes (6 bytes per byte), so a fresh
/// buffer per frame was grown, copied and faulted in again for every long
/// string: a 64 KiB result cost 2× the floor (bench `sizes`), where 1–2 MiB
/// ones cost 1.4×.
#[derive(Clone, Default)]
struct FrameBuffers(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

/// Buffers kept (frames are written one at a time; a few may be encoded
/// while one is written).
const KEPT_BUFFERS: usize = 2;

/// Largest buffer kept (enough for results of ~150 KiB): a large result's
/// buffer (6× its longest string) is freed after its frame, so a server
/// keeps no more memory after one than before; measured, keeping those
/// did not make large results faster (mimalloc reuses the freed block).
const MAX_KEPT_BUFFER_BYTES: usize = 2 << 20;

impl FrameBuffers {
    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .expect("frame buffers")
            .pop()
            .unwrap_or_default()
    }

    fn give(&self, buf: Vec<u8>) {
        if buf.capacity() > MAX_KEPT_BUFFER_BYTES {
            return;
        }
        let mut kept = self.0.lock().expect("frame buffers");
        if kept.len() < KEPT_BUFFERS {
            kept.push(buf);
        }
    }
}

async fn write_frame<W: AsyncWrite + Unpin>(
    out: &Mutex<Option<W>>,
    frame: &[u8],
) -> io::Result<()> {
    let mut guard = out.lock().await;
    let Some(w) = guard.as_mut() else {
        return Err(io::Error::new(
            io::ErrorKind::NotConnected,
            "Transport is closed",
        ));
    };
    let written = match w.write_all(frame).await {
        Ok(()) => w.flush().await,
        Err(e) => Err(e),
    };
    if written.is_err() {
        // The client closed its end (or stdout failed): nothing more can
        // reach it, and `receive` ends the session.
        *guard = None;
    }
    written
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        // Encoded here, in the order rmcp hands messages over, not in the
        // write task: each send runs as its own task, and a large response
        // still encoding must not let a later notification overtake it.
        let answer_to = Unanswered::answer_id(&item);
        // A cancelled request gets no answer (the spec: no further message
        // for it).
        let dropped = answer_to
            .as_ref()
            .is_some_and(|id| self.unanswered.drops_answer(id));
        let mut frame = self.buffers.take();
        let encoded = match dropped {
            true => Ok(()),
            false => encode_frame_into(&mut frame, &item),
        };
        let (out, buffers) = (self.out.clone(), self.buffers.clone());
        let answers = answer_to.map(|id| (id, self.unanswered.clone()));
        async move {
            if dropped {
                buffers.give(frame);
                return Ok(());
            }
            encoded?;
            let written = write_frame(&out, &frame).await;
            buffers.give(frame);
            if let Some((id, unanswered)) = answers {
                unanswered.answered(&id);
            }
            written
        }
    }

    /// The next message to handle. Cancel-safe, as rmcp polls it in a
    /// `select!`: every wait here can be dropped and begun again.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // rmcp spawns a task per notification, and lines already
            // buffered are read without waiting on anything: a client
            // writing tiny notifications as fast as it could grew a backlog
            // of those tasks (3.7 GB from 3 million lines; a helper's find;
            // yielding only when the task's budget ran out still let half of
            // it grow). After each notification, its task runs first.
            if std::mem::take(&mut self.notified) {
                tokio::task::yield_now().await;
            }
            if let Some(message) = self.held_next().await {
                match self.admitted(message) {
                    Some(message) => return Some(message),
                    None => continue,
                }
            }
            if let Some(last) = self.input_ended {
                let answered = self.unanswered.until_fewer_than(1);
                if tokio::time::timeout_at(last, answered).await.is_err() {
                    tracing::warn!(
                        unanswered = self.unanswered.counted(),
                        "input ended; requests still unanswered at their deadline"
                    );
                }
                return None;
            }
            self.refusal_written().await;
            let line = match self.held.is_empty() {
                true => self.reader.next().await,
                // A place may free up with no more lines coming.
                false => tokio::select! {
                    line = self.reader.next() => line,
                    () = self.unanswered.until_fewer_than(MAX_UNANSWERED) => continue,
                },
            };
            let message = match line {
                Line::Message(message) => message,
                Line::Refused(answer) => {
                    self.answer_now(answer);
                    continue;
                }
                Line::Skipped => continue,
                Line::End => {
                    self.input_ended = Some(Instant::now() + self.longest_request);
                    if let Some(end) = self.on_input_end.take() {
                        end();
                    }
                    continue;
                }
            };
            if self.output_lost() {
                // Nothing it asks could be answered: its calls would run
                // (and write) unseen. Ends the session as end of input does.
                tracing::warn!("stdout is closed: ending the session");
                return None;
            }
            // At the bound, or behind a request held there, a request
            // waits; a notification does not: a cancel frees a place.
            let is_request = matches!(message, JsonRpcMessage::Request(_));
            let waits = !self.held.is_empty() || self.unanswered.counted() >= MAX_UNANSWERED;
            if is_request && waits {
                self.held.push_back(message);
                continue;
            }
            // A held request cancelled never runs (and is not answered).
            if let Some(id) = cancelled_id(&message) {
                self.held
                    .retain(|m| !matches!(m, JsonRpcMessage::Request(r) if &r.id == id));
            }
            if let Some(message) = self.admitted(message) {
                self.notified = match &message {
                    JsonRpcMessage::Notification(_) => true,
                    JsonRpcMessage::Request(r) => is_listen(r),
                    _ => false,
                };
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> io::Result<()> {
        // As rmcp's own transport does: dropping the writer closes stdout.
        // A write blocked on a client that reads nothing holds the writer,
        // and waiting for it kept the server running for good after its
        // input ended (a helper's find): not past CLOSE_WAIT (the process
        // exits, and stdout closes with it).
        match tokio::time::timeout(CLOSE_WAIT, self.out.lock()).await {
            Ok(mut out) => drop(out.take()),
            Err(_) => tracing::warn!(
                "stdout not read for {CLOSE_WAIT:?} at close: ending without the answers still being written"
            ),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{
        CallToolResult, ContentBlock, ErrorData, NumberOrString, ServerJsonRpcMessage, ServerResult,
    };
    use serde_json::{json, Value};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// One message's frame in a buffer of its own.
    fn encode_frame<T: serde::Serialize>(message: &T) -> io::Result<Vec<u8>> {
        let mut frame = Vec::new();
        encode_frame_into(&mut frame, message)?;
        Ok(frame)
    }

    fn messages() -> Vec<ServerJsonRpcMessage> {
        let awkward = "quote \" backslash \\ slash / controls \u{0}\u{1}\u{8}\u{c}\u{1f} \t\r\n \
                       non-ASCII é 日本 🦀 \u{2028}\u{2029} del \u{7f}";
        let long = format!("{}\n", "x".repeat(5000)).repeat(40);
        let mut structured = CallToolResult::structured(json!({
            "content": awkward,
            "long": long,
            "numbers": [0, -1, 1.5, 0.1, 1e300, -2.5e-300, 9007199254740993u64, i64::MIN, u64::MAX],
            "nested": {"b": [true, false, null], "a": {}},
        }));
        structured.content = vec![ContentBlock::text(awkward)];
        vec![
            ServerJsonRpcMessage::response(
                ServerResult::CallToolResult(structured),
                NumberOrString::Number(7),
            ),
            ServerJsonRpcMessage::error(
                ErrorData::invalid_params("bad \"args\"", Some(json!({"at": "/path"}))),
                Some(NumberOrString::String("id-\u{1}".into())),
            ),
        ]
    }

    #[test]
    fn frames_match_serde_json() {
        for m in messages() {
            let ours = encode_frame(&m).unwrap();
            assert_eq!(ours.last(), Some(&b'\n'));
            assert_eq!(ours.iter().filter(|&&b| b == b'\n').count(), 1, "one line");
            let ours: Value = serde_json::from_slice(&ours).unwrap();
            assert_eq!(ours, serde_json::to_value(&m).unwrap());
        }
    }

    /// A buffer that held a long frame gives the exact frame of a short
    /// message next (nothing of the long one left behind).
    #[test]
    fn a_reused_buffer_holds_only_its_own_frame() {
        let [long, short] = <[_; 2]>::try_from(messages()).ok().unwrap();
        let mut buf = Vec::new();
        encode_frame_into(&mut buf, &long).unwrap();
        let long_len = buf.len();
        encode_frame_into(&mut buf, &short).unwrap();
        assert!(buf.len() < long_len);
        assert_eq!(buf, encode_frame(&short).unwrap());
    }

    /// At most a few buffers are kept, none over the size limit.
    #[test]
    fn kept_buffers_are_few_and_bounded() {
        let buffers = FrameBuffers::default();
        buffers.give(Vec::with_capacity(MAX_KEPT_BUFFER_BYTES + 1));
        assert_eq!(
            buffers.0.lock().unwrap().len(),
            0,
            "an oversized buffer was kept"
        );
        for _ in 0..KEPT_BUFFERS + 3 {
            buffers.give(Vec::with_capacity(1024));
        }
        assert_eq!(buffers.0.lock().unwrap().len(), KEPT_BUFFERS);
        assert!(buffers.take().capacity() >= 1024);
    }

    /// Many concurrent sends plus rmcp's own error replies (bad frames on
    /// stdin) come out as whole lines, each parseable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn frames_never_interleave() {
        let (mut client_w, server_r) = tokio::io::duplex(1 << 16);
        let (server_w, client_r) = tokio::io::duplex(1 << 10);
        let mut t = StdioTransport::new(server_r, server_w, Duration::from_secs(5));
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(client_r).lines();
            let mut n = 0;
            while let Some(line) = lines.next_line().await.unwrap() {
                let v: Value = serde_json::from_str(&line).expect("a whole JSON line");
                assert_eq!(v["jsonrpc"], "2.0");
                n += 1;
            }
            n
        });
        // Well-formed JSON of the wrong shape: rmcp answers "Invalid Request".
        for _ in 0..5 {
            client_w
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1}\n")
                .await
                .unwrap();
        }
        client_w
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":2}\n")
            .await
            .unwrap();
        let sends: Vec<_> = (0..20)
            .flat_map(|_| messages())
            .map(|m| tokio::spawn(t.send(m)))
            .collect();
        let ping = t.receive().await.expect("the ping after the bad frames");
        assert!(matches!(ping, rmcp::model::JsonRpcMessage::Request(_)));
        for s in sends {
            s.await.unwrap().unwrap();
        }
        t.close().await.unwrap();
        drop(t);
        assert_eq!(reader.await.unwrap(), 40 + 5);
        assert!(matches!(
            t_closed_send().await.unwrap_err().kind(),
            io::ErrorKind::NotConnected
        ));
    }

    /// Closing does not wait for a write the client never reads: it kept
    /// the server running for good after its input ended.
    #[tokio::test]
    async fn close_does_not_wait_for_a_client_that_reads_nothing() {
        let (_a, r) = tokio::io::duplex(64);
        let (w, _unread) = tokio::io::duplex(64);
        let mut t = StdioTransport::new(r, w, Duration::from_secs(5));
        let blocked = tokio::spawn(t.send(messages().remove(0)));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!blocked.is_finished(), "the write did not block");
        let closing = tokio::time::timeout(CLOSE_WAIT * 2, t.close()).await;
        assert!(matches!(closing, Ok(Ok(()))), "close waited for the write");
    }

    async fn t_closed_send() -> io::Result<()> {
        let (_a, r) = tokio::io::duplex(64);
        let (w, _b) = tokio::io::duplex(64);
        let mut t = StdioTransport::new(r, w, Duration::from_secs(5));
        t.close().await?;
        t.send(messages().remove(0)).await
    }
}
