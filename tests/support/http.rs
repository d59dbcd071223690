//! Test support for `wasm-mcp serve --http`: start the real binary on
//! 127.0.0.1:0, read the bound URL from its stderr, and speak raw HTTP
//! JSON-RPC to it (reqwest, no MCP SDK).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use super::{cache_dir, server_bin};

/// The 2026-07-28 revision: stateless, no session.
pub const STATELESS: &str = "2026-07-28";

/// A running `wasm-mcp serve --http` process; killed on drop.
pub struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
    /// `http://127.0.0.1:PORT`
    pub base: String,
}

impl HttpServer {
    /// Start on 127.0.0.1:0 with `extra` args and `env` vars.
    pub fn start(worktree: &Path, plugins: &Path, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(server_bin());
        cmd.args(["serve", "--http", "127.0.0.1:0", "--worktree"])
            .arg(worktree)
            .arg("--plugins")
            .arg(plugins)
            .arg("--cache-dir")
            .arg(cache_dir())
            .args(extra)
            .env("WASM_MCP_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn wasm-mcp");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("wasm-mcp: listening on ") {
                    let _ = tx.send(url.trim().to_string());
                } else {
                    eprintln!("[server] {line}");
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("server did not print its address");
        let base = url.trim_end_matches("/mcp").to_string();
        HttpServer { child, url, base }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM; how long the server took to exit (`None`: not
    /// within `within`).
    #[allow(dead_code)] // not every suite uses it
    pub fn terminate(&mut self, within: Duration) -> Option<Duration> {
        let sent = std::time::Instant::now();
        let pid = self.pid().to_string();
        let ok = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(ok.success(), "kill -TERM {pid}");
        while sent.elapsed() < within {
            if self.child.try_wait().unwrap().is_some() {
                return Some(sent.elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `wasm-mcp serve` expecting it to refuse to start; returns stderr.
pub fn refused_start(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(server_bin());
    cmd.arg("serve").args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(!out.status.success(), "server started: {args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `_meta` every 2026-07-28 request carries.
pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "http-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// A 2026-07-28 JSON-RPC request body.
pub fn stateless_request(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A POST with the MCP headers for `method` (no auth).
pub fn post(client: &reqwest::Client, url: &str, body: &Value) -> reqwest::RequestBuilder {
    let method = body["method"].as_str().unwrap_or("").to_string();
    let mut b = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", STATELESS)
        .header("Mcp-Method", &method)
        .json(body);
    if method == "tools/call" {
        b = b.header("Mcp-Name", body["params"]["name"].as_str().unwrap_or(""));
    }
    b
}

/// The JSON-RPC message in a response body (plain JSON or the last SSE
/// `data:` event that holds a response).
pub fn rpc_message(text: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return v;
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .rfind(|v| v.get("result").is_some() || v.get("error").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC response in body: {text}"))
}
