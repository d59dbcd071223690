//! One MCP client connection, owned by a single task that opens and closes it.
//!
//! [`Connection::open`] spawns the owner task, which opens a [`Conduit`] via a
//! [`Connector`] (a child process from the policy, a Streamable HTTP endpoint,
//! or an in-process stream in tests), runs `initialize`, checks the negotiated protocol version against the
//! policy's allowlist and requires the `tools` capability. Everyone else holds a
//! cloneable [`ConnectionHandle`] that sends requests; only the owner closes.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientRequest, Implementation, ProtocolVersion,
};
use rmcp::service::{
    ClientInitializeError, NotificationContext, Peer, PeerRequestOptions, RoleClient,
    RunningService,
};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{oneshot, watch, Notify};

use crate::run::policy::LaunchSpec;
use crate::tools::faults::CallFault;
use crate::BoxFut;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot start server `{server}` ({program}): {source}")]
    Spawn {
        server: String,
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("server `{server}`: initialize failed: {message}")]
    Initialize { server: String, message: String },
    #[error("server `{server}`: initialize timed out after {timeout:?}")]
    InitTimeout { server: String, timeout: Duration },
    #[error("server `{server}` negotiated protocol version {negotiated}, allowed: {allowed:?}")]
    VersionRejected {
        server: String,
        negotiated: String,
        allowed: Vec<String>,
    },
    #[error("server `{server}` does not advertise the tools capability")]
    NoToolsCapability { server: String },
    #[error("server `{server}`: bearer token env var `{var}` {problem}")]
    Token {
        server: String,
        var: String,
        problem: &'static str,
    },
    #[error("server `{server}`: {message}")]
    Other { server: String, message: String },
}

/// How the messages reach a server, chosen once at connect; everything after
/// (handshake, discovery, calls, cancellation, timeouts) is the same for both.
pub enum Conduit {
    /// A byte stream of newline-delimited JSON-RPC (a child's stdio, or an
    /// in-process stream in tests), plus the child process if there is one.
    Stdio {
        reader: Box<dyn AsyncRead + Send + Unpin>,
        writer: Box<dyn AsyncWrite + Send + Unpin>,
        child: Option<tokio::process::Child>,
    },
    /// MCP Streamable HTTP (`super::http_transport`).
    Http(super::http_transport::HttpTransport),
}

impl Conduit {
    /// An in-process byte stream (no child).
    pub fn stream(
        reader: impl AsyncRead + Send + Unpin + 'static,
        writer: impl AsyncWrite + Send + Unpin + 'static,
    ) -> Self {
        Conduit::Stdio {
            reader: Box::new(reader),
            writer: Box::new(writer),
            child: None,
        }
    }

    /// Start `initialize` over this conduit. The child (if any) is handed
    /// back at once, so the owner can watch, kill and reap it whatever the
    /// handshake does.
    fn start(self, client: HarnessClient) -> (Handshake, Option<tokio::process::Child>) {
        match self {
            Conduit::Stdio {
                reader,
                writer,
                child,
            } => {
                let reader = super::frame_guard::guard(reader, super::frame_guard::MAX_FRAME_BYTES);
                (Box::pin(client.serve((reader, writer))), child)
            }
            Conduit::Http(transport) => (Box::pin(client.serve(transport)), None),
        }
    }
}

type Handshake =
    BoxFut<'static, Result<RunningService<RoleClient, HarnessClient>, ClientInitializeError>>;

/// Opens a fresh conduit to a server (called again on reconnect).
pub trait Connector: Send + Sync {
    fn open(&self) -> BoxFut<'_, Result<Conduit, ConnectError>>;
}

/// Spawns the policy's command: cleared env (only the listed vars + HOME), cwd
/// from the policy, stderr appended to a log file in the task's runtime dir.
pub struct ChildConnector {
    pub server_id: String,
    pub spec: LaunchSpec,
    pub stderr_log: Option<PathBuf>,
}

impl Connector for ChildConnector {
    fn open(&self) -> BoxFut<'_, Result<Conduit, ConnectError>> {
        Box::pin(async move {
            let spawn_err = |source| ConnectError::Spawn {
                server: self.server_id.clone(),
                program: self.spec.program.clone(),
                source,
            };
            let log = match &self.stderr_log {
                Some(p) => Some(
                    tokio::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(p)
                        .await
                        .map_err(spawn_err)?,
                ),
                None => None,
            };
            let stderr = match log {
                Some(_) => Stdio::piped(),
                None => Stdio::inherit(),
            };
            let mut cmd = tokio::process::Command::new(&self.spec.program);
            cmd.args(&self.spec.args)
                .current_dir(&self.spec.cwd)
                .env_clear()
                .envs(&self.spec.env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(stderr)
                // Own process group: a terminal's Ctrl-C reaches the harness,
                // which cancels calls and closes servers in order.
                .process_group(0)
                .kill_on_drop(true);
            let mut child = cmd.spawn().map_err(spawn_err)?;
            if let (Some(log), Some(from)) = (log, child.stderr.take()) {
                tokio::spawn(keep_stderr(from, log, MAX_STDERR_LOG_BYTES));
            }
            let stdin = child.stdin.take().expect("piped stdin");
            let stdout = child.stdout.take().expect("piped stdout");
            Ok(Conduit::Stdio {
                reader: Box::new(stdout),
                writer: Box::new(stdin),
                child: Some(child),
            })
        })
    }
}

/// Most bytes of a server's stderr kept in its log file per connection: a
/// server writing 50 MB there wrote a 50 MB file (a helper's find), and
/// nothing bounded it.
pub const MAX_STDERR_LOG_BYTES: u64 = 8 << 20;

/// Copies `from` (a server's stderr) into `log` up to `max` bytes, then a
/// line saying how much more there was; the rest is read and dropped, so
/// the server never blocks on a full pipe.
async fn keep_stderr(mut from: tokio::process::ChildStderr, mut log: tokio::fs::File, max: u64) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut kept = 0u64;
    let mut dropped = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let keep = (max - kept).min(n as u64) as usize;
        if keep > 0 && log.write_all(&buf[..keep]).await.is_err() {
            return;
        }
        kept += keep as u64;
        dropped += (n - keep) as u64;
    }
    if dropped > 0 {
        let note = format!("\n[wasm-agent: {dropped} more bytes of this server's stderr were not kept (at most {max} per connection)]\n");
        let _ = log.write_all(note.as_bytes()).await;
    }
    let _ = log.flush().await;
}

/// Client-side handler: records `notifications/tools/list_changed`.
#[derive(Clone)]
pub struct HarnessClient {
    config: ClientConfig,
    list_changed: Arc<AtomicBool>,
    notify: Arc<Notify>,
}

impl ClientHandler for HarnessClient {
    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        tracing::info!("server sent notifications/tools/list_changed");
        self.list_changed.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}

/// What the handshake established.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerFacts {
    pub protocol_version: String,
    pub server_name: Option<String>,
    pub tools_list_changed: bool,
}

/// Why the connection ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum ConnState {
    Open,
    Closed,
    /// Transport closed or the child exited without being asked to.
    Lost(String),
}

struct Inner {
    server_id: String,
    peer: Peer<RoleClient>,
    facts: ServerFacts,
    state: watch::Receiver<ConnState>,
    close_tx: Mutex<Option<oneshot::Sender<()>>>,
    owner: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    list_changed: Arc<AtomicBool>,
    notify: Arc<Notify>,
    /// Set to a reason: every request in flight sends `notifications/cancelled`.
    cancel: watch::Sender<Option<String>>,
    /// Signalled when the server forgot our session (HTTP): the owner ends
    /// the connection as lost, so it is reconnected at the next safe point.
    forgotten: Arc<Notify>,
}

/// Cloneable handle; requests go through the peer, lifecycle through the owner.
#[derive(Clone)]
pub struct ConnectionHandle(Arc<Inner>);

pub struct Connection;

impl Connection {
    /// Open a connection: spawn the owner task, handshake, check version + capability.
    pub async fn open(
        server_id: &str,
        connector: Arc<dyn Connector>,
        allowed_versions: &[String],
        init_timeout: Duration,
    ) -> Result<ConnectionHandle, ConnectError> {
        let server = server_id.to_string();
        let preferred: ProtocolVersion = serde_json::from_value(Value::String(
            newest_version(allowed_versions)
                .unwrap_or_default()
                .to_string(),
        ))
        .map_err(|e| ConnectError::Other {
            server: server.clone(),
            message: format!("bad protocol version: {e}"),
        })?;
        let list_changed = Arc::new(AtomicBool::new(false));
        let notify = Arc::new(Notify::new());
        let client = HarnessClient {
            config: ClientConfig::new(
                ClientCapabilities::default(),
                Implementation::new("wasm-mcp-harness", env!("CARGO_PKG_VERSION")),
            )
            .with_protocol_version(preferred),
            list_changed: list_changed.clone(),
            notify: notify.clone(),
        };
        let allowed = allowed_versions.to_vec();
        let (ready_tx, ready_rx) = oneshot::channel();
        let (close_tx, close_rx) = oneshot::channel::<()>();
        let (state_tx, state_rx) = watch::channel(ConnState::Open);
        let forgotten = Arc::new(Notify::new());
        let srv = server.clone();
        let owner_forgotten = forgotten.clone();
        let owner = tokio::spawn(async move {
            owner_task(
                srv,
                connector,
                client,
                allowed,
                init_timeout,
                ready_tx,
                close_rx,
                state_tx,
                owner_forgotten,
            )
            .await
        });
        let (peer, facts) = match ready_rx.await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                let _ = owner.await;
                return Err(e);
            }
            Err(_) => {
                return Err(ConnectError::Other {
                    server,
                    message: "connection owner task died".into(),
                })
            }
        };
        Ok(ConnectionHandle(Arc::new(Inner {
            server_id: server,
            peer,
            facts,
            state: state_rx,
            close_tx: Mutex::new(Some(close_tx)),
            owner: tokio::sync::Mutex::new(Some(owner)),
            list_changed,
            notify,
            cancel: watch::channel(None).0,
            forgotten,
        })))
    }
}

type Ready = Result<(Peer<RoleClient>, ServerFacts), ConnectError>;

#[allow(clippy::too_many_arguments)]
async fn owner_task(
    server: String,
    connector: Arc<dyn Connector>,
    client: HarnessClient,
    allowed: Vec<String>,
    init_timeout: Duration,
    ready: oneshot::Sender<Ready>,
    mut close_rx: oneshot::Receiver<()>,
    state: watch::Sender<ConnState>,
    forgotten: Arc<Notify>,
) {
    let conduit = match connector.open().await {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let (handshake, mut child) = conduit.start(client);
    let mut service = match tokio::time::timeout(init_timeout, handshake).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let _ = ready.send(Err(ConnectError::Initialize {
                server,
                message: initialize_error_text(&e),
            }));
            kill(child).await;
            return;
        }
        Err(_) => {
            let _ = ready.send(Err(ConnectError::InitTimeout {
                server,
                timeout: init_timeout,
            }));
            kill(child).await;
            return;
        }
    };
    let checked = check_handshake(&server, &service.peer().clone(), &allowed);
    match checked {
        Ok(facts) => {
            if ready.send(Ok((service.peer().clone(), facts))).is_err() {
                let _ = service.close_with_timeout(Duration::from_secs(2)).await;
                kill(child).await;
                return;
            }
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            let _ = service.close_with_timeout(Duration::from_secs(2)).await;
            kill(child).await;
            return;
        }
    }

    // The service loop ends when the transport closes: that is the signal.
    let cancel = service.cancellation_token();
    let mut service_done = Box::pin(service.waiting());
    let (end, service_running) = tokio::select! {
        _ = &mut close_rx => (ConnState::Closed, true),
        _ = forgotten.notified() => {
            (ConnState::Lost("the server no longer knows this session (HTTP 404)".into()), true)
        }
        status = wait_child(&mut child) => {
            (ConnState::Lost(format!("server process exited: {status}")), true)
        }
        _ = &mut service_done => (ConnState::Lost("transport closed".into()), false),
    };
    tracing::debug!(server, ?end, "closing MCP connection");
    let _ = state.send(end);
    if service_running {
        cancel.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(2), service_done).await;
    }
    if let Some(mut c) = child.take() {
        // stdin is closed now; give the server a moment to exit, then kill.
        if tokio::time::timeout(Duration::from_secs(2), c.wait())
            .await
            .is_err()
        {
            let _ = c.kill().await;
        }
    }
}

fn initialize_error_text(e: &ClientInitializeError) -> String {
    match e {
        ClientInitializeError::TransportError { error, context } => {
            format!(
                "{} ({context})",
                crate::tools::faults::transport_error_text(error)
            )
        }
        other => other.to_string(),
    }
}

async fn wait_child(child: &mut Option<tokio::process::Child>) -> String {
    match child {
        Some(c) => match c.wait().await {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        },
        None => std::future::pending().await,
    }
}

async fn kill(child: Option<tokio::process::Child>) {
    if let Some(mut c) = child {
        let _ = c.kill().await;
    }
}

/// Resolves with the reason once `cancel_in_flight` was called.
async fn cancelled(rx: &mut watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(r) = rx.borrow_and_update().clone() {
            return r;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

async fn send_cancelled(peer: &Peer<RoleClient>, id: rmcp::model::RequestId, reason: &str) {
    let params = rmcp::model::CancelledNotificationParam::new(Some(id), Some(reason.to_string()));
    let _ = peer.notify_cancelled(params).await;
}

/// The newest version in `allowed`, whatever the list order. MCP versions
/// are dates (`YYYY-MM-DD`), so the newest sorts last.
pub fn newest_version(allowed: &[String]) -> Option<&str> {
    allowed.iter().map(String::as_str).max()
}

fn check_handshake(
    server: &str,
    peer: &Peer<RoleClient>,
    allowed: &[String],
) -> Result<ServerFacts, ConnectError> {
    let info = peer.peer_info().ok_or_else(|| ConnectError::Other {
        server: server.into(),
        message: "no server info after initialize".into(),
    })?;
    let negotiated = info.protocol_version.to_string();
    if !allowed.contains(&negotiated) {
        return Err(ConnectError::VersionRejected {
            server: server.into(),
            negotiated,
            allowed: allowed.to_vec(),
        });
    }
    let Some(tools) = &info.capabilities.tools else {
        return Err(ConnectError::NoToolsCapability {
            server: server.into(),
        });
    };
    Ok(ServerFacts {
        protocol_version: negotiated,
        server_name: info.server_info.as_ref().map(|i| i.name.clone()),
        tools_list_changed: tools.list_changed.unwrap_or(false),
    })
}

impl ConnectionHandle {
    pub fn server_id(&self) -> &str {
        &self.0.server_id
    }

    pub fn facts(&self) -> &ServerFacts {
        &self.0.facts
    }

    pub fn state(&self) -> ConnState {
        self.0.state.borrow().clone()
    }

    pub fn is_alive(&self) -> bool {
        self.state() == ConnState::Open && !self.0.peer.is_transport_closed()
    }

    /// True once since the last call if the server sent `tools/list_changed`.
    pub fn take_list_changed(&self) -> bool {
        self.0.list_changed.swap(false, Ordering::SeqCst)
    }

    pub fn list_changed_pending(&self) -> bool {
        self.0.list_changed.load(Ordering::SeqCst)
    }

    /// Wait until a `list_changed` notification arrives (tests, watchers).
    pub async fn list_changed_notified(&self) {
        let n = self.0.notify.notified();
        if self.list_changed_pending() {
            return;
        }
        n.await
    }

    /// Send one request with a timeout; the result is the raw JSON of the response.
    /// rmcp's untagged `ServerResult` falls back to a custom result when one
    /// tool entry is off, so callers deserialize the typed result (e.g.
    /// `ListToolsResult`, `CallToolResult`) from this value once, themselves.
    pub async fn request(&self, req: ClientRequest, timeout: Duration) -> Result<Value, CallFault> {
        if !self.is_alive() {
            return Err(CallFault::NotConnected);
        }
        let mut cancel = self.0.cancel.subscribe();
        let fut = async {
            let handle = self
                .0
                .peer
                .send_request_with_option(req, PeerRequestOptions::with_timeout(timeout))
                .await
                .map_err(|e| self.fault(e, timeout))?;
            let (peer, id) = (handle.peer.clone(), handle.id.clone());
            tokio::select! {
                r = handle.await_response() => r.map_err(|e| self.fault(e, timeout)),
                reason = cancelled(&mut cancel) => {
                    send_cancelled(&peer, id, &reason).await;
                    Err(CallFault::Cancelled(reason))
                }
            }
        };
        // Belt and braces: rmcp enforces the timeout; this bounds it regardless.
        let result = match tokio::time::timeout(timeout + Duration::from_millis(500), fut).await {
            Ok(r) => r?,
            Err(_) => return Err(CallFault::Timeout(timeout)),
        };
        serde_json::to_value(result).map_err(|e| CallFault::Protocol(e.to_string()))
    }

    /// Classify a failed request; an error after which the connection is
    /// unusable (the server forgot our HTTP session) also ends it as lost.
    fn fault(&self, e: rmcp::service::ServiceError, timeout: Duration) -> CallFault {
        if let rmcp::service::ServiceError::TransportSend(t) = &e {
            if super::http_transport::session_forgotten(t) {
                self.0.forgotten.notify_one();
            }
        }
        CallFault::from_service(e, timeout)
    }

    /// Cancel every request in flight (and any sent later): each sends
    /// `notifications/cancelled` with `reason` and fails with `CallFault::Cancelled`.
    pub fn cancel_in_flight(&self, reason: &str) {
        self.0.cancel.send_replace(Some(reason.to_string()));
    }

    /// Ask the owner task to close, and wait for it (child reaped).
    pub async fn close(&self) {
        if let Some(tx) = self.0.close_tx.lock().unwrap().take() {
            let _ = tx.send(());
        }
        if let Some(owner) = self.0.owner.lock().await.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), owner).await;
        }
    }
}

#[cfg(test)]
mod stderr_tests {
    use super::*;

    /// A server's stderr is kept up to the bound, then noted, and read to
    /// its end (the server is never blocked by a full pipe).
    #[tokio::test]
    async fn a_server_s_stderr_is_kept_up_to_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.stderr.log");
        let log = tokio::fs::File::create(&path).await.unwrap();
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "head -c 300000 /dev/zero | tr '\\0' x >&2; echo done"])
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let from = child.stderr.take().unwrap();
        keep_stderr(from, log, 1000).await;
        let out = child.wait_with_output().await.unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(&"x".repeat(1000)), "{}", &text[..50]);
        assert!(
            text.contains("299000 more bytes of this server's stderr were not kept"),
            "{}",
            &text[1000..]
        );
        assert!(text.len() < 1200, "{}", text.len());
    }
}
