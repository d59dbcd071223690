//! The official SDK clients against `wasm-mcp serve` over stdio: Python
//! SDK 1.x (2025-11-25 handshake), Python SDK 2.x in its default mode
//! (`server/discover`, then 2026-07-28 with `subscriptions/listen`) and the
//! TypeScript SDK. Each runs tests/clients/* : pagination, a call, an
//! `isError` result, cancellation of a spinning tool with one call slot,
//! and `list_changed` after a plugin is copied in mid-session.
//!
//! The SDKs are installed by `scripts/test-mcp-servers.sh` (CI runs it
//! first); a test whose SDK is absent prints why and passes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod support;
use support::{cache_dir, plugin, plugin_dir, repo_root, server_bin};

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

/// Runs `client` (program + its args before `--`) against a fresh server;
/// asserts it printed PASS.
fn run_client(mut client: Command) {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("hello.txt"), "hello\n").unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let new_plugin = plugin("test-plugins/diskbomb.wasm");
    client
        .arg(plugins.path())
        .arg(new_plugin)
        .arg("--")
        .arg(server_bin())
        .args(["serve", "--worktree"])
        .arg(wt.path())
        .arg("--plugins")
        .arg(plugins.path())
        .arg("--cache-dir")
        .arg(cache_dir())
        .args([
            "--page-size",
            "1",
            "--max-concurrency",
            "1",
            "--watch-ms",
            "100",
        ])
        .args(["--timeout-ms", "20000"])
        .current_dir(wt.path())
        .env("WASM_MCP_LOG", "warn");
    let out = run_with_timeout(client, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("PASS"),
        "client failed ({}):\n{stdout}\n{stderr}",
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

#[test]
fn python_sdk_1x_client() {
    if let Some(cmd) = python_client(".venv") {
        run_client(cmd);
    }
}

#[test]
fn python_sdk_2x_default_client_speaks_2026_07_28_and_sees_hot_reload() {
    if let Some(cmd) = python_client(".venv-mcp2") {
        run_client(cmd);
    }
}

#[test]
fn typescript_sdk_client() {
    let sdk = repo_root().join(".cache/mcp-node/node_modules/@modelcontextprotocol/sdk");
    let Some(sdk) = needs(&sdk, "the TypeScript SDK") else {
        return;
    };
    let mut cmd = Command::new("node");
    cmd.arg(repo_root().join("tests/clients/ts_client.mjs"))
        .arg(sdk);
    run_client(cmd);
}
