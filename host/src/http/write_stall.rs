//! A connection whose client reads nothing for [`WRITE_STALL_TIMEOUT`]
//! while the server has bytes for it is closed.
//!
//! A request holds its in-flight slot until its response body ends, and a
//! body cannot end while its client does not read: clients that sent calls
//! for large answers and never read them held their slots for good, so
//! every other request got 503 and the session worker behind their streams
//! (rmcp's, which writes each message inline) stopped with it (a helper's
//! find). hyper polls a response body only when it can write, so the bound
//! is on the socket: a write that has waited this long fails, hyper drops
//! the connection, its body, and the slot and stream it held.
//!
//! Only a write that is waiting counts: an idle listening stream (a GET
//! with nothing to send) is not stalled, and a slow client that reads some
//! bytes in time starts the clock again.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// How long a client may leave the server's writes waiting.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// `inner`, whose writes fail once one has waited `limit`.
pub struct WriteStall<S> {
    inner: S,
    limit: Duration,
    /// Set while a write waits: when it started waiting, as a timer.
    waiting: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteStall<S> {
    pub fn new(inner: S, limit: Duration) -> Self {
        WriteStall {
            inner,
            limit,
            waiting: None,
        }
    }

    /// What a write that returned `polled` comes to: its result once it is
    /// ready (the clock stops), else pending until `limit` has passed since
    /// it first waited, then an error.
    fn judged<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.waiting = None;
            return polled;
        }
        let limit = self.limit;
        let timer = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {limit:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteStall<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteStall<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.judged(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.judged(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.judged(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A write into a pipe nobody reads fails after the limit; one into a
    /// pipe being read goes through, however long it takes in all.
    #[tokio::test]
    async fn a_write_nobody_reads_fails_after_the_limit() {
        let limit = Duration::from_millis(200);
        let (near, _far) = tokio::io::duplex(1024);
        let mut stalled = WriteStall::new(near, limit);
        let t = std::time::Instant::now();
        let err = stalled.write_all(&[0; 4096]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(t.elapsed() >= limit, "{:?}", t.elapsed());

        let (near, mut far) = tokio::io::duplex(1024);
        let reader = tokio::spawn(async move {
            let mut buf = [0; 512];
            let mut n = 0;
            while n < 8192 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                n += tokio::io::AsyncReadExt::read(&mut far, &mut buf)
                    .await
                    .unwrap();
            }
        });
        let mut slow = WriteStall::new(near, limit);
        // 16 reads of 512 bytes 50 ms apart: 800 ms in all, 4× the limit.
        slow.write_all(&[0; 8192]).await.unwrap();
        reader.await.unwrap();
    }
}
