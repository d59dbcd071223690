//! Accepting connections for `serve --http`, with the bounds a server
//! facing clients it does not trust needs (axum's `serve` has none):
//!
//! - at most `max_connections` open at once: one past it is closed as soon
//!   as it is accepted (each connection is a descriptor of this process,
//!   whose limit the plugins' calls share: 1,100 idle connections took the
//!   last one, and `read_file` failed);
//! - [`HEADER_TIMEOUT`] to send a request's headers, counted from when the
//!   server waits for them, so an idle keep-alive connection, or one that
//!   trickles its headers, is closed (hyper's header read timeout, which
//!   needs a timer: without one it never fired);
//! - a client that leaves the server's writes waiting for
//!   [`WRITE_STALL_TIMEOUT`] is closed, with the slots its requests held
//!   ([`super::write_stall`]);
//! - graceful shutdown: on SIGINT/SIGTERM no new connection is taken, and
//!   those open finish their requests for up to [`SHUTDOWN_GRACE`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::write_stall::WriteStall;
#[cfg(doc)]
use super::write_stall::WRITE_STALL_TIMEOUT;
use crate::repeats::Repeats;

/// Time a client has to send a request's headers (and the most a
/// connection stays idle between requests).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Time open connections get to finish at shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Default connections open at once (`--max-connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Serves `app` on `listener` until `shutdown` resolves; a connection
/// whose writes wait `write_stall` ([`WRITE_STALL_TIMEOUT`]) is closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    max_connections: usize,
    write_stall: Duration,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let open = Arc::new(Semaphore::new(max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of descriptors and the like: wait, do not spin.
                Err(e) => {
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = open.clone().try_acquire_owned() else {
            refused(peer, max_connections);
            continue;
        };
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT);
        let service = TowerToHyperService::new(app.clone());
        let conn = graceful.watch(
            http.serve_connection(TokioIo::new(WriteStall::new(stream, write_stall)), service),
        );
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, "connection ended: {e}");
            }
            drop(slot);
        });
    }
    tracing::info!("HTTP server shutting down");
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {SHUTDOWN_GRACE:?}: closed");
    }
    Ok(())
}

/// A connection past the bound: closed (its stream dropped), logged the
/// first time and then at each power of two.
fn refused(peer: std::net::SocketAddr, max: usize) {
    static REFUSED: Repeats = Repeats::new();
    if let Some(n) = REFUSED.note() {
        tracing::warn!(%peer, refused = n, "connection closed: {max} already open (--max-connections)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A client that reads nothing of an endless answer is closed once the
    /// server's writes have waited `write_stall`; before, hyper kept the
    /// connection (and the body with what it held) for as long as the
    /// client kept its socket.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_reads_nothing_is_closed() {
        let endless = || async {
            let chunk = bytes::Bytes::from(vec![b'x'; 64 << 10]);
            let chunks =
                futures_util::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
            axum::body::Body::from_stream(chunks)
        };
        let app = Router::new().route("/", axum::routing::get(endless));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stall = Duration::from_millis(300);
        tokio::spawn(serve(listener, app, 4, stall, std::future::pending()));
        let outcome = tokio::task::spawn_blocking(move || {
            let mut tcp = std::net::TcpStream::connect(addr).unwrap();
            tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            std::thread::sleep(Duration::from_secs(2));
            tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let (mut got, mut buf) = (0usize, vec![0; 64 << 10]);
            loop {
                match tcp.read(&mut buf) {
                    Ok(0) => return Ok(got),
                    Ok(n) if got < 256 << 20 => got += n,
                    Ok(_) => return Err(format!("{got} bytes and still open")),
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(got),
                    Err(e) => return Err(format!("{e} after {got} bytes")),
                }
            }
        });
        let got = outcome.await.unwrap().expect("the connection was kept");
        assert!(got < 64 << 20, "{got} bytes");
    }
}
