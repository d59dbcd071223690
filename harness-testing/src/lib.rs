//! A scriptable in-process fake MCP server (raw JSON-RPC over `tokio::io::duplex`),
//! for tests of the client side. Its misbehaviours are controlled by [`FakeConfig`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use wasm_mcp_harness::mcp::connection::{Conduit, ConnectError, Connector};
use wasm_mcp_harness::BoxFut;

#[derive(Debug, Clone)]
pub enum Behavior {
    /// `structuredContent` = arguments, plus a text block.
    Echo,
    /// Reply with this exact `result` object.
    Result(Value),
    /// Sleep, then echo.
    Sleep(Duration),
    /// Close the connection without answering.
    Die,
    /// Send `notifications/tools/list_changed` after replacing the listing, then echo.
    ChangeTools(Vec<Vec<Value>>),
    /// Write this exact line (no newline) as the answer; `{id}` is replaced
    /// by the request id. For oversized or malformed frames.
    RawLine(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CursorMode {
    Normal,
    /// Every page returns cursor "same".
    Repeat,
    /// Always another page with a fresh cursor.
    Endless,
    /// The last page says `"nextCursor": ""` (some servers end a list so).
    EmptyAtEnd,
}

#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// Version to answer `initialize` with; `None` echoes the client's.
    pub protocol_version: Option<String>,
    pub tools_capability: bool,
    pub pages: Vec<Vec<Value>>,
    pub cursor_mode: CursorMode,
    pub behaviors: HashMap<String, Behavior>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        Self {
            protocol_version: None,
            tools_capability: true,
            pages: vec![vec![tool("read_file"), tool("list_dir")]],
            cursor_mode: CursorMode::Normal,
            behaviors: HashMap::new(),
        }
    }
}

/// A well-formed tool with `{path: string}` input.
pub fn tool(name: &str) -> Value {
    json!({
        "name": name,
        "description": format!("fake {name}"),
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    })
}

/// A tool with an output schema requiring `{path: string}`.
pub fn tool_with_output(name: &str) -> Value {
    let mut t = tool(name);
    t["outputSchema"] =
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    t
}

#[derive(Default)]
pub struct FakeState {
    pub config: Mutex<FakeConfig>,
    /// (tool name, arguments) of every tools/call received.
    pub calls: Mutex<Vec<(String, Value)>>,
    pub list_requests: AtomicUsize,
    pub connections: AtomicUsize,
    pub cancellations: AtomicUsize,
}

#[derive(Clone)]
pub struct FakeServer(pub Arc<FakeState>);

impl FakeServer {
    pub fn new(config: FakeConfig) -> Self {
        let s = FakeState::default();
        *s.config.lock().unwrap() = config;
        Self(Arc::new(s))
    }

    pub fn calls(&self) -> Vec<(String, Value)> {
        self.0.calls.lock().unwrap().clone()
    }

    pub fn connector(&self) -> Arc<dyn Connector> {
        Arc::new(self.clone())
    }
}

impl Connector for FakeServer {
    fn open(&self) -> BoxFut<'_, Result<Conduit, ConnectError>> {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (cr, cw) = tokio::io::split(client);
        let state = self.0.clone();
        state.connections.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(serve(state, server));
        Box::pin(async move { Ok(Conduit::stream(cr, cw)) })
    }
}

async fn serve(state: Arc<FakeState>, io: tokio::io::DuplexStream) {
    let (r, mut w) = tokio::io::split(io);
    let (tx, mut rx) = mpsc::unbounded_channel::<Option<Value>>();
    let writer = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let Some(msg) = msg else { break }; // None = die
                                                // A bare string is never a JSON-RPC message: it is a raw line.
            let mut line = match msg {
                Value::String(raw) => raw,
                msg => msg.to_string(),
            };
            line.push('\n');
            if w.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
        let _ = w.shutdown().await;
    });
    let mut lines = BufReader::new(r).lines();
    let mut tasks = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        if writer.is_finished() {
            break;
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let method = msg["method"].as_str().unwrap_or("").to_string();
        let id = msg.get("id").cloned();
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id.clone(), "result": result});
        match method.as_str() {
            "initialize" => {
                let cfg = state.config.lock().unwrap().clone();
                let version = cfg.protocol_version.clone().unwrap_or_else(|| {
                    params["protocolVersion"].as_str().unwrap_or("").to_string()
                });
                let mut caps = json!({});
                if cfg.tools_capability {
                    caps["tools"] = json!({"listChanged": true});
                }
                let _ = tx.send(Some(reply(json!({
                    "protocolVersion": version,
                    "capabilities": caps,
                    "serverInfo": {"name": "fake", "version": "0"},
                }))));
            }
            "tools/list" => {
                state.list_requests.fetch_add(1, Ordering::SeqCst);
                let cfg = state.config.lock().unwrap().clone();
                let page: usize = params["cursor"]
                    .as_str()
                    .and_then(|c| c.strip_prefix('p'))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let tools = match cfg.cursor_mode {
                    CursorMode::Endless => vec![],
                    _ => cfg.pages.get(page).cloned().unwrap_or_default(),
                };
                let next = match cfg.cursor_mode {
                    CursorMode::Normal => {
                        (page + 1 < cfg.pages.len()).then(|| format!("p{}", page + 1))
                    }
                    CursorMode::Repeat => Some("p0".to_string()),
                    CursorMode::EmptyAtEnd => Some(match page + 1 < cfg.pages.len() {
                        true => format!("p{}", page + 1),
                        false => String::new(),
                    }),
                    CursorMode::Endless => Some(format!("p{}", page + 1)),
                };
                let mut result = json!({"tools": tools});
                if let Some(n) = next {
                    result["nextCursor"] = json!(n);
                }
                let _ = tx.send(Some(reply(result)));
            }
            "tools/call" => {
                let name = params["name"].as_str().unwrap_or("").to_string();
                let args = params.get("arguments").cloned().unwrap_or(json!({}));
                state
                    .calls
                    .lock()
                    .unwrap()
                    .push((name.clone(), args.clone()));
                let behavior = state
                    .config
                    .lock()
                    .unwrap()
                    .behaviors
                    .get(&name)
                    .cloned()
                    .unwrap_or(Behavior::Echo);
                let echo = json!({
                    "content": [{"type": "text", "text": args.to_string()}],
                    "structuredContent": args,
                });
                let tx = tx.clone();
                let state = state.clone();
                let id = id.clone();
                tasks.push(tokio::spawn(async move {
                    let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
                    match behavior {
                        Behavior::Echo => {
                            let _ = tx.send(Some(reply(echo)));
                        }
                        Behavior::Result(r) => {
                            let _ = tx.send(Some(reply(r)));
                        }
                        Behavior::Sleep(d) => {
                            tokio::time::sleep(d).await;
                            let _ = tx.send(Some(reply(echo)));
                        }
                        Behavior::Die => {
                            let _ = tx.send(None);
                        }
                        Behavior::RawLine(template) => {
                            let id = id.map(|i| i.to_string()).unwrap_or_default();
                            let _ = tx.send(Some(Value::String(template.replace("{id}", &id))));
                        }
                        Behavior::ChangeTools(pages) => {
                            state.config.lock().unwrap().pages = pages;
                            let _ = tx.send(Some(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})));
                            let _ = tx.send(Some(reply(echo)));
                        }
                    }
                }));
            }
            "ping" => {
                let _ = tx.send(Some(reply(json!({}))));
            }
            "notifications/cancelled" => {
                state.cancellations.fetch_add(1, Ordering::SeqCst);
            }
            m if m.starts_with("notifications/") => {}
            _ => {
                if id.is_some() {
                    let _ = tx.send(Some(json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32601, "message": "method not found"}})));
                }
            }
        }
    }
    for t in tasks {
        t.abort();
    }
    drop(tx);
    let _ = writer.await;
}

/// A tiny stand-in for an OpenAI-compatible `POST /v1/chat/completions` on
/// 127.0.0.1: answers the i-th request with `replies[i]` and records each
/// request as (request line, authorization header, JSON body). Returns the
/// base URL (`http://127.0.0.1:<port>/v1`).
#[allow(clippy::type_complexity)]
pub async fn openai_standin(
    replies: Vec<Value>,
) -> (String, Arc<Mutex<Vec<(String, String, Value)>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    tokio::spawn(async move {
        for reply in replies {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let mut buf = Vec::new();
            let mut tmp = [0u8; 4096];
            let (head_end, len) = loop {
                let n = sock.read(&mut tmp).await.unwrap();
                assert!(n > 0, "client closed early");
                buf.extend_from_slice(&tmp[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                    let len = head
                        .lines()
                        .find_map(|l| {
                            l.strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    break (i + 4, len);
                }
            };
            while buf.len() < head_end + len {
                let n = sock.read(&mut tmp).await.unwrap();
                buf.extend_from_slice(&tmp[..n]);
            }
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let request_line = head.lines().next().unwrap_or("").to_string();
            let auth = head
                .lines()
                .find(|l| l.to_lowercase().starts_with("authorization:"))
                .unwrap_or("")
                .to_string();
            let body: Value = serde_json::from_slice(&buf[head_end..head_end + len]).unwrap();
            seen2.lock().unwrap().push((request_line, auth, body));
            let out = reply.to_string();
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{out}",
                out.len()
            );
            sock.write_all(resp.as_bytes()).await.unwrap();
            let _ = sock.shutdown().await;
        }
    });
    (format!("http://{addr}/v1"), seen)
}

/// A temp dir on tmpfs when there is one (deleting 30,000 directories on a
/// busy disk takes most of a minute; on tmpfs under a second).
pub fn fast_tempdir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().expect("temp dir")
}

/// Build a directory chain `depth` levels deep under `root/name` using only
/// short paths (for tests of hostile trees).
pub fn build_deep_chain(root: &std::path::Path, name: &str, depth: usize) -> std::io::Result<()> {
    let top = root.join(name);
    let tmp = root.join(format!("{name}.tmp"));
    std::fs::create_dir(&top)?;
    std::fs::write(top.join("leaf.txt"), "deep\n")?;
    for _ in 1..depth {
        std::fs::create_dir(&tmp)?;
        std::fs::rename(&top, tmp.join("d"))?;
        std::fs::rename(&tmp, &top)?;
    }
    Ok(())
}

/// Run `git -C repo ARGS` (the user's own git: their config, no isolation)
/// and return its stdout as is; panics with git's stderr on failure.
pub fn git(repo: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `dir/repo`, created and made a git repository by [`init_repo`] with `files`.
pub fn repo_in(dir: &std::path::Path, files: &[(&str, &str)]) -> std::path::PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).expect("create repo dir");
    init_repo(&repo, files);
    repo
}

/// Make `repo` (an existing directory) a git repository on branch `main`
/// with one commit `init` holding `files` (path, content).
pub fn init_repo(repo: &std::path::Path, files: &[(&str, &str)]) {
    git(repo, &["init", "-q", "-b", "main"]);
    for (path, content) in files {
        let path = repo.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent dir");
        }
        std::fs::write(path, content).expect("write file");
    }
    git(repo, &["add", "."]);
    git(
        repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    );
}
