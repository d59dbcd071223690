//! Accepting connections for `serve --http`, with the bounds a server
//! facing clients it does not trust needs (axum's `serve` has none):
//!
//! - at most `max_connections` open at once (each connection is a
//!   descriptor of this process, whose limit the plugins' calls share:
//!   1,100 idle connections took the last one, and `read_file` failed). A
//!   connection past the bound takes the place of the one that has waited
//!   longest for a request (idle keep-alive, a head still coming, or a
//!   body still coming: [`Connections`], [`ServingMark`]), one never
//!   served before one between its requests; when every one is serving a
//!   request, it is closed as
//!   soon as it is accepted. Connections that send half a request head and
//!   wait out the header timeout, 300 at a time, kept every client with a
//!   token out (a helper's find); a client's own connection sends its head
//!   at once, so it is never the one that waited longest;
//! - [`HEADER_TIMEOUT`] to send a request's headers, counted from when the
//!   server waits for them, so an idle keep-alive connection, or one that
//!   trickles its headers, is closed (hyper's header read timeout, which
//!   needs a timer: without one it never fired);
//! - a client that leaves the server's writes waiting for
//!   [`WRITE_STALL_TIMEOUT`] is closed, with the slots its requests held
//!   ([`super::write_stall`]);
//! - graceful shutdown: on SIGINT/SIGTERM no new connection is taken, and
//!   those open finish their requests for up to [`SHUTDOWN_GRACE`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

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
    let open = Connections::new(max_connections);
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
        // Frames go out as written: a session's answer, streamed in small
        // writes, waited ~40 ms a request for the client's delayed ACK
        // (Nagle; a helper's find).
        let _ = stream.set_nodelay(true);
        let Some(conn) = open.admit().await else {
            refused(peer, max_connections);
            continue;
        };
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT);
        let service = TowerToHyperService::new(conn.serving(app.clone()));
        let served = graceful.watch(
            http.serve_connection(TokioIo::new(WriteStall::new(stream, write_stall)), service),
        );
        tokio::spawn(async move {
            tokio::select! {
                ended = served => if let Err(e) = ended {
                    tracing::debug!(%peer, "connection ended: {e}");
                },
                () = conn.evicted() => {
                    tracing::debug!(%peer, "connection closed for a new one: it waited longest for a request");
                }
            }
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

/// The open connections, each with whether it is serving a request.
struct Connections {
    slots: Arc<Semaphore>,
    open: Mutex<HashMap<u64, Arc<ConnState>>>,
    next: AtomicU64,
    epoch: Instant,
}

struct ConnState {
    /// Requests being served (HTTP/1.1 serves one at a time).
    serving: AtomicUsize,
    /// It has been served a request: a client's keep-alive connection
    /// between its requests, not one that never sent a whole one.
    served: std::sync::atomic::AtomicBool,
    /// When it last began to wait for a request, in µs since `epoch`.
    waiting_since: AtomicU64,
    /// The table's `Connections::epoch`.
    epoch: Instant,
    evict: CancellationToken,
}

impl ConnState {
    /// Marks the connection waiting for a request from now on.
    fn waiting_from_now(&self) {
        let now = self.epoch.elapsed().as_micros() as u64;
        self.waiting_since.store(now, Ordering::Release);
    }
}

/// One admitted connection: its slot and its entry, given back on drop.
struct Conn {
    id: u64,
    state: Arc<ConnState>,
    connections: Arc<Connections>,
    _slot: OwnedSemaphorePermit,
}

/// How long a new connection waits for the slot of the one it evicts.
const EVICTION_WAIT: Duration = Duration::from_millis(200);

impl Connections {
    fn new(max: usize) -> Arc<Self> {
        Arc::new(Connections {
            slots: Arc::new(Semaphore::new(max.max(1))),
            open: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    fn table(&self) -> MutexGuard<'_, HashMap<u64, Arc<ConnState>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new connection: a free one, or the one of the
    /// connection that has waited longest for a request, closed for it;
    /// `None` when every connection is serving one.
    async fn admit(self: &Arc<Self>) -> Option<Conn> {
        let slot = match self.slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                self.longest_waiting()?.evict.cancel();
                let freed = self.slots.clone().acquire_owned();
                tokio::time::timeout(EVICTION_WAIT, freed)
                    .await
                    .ok()?
                    .ok()?
            }
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState {
            serving: AtomicUsize::new(0),
            served: std::sync::atomic::AtomicBool::new(false),
            waiting_since: AtomicU64::new(0),
            epoch: self.epoch,
            evict: CancellationToken::new(),
        });
        state.waiting_from_now();
        self.table().insert(id, state.clone());
        Some(Conn {
            id,
            state,
            connections: self.clone(),
            _slot: slot,
        })
    }

    /// The connection to close for a new one: of those not serving a
    /// request, one that was never served (it sent nothing, or not a whole
    /// request) before one that was, the longest waiting first. Connections
    /// that connect and send nothing, made again as they are closed,
    /// otherwise closed the idle keep-alive connections of clients with a
    /// token between their requests (the official Python SDK then failed
    /// its session; a helper's find).
    fn longest_waiting(&self) -> Option<Arc<ConnState>> {
        self.table()
            .values()
            .filter(|c| c.serving.load(Ordering::Acquire) == 0 && !c.evict.is_cancelled())
            .min_by_key(|c| {
                let served = c.served.load(Ordering::Acquire);
                (served, c.waiting_since.load(Ordering::Acquire))
            })
            .cloned()
    }
}

impl Conn {
    /// Resolves when a new connection takes this one's place.
    async fn evicted(&self) {
        self.state.evict.cancelled().await
    }

    /// `app`, with this connection marked serving from each request's
    /// arrival (its body's, for one with a body: [`ServingMark`]) until its
    /// response body ends or is dropped.
    fn serving(&self, app: Router) -> Serving {
        Serving {
            app,
            state: self.state.clone(),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.connections.table().remove(&self.id);
    }
}

/// The app as one connection serves it ([`Conn::serving`]).
#[derive(Clone)]
struct Serving {
    app: Router,
    state: Arc<ConnState>,
}

/// Held while a request is served; its drop marks the connection waiting.
struct Busy(Arc<ConnState>);

impl Busy {
    fn start(state: Arc<ConnState>) -> Self {
        state.serving.fetch_add(1, Ordering::AcqRel);
        state.served.store(true, Ordering::Release);
        Busy(state)
    }
}

/// Marks its connection serving a request once [`ServingMark::start`] is
/// called (when the request's body has been read, or at once for a request
/// without one), until the last clone is dropped (the response body's end).
/// Until then the connection still waits for its request, and may be
/// closed for a new one: a POST whose head was in and whose body trickled
/// counted as serving, and 300 of them kept every other client out (a
/// helper's find). The MCP endpoint starts it after reading the body.
#[derive(Clone)]
pub struct ServingMark(Arc<(Arc<ConnState>, std::sync::OnceLock<Busy>)>);

impl ServingMark {
    pub fn start(&self) {
        self.0 .1.get_or_init(|| Busy::start(self.0 .0.clone()));
    }
}

/// Whether `req` has a body still to come (a length, or chunks).
fn has_body(req: &Request<Incoming>) -> bool {
    use axum::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
    let headers = req.headers();
    headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get(CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.waiting_from_now();
        self.0.serving.fetch_sub(1, Ordering::AcqRel);
    }
}

impl tower::Service<Request<Incoming>> for Serving {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future =
        std::pin::Pin<Box<dyn Future<Output = Result<Response, std::convert::Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<Incoming>) -> Self::Future {
        let mark = ServingMark(Arc::new((self.state.clone(), std::sync::OnceLock::new())));
        if !has_body(&req) {
            mark.start();
        }
        req.extensions_mut().insert(mark.clone());
        let app = self.app.clone();
        Box::pin(async move {
            let response = app.oneshot(req.map(Body::new)).await?;
            // Its answer is being written: serving, body read or not.
            mark.start();
            Ok(response.map(|body| super::holding(body, mark)))
        })
    }
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
