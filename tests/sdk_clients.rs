//! The official SDK clients against `wasm-mcp serve`, over stdio and over
//! Streamable HTTP (`serve --http 127.0.0.1:0 --auth-token-env`, the client
//! sending the bearer token): Python SDK 1.x (2025-11-25 handshake), Python
//! SDK 2.x in its default mode (`server/discover`, then 2026-07-28 with
//! `subscriptions/listen`) and the TypeScript SDK. Each runs
//! tests/clients/* : pagination, a call, an `isError` result, cancellation
//! of a spinning tool with one call slot, and `list_changed` after a plugin
//! is copied in mid-session. The scenario is the same on both transports;
//! only how the client reaches the server differs.
//!
//! The SDKs are installed by `scripts/test-mcp-servers.sh` (CI runs it
//! first); a test whose SDK is absent prints why and passes.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod support;
use support::http::HttpServer;
use support::{cache_dir, plugin, plugin_dir, repo_root, server_bin};

/// How the client reaches the server.
#[derive(Clone, Copy, Debug)]
enum Transport {
    /// The client spawns the server (`-- COMMAND ARGS...`).
    Stdio,
    /// The test starts `serve --http` with a token; the client gets
    /// `--url URL` and the token in `MCP_TEST_TOKEN`.
    Http,
}

const TOKEN: &str = "sdk-clients-token-0123456789abcdef";

/// What a client needs to run, or why it is skipped.
fn needs(path: &Path, what: &str) -> Option<PathBuf> {
    if path.exists() {
        Some(path.to_path_buf())
    } else {
        eprintln!(
            "SKIPPED: {what} not found at {} (run scripts/test-mcp-servers.sh)",
            path.display()
        );
        None
    }
}

/// The scenario's server flags (after `serve`, without `--worktree`/`--plugins`).
const SCENARIO_FLAGS: &[&str] = &[
    "--page-size",
    "1",
    "--max-concurrency",
    "1",
    "--watch-ms",
    "100",
    "--timeout-ms",
    "20000",
];

/// Runs `client` (program + its args before the transport's) against a
/// fresh server reached over `transport`; asserts it printed PASS.
fn run_client(mut client: Command, transport: Transport) {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("hello.txt"), "hello\n").unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let new_plugin = plugin("test-plugins/diskbomb.wasm");
    client
        .arg(plugins.path())
        .arg(new_plugin)
        .current_dir(wt.path())
        .env("WASM_MCP_LOG", "warn");
    // Held until the client is done (killed on drop).
    let _server = match transport {
        Transport::Stdio => {
            client
                .arg("--")
                .args(stdio_command(wt.path(), plugins.path()));
            None
        }
        Transport::Http => {
            let mut flags = vec!["--auth-token-env", "SDK_SERVER_TOKEN"];
            flags.extend_from_slice(SCENARIO_FLAGS);
            let server = HttpServer::start(
                wt.path(),
                plugins.path(),
                &flags,
                &[("SDK_SERVER_TOKEN", TOKEN)],
            );
            client
                .args(["--url", &server.url])
                .env("MCP_TEST_TOKEN", TOKEN);
            Some(server)
        }
    };
    let out = run_with_timeout(client, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{transport:?}:\n{stdout}");
    assert!(
        out.status.success() && stdout.contains("PASS"),
        "client failed over {transport:?} ({}):\n{stdout}\n{stderr}",
        out.status
    );
    for check in [
        "ok pagination",
        "ok call",
        "ok isError",
        "ok cancellation",
        "ok list_changed",
    ] {
        assert!(stdout.contains(check), "{check} missing:\n{stdout}");
    }
}

/// `wasm-mcp serve` on stdio with the scenario's flags.
fn stdio_command(wt: &Path, plugins: &Path) -> Vec<OsString> {
    let mut cmd: Vec<OsString> = vec![server_bin().into(), "serve".into()];
    cmd.extend(["--worktree".into(), wt.as_os_str().to_owned()]);
    cmd.extend(["--plugins".into(), plugins.as_os_str().to_owned()]);
    cmd.extend(["--cache-dir".into(), cache_dir().into_os_string()]);
    cmd.extend(SCENARIO_FLAGS.iter().map(OsString::from));
    cmd
}

fn run_with_timeout(mut cmd: Command, limit: Duration) -> std::process::Output {
    use std::process::Stdio;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("client did not finish within {limit:?}");
        }
    }
}

fn python_client(venv: &str) -> Option<Command> {
    let python = needs(&repo_root().join(venv).join("bin/python"), venv)?;
    let mut cmd = Command::new(python);
    cmd.arg(repo_root().join("tests/clients/python_client.py"));
    Some(cmd)
}

fn typescript_client() -> Option<Command> {
    let sdk = repo_root().join(".cache/mcp-node/node_modules/@modelcontextprotocol/sdk");
    let sdk = needs(&sdk, "the TypeScript SDK")?;
    let mut cmd = Command::new("node");
    cmd.arg(repo_root().join("tests/clients/ts_client.mjs"))
        .arg(sdk);
    Some(cmd)
}

#[test]
fn python_sdk_1x_client() {
    if let Some(cmd) = python_client(".venv") {
        run_client(cmd, Transport::Stdio);
    }
}

#[test]
fn python_sdk_1x_client_over_http_with_a_token() {
    if let Some(cmd) = python_client(".venv") {
        run_client(cmd, Transport::Http);
    }
}

#[test]
fn python_sdk_2x_default_client_speaks_2026_07_28_and_sees_hot_reload() {
    if let Some(cmd) = python_client(".venv-mcp2") {
        run_client(cmd, Transport::Stdio);
    }
}

#[test]
fn python_sdk_2x_default_client_over_http_with_a_token() {
    if let Some(cmd) = python_client(".venv-mcp2") {
        run_client(cmd, Transport::Http);
    }
}

#[test]
fn typescript_sdk_client() {
    if let Some(cmd) = typescript_client() {
        run_client(cmd, Transport::Stdio);
    }
}

#[test]
fn typescript_sdk_client_over_http_with_a_token() {
    if let Some(cmd) = typescript_client() {
        run_client(cmd, Transport::Http);
    }
}
