#![allow(dead_code)] // each test binary uses a different subset
//! Test support: a deliberately small, independent MCP client (raw
//! newline-delimited JSON-RPC over the child's stdio), so the tests check
//! the wire format rather than trusting the same SDK on both sides.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub mod http;

/// Root of the repository.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf() // host/ -> repo
}

/// The server binary built by cargo next to the test executables.
pub fn server_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_wasm-mcp"))
}

/// `wasm-agent` is built next to `wasm-mcp` by `cargo test --workspace`
/// (or `cargo build -p wasm-mcp-harness`).
#[allow(dead_code)] // not every suite uses it
pub fn agent_bin() -> PathBuf {
    let p = server_bin().with_file_name("wasm-agent");
    assert!(
        p.is_file(),
        "{} not built: run `cargo build -p wasm-mcp-harness --bin wasm-agent`",
        p.display()
    );
    p
}

/// A built plugin component under dist/.
pub fn plugin(rel: &str) -> PathBuf {
    let p = repo_root().join("dist").join(rel);
    assert!(
        p.is_file(),
        "{} not found: build the plugins with `just plugins`",
        p.display()
    );
    p
}

/// Compile cache shared by all tests (compiling once is enough).
pub fn cache_dir() -> PathBuf {
    repo_root().join("target").join("test-component-cache")
}

/// A directory of plugins made of copies of the given dist/ files.
pub fn plugin_dir(files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in files {
        let src = plugin(f);
        std::fs::copy(&src, dir.path().join(src.file_name().unwrap())).unwrap();
    }
    dir
}

/// Asserts that `wasm-mcp serve` refuses `flag=value` (given as one
/// argument) with exit code 2 and an error naming the flag.
#[allow(dead_code)] // not every suite uses it
pub fn assert_flag_refused(worktree: &Path, plugins: &Path, flag: &str, value: &str) {
    let out = std::process::Command::new(server_bin())
        .args(["serve", "--worktree"])
        .arg(worktree)
        .arg("--plugins")
        .arg(plugins)
        .arg(format!("{flag}={value}"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{flag}={value:?} was accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(flag), "{flag}={value:?}: {err}");
}

/// Run git in `repo`; panics with git's stderr on failure.
#[allow(unused_imports)] // not every suite uses it
pub use wasm_mcp_harness_testing::git;

/// A fresh git repo with one commit (Cargo.toml, README.md).
pub fn sample_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    wasm_mcp_harness_testing::init_repo(
        dir.path(),
        &[
            ("Cargo.toml", "[workspace]\nmembers = [\"a\"]\n"),
            ("README.md", "# sample\nA workspace for tests.\n"),
        ],
    );
    dir
}

/// A harness policy with one server `ws` running the real `wasm-mcp` on
/// `plugins` (plus `extra_args`), exposing `tools`, all auto-approved;
/// `read_only` tools are also marked idempotent. Written to `dir/policy.toml`.
pub fn write_policy(
    dir: &Path,
    plugins: &Path,
    extra_args: &[&str],
    tools: &[&str],
    read_only: &[&str],
    timeout_ms: u64,
) -> PathBuf {
    let quote = |v: &[&str]| {
        v.iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut args = vec!["serve", "--worktree", "{worktree}", "--plugins"];
    let (plugins, cache) = (
        plugins.display().to_string(),
        cache_dir().display().to_string(),
    );
    args.extend([plugins.as_str(), "--cache-dir", cache.as_str()]);
    args.extend(extra_args);
    let mut text = format!(
        "max_rounds = 16\n[approver]\nmode = \"non-interactive\"\nask_default = \"deny\"\n\n\
         [[servers]]\nid = \"ws\"\ncommand = {bin:?}\nargs = [{args}]\ncwd = \"{{worktree}}\"\n\
         env = {{ WASM_MCP_LOG = \"warn\" }}\nallowed_tools = [{tools}]\nprotocol_versions = [\"2025-11-25\"]\n\
         request_timeout_ms = {timeout_ms}\n",
        bin = server_bin().display().to_string(),
        args = quote(&args),
        tools = quote(tools),
    );
    for t in tools {
        text.push_str(&format!("\n[servers.tools.{t}]\napproval = \"auto\"\n"));
        if read_only.contains(t) {
            text.push_str("read_only = true\nidempotent = true\n");
        }
    }
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A server's captured log.
pub struct ServerLog {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl ServerLog {
    pub fn read(&self) -> String {
        std::fs::read_to_string(&self.path).unwrap()
    }
}

pub struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    /// Notifications received while waiting for responses.
    pub notifications: Vec<Value>,
    /// Every stdout line that was not valid JSON (must stay empty).
    pub garbage: Vec<String>,
}

pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

impl Server {
    /// Spawn `wasm-mcp serve` with the given worktree and plugin dir.
    pub fn spawn(worktree: &Path, plugins: &Path, extra: &[&str]) -> Server {
        Self::spawn_with_stderr(worktree, plugins, extra, Stdio::inherit())
    }

    /// Spawn and initialize with the server's log (stderr) captured to a
    /// file; read it with [`ServerLog::read`].
    pub fn start_logged(worktree: &Path, plugins: &Path, extra: &[&str]) -> (Server, ServerLog) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        let file = std::fs::File::create(&path).unwrap();
        let mut s = Self::spawn_with_stderr(worktree, plugins, extra, file.into());
        s.initialize();
        (s, ServerLog { _dir: dir, path })
    }

    /// Like [`Server::spawn`], with the server's stderr (its log) sent to `stderr`.
    fn spawn_with_stderr(worktree: &Path, plugins: &Path, extra: &[&str], stderr: Stdio) -> Server {
        Self::spawn_with(worktree, plugins, extra, stderr, "warn")
    }

    fn spawn_with(
        worktree: &Path,
        plugins: &Path,
        extra: &[&str],
        stderr: Stdio,
        log_level: &str,
    ) -> Server {
        let mut cmd = Command::new(server_bin());
        cmd.arg("serve")
            .arg("--worktree")
            .arg(worktree)
            .arg("--plugins")
            .arg(plugins)
            .arg("--cache-dir")
            .arg(cache_dir())
            .args(extra)
            .env("WASM_MCP_LOG", log_level)
            // A canary: the server process has it, guests must never see it.
            .env("WASM_MCP_CANARY", "should-not-be-visible")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = cmd.spawn().expect("spawn wasm-mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Server {
            child,
            stdin,
            lines: rx,
            next_id: 1,
            notifications: Vec::new(),
            garbage: Vec::new(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Spawn and complete the initialize handshake.
    pub fn start(worktree: &Path, plugins: &Path, extra: &[&str]) -> (Server, Value) {
        let mut s = Server::spawn(worktree, plugins, extra);
        let init = s.initialize();
        (s, init)
    }

    pub fn initialize(&mut self) -> Value {
        let r = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "wasm-mcp-tests", "version": "0"}
            }),
        );
        self.notify("notifications/initialized", json!({}));
        r
    }

    /// Writes `bytes` and a line end as they are (not necessarily UTF-8).
    #[allow(dead_code)] // not every suite uses it
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin closed");
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin closed");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Closes the server's stdin (the end of its input), keeping its
    /// output to read.
    #[allow(dead_code)] // not every suite uses it
    pub fn close_input(&mut self) {
        self.stdin.take();
    }

    /// The child's exit status once it has exited within `within`.
    #[allow(dead_code)] // not every suite uses it
    pub fn exit_within(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_raw(&msg.to_string());
    }

    /// Send a request and wait for its response (the whole JSON-RPC object).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&msg.to_string());
        self.wait_response(id, READ_TIMEOUT)
            .unwrap_or_else(|| panic!("no response to {method} (id {id})"))
    }

    /// Next message of any kind, or None on timeout/EOF.
    pub fn next_message(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => match serde_json::from_str::<Value>(&line) {
                    Ok(v) => return Some(v),
                    Err(_) => self.garbage.push(line),
                },
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    return None
                }
            }
        }
    }

    pub fn wait_response(&mut self, id: u64, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = self.next_message(left)?;
            if msg.get("id") == Some(&json!(id)) && msg.get("method").is_none() {
                return Some(msg);
            }
            self.notifications.push(msg);
        }
    }

    /// Wait for a notification with this method.
    pub fn wait_notification(&mut self, method: &str, timeout: Duration) -> Option<Value> {
        if let Some(i) = self
            .notifications
            .iter()
            .position(|n| n["method"] == method)
        {
            return Some(self.notifications.remove(i));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = self.next_message(left)?;
            if msg["method"] == method {
                return Some(msg);
            }
            self.notifications.push(msg);
        }
    }

    /// tools/call → the `result` object (panics on a JSON-RPC error).
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        match r.get("result") {
            Some(res) => res.clone(),
            None => panic!("tools/call {tool} returned a protocol error: {r}"),
        }
    }

    /// Every tool over all pages.
    pub fn list_all_tools(&mut self) -> Vec<Value> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..100 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let r = self.request("tools/list", params);
            let res = &r["result"];
            tools.extend(
                res["tools"]
                    .as_array()
                    .expect("tools array")
                    .iter()
                    .cloned(),
            );
            match res.get("nextCursor").and_then(|c| c.as_str()) {
                Some(c) => cursor = Some(c.to_string()),
                None => return tools,
            }
        }
        panic!("tools/list did not terminate within 100 pages");
    }

    /// Still answering? (ping round-trip)
    pub fn alive(&mut self) -> bool {
        let id = self.next_id;
        self.next_id += 1;
        self.send_raw(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string());
        self.wait_response(id, Duration::from_secs(20))
            .is_some_and(|r| r.get("result").is_some())
    }

    /// Close stdin and wait for a clean exit.
    pub fn shutdown(mut self) -> std::process::ExitStatus {
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                assert!(
                    self.garbage.is_empty(),
                    "non-JSON lines on stdout: {:?}",
                    self.garbage
                );
                return st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("server did not exit after stdin closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of the first content block of a tool result.
/// A memory figure of process `pid` from `/proc/PID/status` in bytes:
/// `VmRSS` (resident now) or `VmHWM` (its peak).
pub fn proc_memory_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| {
            l.strip_prefix(field)
                .is_some_and(|rest| rest.starts_with(':'))
        })
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

pub fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `field` of each object in the array `items`, as text.
#[allow(dead_code)] // not every suite uses it
pub fn each_str<'a>(items: &'a Value, field: &str) -> Vec<&'a str> {
    items
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {items}"))
        .iter()
        .map(|item| {
            item[field]
                .as_str()
                .unwrap_or_else(|| panic!("no {field}: {item}"))
        })
        .collect()
}

pub fn is_error(result: &Value) -> bool {
    result["isError"] == json!(true)
}

/// The server's error kind of a tool result (`_meta[ERROR_KIND_META]`), `""` if none.
pub fn error_kind(result: &Value) -> &str {
    result["_meta"][wasm_mcp_protocol::ERROR_KIND_META]
        .as_str()
        .unwrap_or("")
}

impl Server {
    /// Send a request and return its response line exactly as written (so
    /// tests can measure the frame), or None on timeout.
    pub fn request_raw(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Option<String> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&msg.to_string());
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).ok()?;
            match serde_json::from_str::<Value>(&line) {
                Ok(v) if v.get("id") == Some(&json!(id)) && v.get("method").is_none() => {
                    return Some(line)
                }
                Ok(v) => self.notifications.push(v),
                Err(_) => self.garbage.push(line),
            }
        }
    }
}

impl Server {
    /// Spawn without any handshake (the 2026-07-28 revision has none), with
    /// the server's log (at `info`) captured to a file.
    pub fn spawn_logged(worktree: &Path, plugins: &Path, extra: &[&str]) -> (Server, ServerLog) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        let file = std::fs::File::create(&path).unwrap();
        let info = wasm_mcp_host::DEFAULT_LOG_FILTER;
        let s = Self::spawn_with(worktree, plugins, extra, file.into(), info);
        (s, ServerLog { _dir: dir, path })
    }

    /// Send a request without waiting for its response; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&msg.to_string());
        id
    }
}
