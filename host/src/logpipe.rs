//! A bounded sink for guest stdout/stderr: keeps the first `cap` bytes for
//! the log and silently drops the rest, so a chatty plugin neither reaches
//! the protocol stream nor fails its own writes.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

#[derive(Default)]
struct Inner {
    kept: Vec<u8>,
    dropped: u64,
}

/// Cloneable handle: every clone writes into the same buffer.
#[derive(Clone)]
pub struct LogPipe {
    cap: usize,
    inner: Arc<Mutex<Inner>>,
}

impl LogPipe {
    pub fn new(cap: usize) -> Self {
        LogPipe {
            cap,
            inner: Arc::default(),
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut inner = self.inner.lock().unwrap();
        let room = self.cap.saturating_sub(inner.kept.len());
        let take = room.min(bytes.len());
        inner.kept.extend_from_slice(&bytes[..take]);
        inner.dropped += (bytes.len() - take) as u64;
    }

    /// What was kept (lossy UTF-8) and how many bytes were dropped.
    pub fn take(&self) -> (String, u64) {
        let mut inner = self.inner.lock().unwrap();
        let kept = std::mem::take(&mut inner.kept);
        let dropped = std::mem::take(&mut inner.dropped);
        (String::from_utf8_lossy(&kept).into_owned(), dropped)
    }
}

impl IsTerminal for LogPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogPipe {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for LogPipe {
    fn write(&mut self, bytes: bytes::Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 << 10)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LogPipe {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for LogPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_prefix_and_counts_the_rest() {
        let p = LogPipe::new(5);
        let mut w = p.clone();
        OutputStream::write(&mut w, bytes::Bytes::from_static(b"hello world")).unwrap();
        p.push(b"!!");
        assert_eq!(p.take(), ("hello".to_string(), 8));
        assert_eq!(p.take(), (String::new(), 0));
    }
}
