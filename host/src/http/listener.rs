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

use crate::repeats::Repeats;

/// Time a client has to send a request's headers (and the most a
/// connection stays idle between requests).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Time open connections get to finish at shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Default connections open at once (`--max-connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Serves `app` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    max_connections: usize,
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
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
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
