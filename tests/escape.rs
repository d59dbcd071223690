//! The sandbox escape suite: hostile inputs and a hostile plugin try to leave
//! the worktree, read the host, see the environment, hang, eat memory or
//! flood the output. Each attempt must be contained, reported as
//! `isError: true` where it fails, and the server must keep answering.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
mod support;
use support::{is_error, plugin_dir, text_of, Server};

const SECRET: &str = "TOP-SECRET-OUTSIDE-THE-WORKTREE";

/// tmp/secret.txt (outside), tmp/wt (the worktree) with escaping symlinks.
fn layout() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("secret.txt"), SECRET).unwrap();
    let wt = root.path().join("wt");
    std::fs::create_dir(&wt).unwrap();
    std::fs::write(wt.join("inside.txt"), "inside\n").unwrap();
    std::os::unix::fs::symlink(root.path().join("secret.txt"), wt.join("abs_link")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", wt.join("rel_link")).unwrap();
    std::os::unix::fs::symlink(root.path(), wt.join("dir_link")).unwrap();
    std::os::unix::fs::symlink("inside.txt", wt.join("ok_link")).unwrap();
    root
}

fn start(root: &Path, extra: &[&str]) -> (Server, tempfile::TempDir) {
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let (s, _) = Server::start(&root.join("wt"), plugins.path(), extra);
    (s, plugins)
}

fn escape_paths(root: &Path) -> Vec<String> {
    vec![
        "/etc/passwd".into(),
        "../secret.txt".into(),
        "/../secret.txt".into(),
        "../../../../../../etc/passwd".into(),
        root.join("secret.txt").display().to_string(),
        "abs_link".into(),
        "rel_link".into(),
        "dir_link/secret.txt".into(),
        "/proc/self/environ".into(),
    ]
}

fn assert_contained(r: &serde_json::Value, what: &str) {
    let all = r.to_string();
    assert!(!all.contains(SECRET), "{what} leaked the secret: {all}");
    assert!(
        !all.contains("root:x:0:0"),
        "{what} leaked /etc/passwd: {all}"
    );
}

#[test]
fn workspace_tools_cannot_leave_the_worktree() {
    let root = layout();
    let (mut s, _p) = start(root.path(), &[]);
    for path in escape_paths(root.path()) {
        let r = s.call("read_file", json!({"path": path}));
        assert!(is_error(&r), "read_file {path} succeeded: {r}");
        assert_contained(&r, &format!("read_file {path}"));
        let r = s.call("list_dir", json!({"path": path}));
        assert!(is_error(&r), "list_dir {path} succeeded: {r}");
    }
    // A symlink that stays inside is fine.
    let r = s.call("read_file", json!({"path": "ok_link"}));
    assert_eq!(r["structuredContent"]["content"], "inside\n", "{r}");
    // Writes cannot land outside either.
    for path in ["../escaped.txt", "dir_link/escaped.txt", "rel_link"] {
        let r = s.call("write_file", json!({"path": path, "content": "pwned"}));
        assert!(is_error(&r), "write_file {path} succeeded: {r}");
    }
    assert!(!root.path().join("escaped.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.path().join("secret.txt")).unwrap(),
        SECRET
    );
    // The git metadata of a linked worktree cannot be redirected.
    std::fs::write(root.path().join("wt/.git"), "gitdir: /original\n").unwrap();
    let r = s.call(
        "write_file",
        json!({"path": ".git", "content": "gitdir: /evil"}),
    );
    assert!(is_error(&r), "{r}");
    assert_eq!(
        std::fs::read_to_string(root.path().join("wt/.git")).unwrap(),
        "gitdir: /original\n"
    );
    // search walks the worktree only, never through dir_link.
    let r = s.call("search", json!({"pattern": "TOP-SECRET"}));
    assert_eq!(
        r["structuredContent"]["matches"].as_array().map(Vec::len),
        Some(0),
        "{r}"
    );
    assert!(s.alive());
}

#[test]
fn raw_filesystem_access_is_confined_by_the_sandbox() {
    let root = layout();
    let (mut s, _p) = start(root.path(), &[]);
    for path in escape_paths(root.path()) {
        let r = s.call("fs_read", json!({"path": path}));
        assert!(is_error(&r), "raw fs_read {path} succeeded: {r}");
        assert_contained(&r, &format!("fs_read {path}"));
    }
    for path in ["/", "/..", "..", "dir_link"] {
        let r = s.call("fs_list", json!({"path": path}));
        let text = r.to_string();
        assert!(
            !text.contains("secret.txt"),
            "fs_list {path} saw outside the worktree: {r}"
        );
    }
    for path in [
        "../escaped.txt",
        "/../escaped.txt",
        "dir_link/escaped.txt",
        "abs_link",
    ] {
        let _ = s.call("fs_write", json!({"path": path, "content": "pwned"}));
    }
    assert!(
        !root.path().join("escaped.txt").exists(),
        "a raw write escaped"
    );
    assert_eq!(
        std::fs::read_to_string(root.path().join("secret.txt")).unwrap(),
        SECRET
    );
    // The root of the sandbox is the worktree.
    let r = s.call("fs_read", json!({"path": "/inside.txt"}));
    assert_eq!(r["structuredContent"]["content"], "inside\n", "{r}");
    assert!(s.alive());
}

#[test]
fn no_environment_arguments_or_network() {
    let root = layout();
    let (mut s, _p) = start(root.path(), &[]);
    let r = s.call("env", json!({}));
    assert!(!is_error(&r), "{r}");
    let sc = &r["structuredContent"];
    assert_eq!(sc["vars"], json!({}), "guest saw env: {r}");
    assert_eq!(
        sc["args"].as_array().map(Vec::len).unwrap_or(0),
        0,
        "guest saw args: {r}"
    );
    assert!(!r.to_string().contains("should-not-be-visible"));
    let r = s.call("net", json!({}));
    let text = r.to_string();
    assert!(
        text.contains("error") || is_error(&r),
        "network call did not fail: {r}"
    );
    assert!(s.alive());
}

#[test]
fn an_infinite_loop_hits_the_deadline() {
    let root = layout();
    let (mut s, _p) = start(root.path(), &["--timeout-ms", "500"]);
    let t = Instant::now();
    let r = s.call("spin", json!({}));
    assert!(is_error(&r), "{r}");
    assert!(text_of(&r).contains("timed out"), "{r}");
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "deadline not enforced: {:?}",
        t.elapsed()
    );
    assert!(s.alive());
    let r = s.call("read_file", json!({"path": "inside.txt"}));
    assert!(!is_error(&r), "server unusable after a timeout: {r}");
}

#[test]
fn a_memory_bomb_hits_the_memory_limit() {
    let root = layout();
    let (mut s, _p) = start(root.path(), &["--memory-mb", "64"]);
    let r = s.call("alloc_bomb", json!({}));
    assert!(is_error(&r), "{r}");
    assert!(text_of(&r).contains("memory"), "{r}");
    assert!(s.alive());
    let r = s.call("read_file", json!({"path": "inside.txt"}));
    assert!(!is_error(&r), "{r}");
}

#[test]
fn huge_output_hits_the_output_cap() {
    let root = layout();
    let (mut s, _p) = start(root.path(), &["--max-output-bytes", "1048576"]);
    let r = s.call("flood", json!({"bytes": 8 << 20}));
    assert!(is_error(&r), "8 MiB output accepted");
    assert!(text_of(&r).contains("exceeds the cap"), "{}", text_of(&r));
    assert!(
        r.to_string().len() < 64 << 10,
        "the error itself must be small"
    );
    let r = s.call("flood", json!({"bytes": 1000}));
    assert!(!is_error(&r), "small output refused: {}", text_of(&r));
    assert!(s.alive());
}

#[test]
fn guest_stdout_never_reaches_the_protocol_stream() {
    let root = layout();
    let (mut s, _p) = start(root.path(), &[]);
    let r = s.call("stdout_spam", json!({}));
    assert!(!is_error(&r), "{r}");
    assert!(s.alive());
    assert!(
        s.garbage.is_empty(),
        "guest output on the protocol stream: {:?}",
        &s.garbage[..1]
    );
    assert!(s.shutdown().success());
}

#[test]
fn panics_and_contract_violations_are_tool_errors() {
    let root = layout();
    let (mut s, _p) = start(root.path(), &[]);
    let r = s.call("panic", json!({}));
    assert!(is_error(&r) && text_of(&r).contains("trap"), "{r}");
    let r = s.call("bad_output", json!({}));
    assert!(is_error(&r), "{r}");
    assert!(text_of(&r).contains("outputSchema"), "{r}");
    assert!(
        r.get("structuredContent").is_none(),
        "invalid output forwarded: {r}"
    );
    assert!(s.alive());
}

#[test]
fn a_trapping_call_does_not_block_concurrent_calls() {
    let root = layout();
    // The spin holds a core for its whole deadline; read_file must answer
    // well before that deadline ends, however loaded the other core is.
    let (mut s, _p) = start(root.path(), &["--timeout-ms", "10000"]);
    s.send_raw(&json!({"jsonrpc":"2.0","id":900,"method":"tools/call","params":{"name":"spin","arguments":{}}}).to_string());
    let t = Instant::now();
    let r = s.call("read_file", json!({"path": "inside.txt"}));
    assert!(!is_error(&r), "{r}");
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "read_file waited for the spinning call: {:?}",
        t.elapsed()
    );
    let spin = s
        .wait_response(900, Duration::from_secs(30))
        .expect("spin answered");
    assert!(is_error(&spin["result"]), "{spin}");
    assert!(s.alive());
}

#[test]
fn results_under_the_default_cap_fit_one_transport_frame() {
    let root = layout();
    let (mut s, _p) = start(root.path(), &[]);
    // Just under the 5 MiB default: served, and the response (result twice)
    // stays below the 16 MiB frame limit of stdio transports.
    let r = s.call("flood", json!({"bytes": (5 << 20) - 64}));
    assert!(
        !is_error(&r),
        "{}",
        text_of(&r).chars().take(200).collect::<String>()
    );
    assert!(r.to_string().len() < 16 << 20);
    let r = s.call("flood", json!({"bytes": 5 << 20}));
    assert!(
        is_error(&r) && text_of(&r).contains("exceeds the cap"),
        "{}",
        text_of(&r).chars().take(200).collect::<String>()
    );
    assert!(s.alive());
}

#[test]
fn frozen_clocks_show_no_time_real_clocks_do() {
    let root = layout();
    let host_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (mut real, _p) = start(root.path(), &[]);
    let r = real.call("clock", json!({}));
    let sc = &r["structuredContent"];
    assert!(
        sc["wall_secs"].as_u64().unwrap().abs_diff(host_now) < 120,
        "{r}"
    );
    assert!(sc["mono_elapsed_ns"].as_u64().unwrap() > 0, "{r}");

    let (mut frozen, _p2) = start(root.path(), &["--clocks", "frozen"]);
    let a = frozen.call("clock", json!({}))["structuredContent"].clone();
    std::thread::sleep(Duration::from_millis(1100));
    let b = frozen.call("clock", json!({}))["structuredContent"].clone();
    assert_eq!(a, b, "a frozen clock moved");
    assert_eq!(a["mono_elapsed_ns"], 0, "{a}");
    assert_eq!(a["wall_nanos"], 0, "{a}");
    assert!(
        a["wall_secs"].as_u64().unwrap().abs_diff(host_now) < 120,
        "frozen at server start: {a}"
    );
    // The deadline is the host's, not the guest's clock: still enforced.
    let (mut frozen_short, _p3) =
        start(root.path(), &["--clocks", "frozen", "--timeout-ms", "300"]);
    let r = frozen_short.call("spin", json!({}));
    assert!(is_error(&r) && text_of(&r).contains("timed out"), "{r}");
}
