//! Bad input on the wire: malformed, truncated and oversized frames,
//! unknown methods, requests before initialize, binary junk. The server must
//! answer what it can, drop what it cannot, and keep serving.

use std::time::Duration;

use serde_json::json;
mod support;
use support::{is_error, plugin, Server};

fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("a.txt"), "alpha\n").unwrap();
    let plugins = plugin("plugins/workspace.wasm")
        .parent()
        .unwrap()
        .to_path_buf();
    (wt, plugins)
}

#[test]
fn requests_before_initialize_get_errors_not_a_crash() {
    let (wt, plugins) = setup();
    let mut s = Server::spawn(wt.path(), &plugins, &[]);
    let r = s.request(
        "tools/call",
        json!({"name": "read_file", "arguments": {"path": "a.txt"}}),
    );
    assert!(
        r.get("error").is_some(),
        "call before initialize was served: {r}"
    );
    let init = s.initialize();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let r = s.call("read_file", json!({"path": "a.txt"}));
    assert_eq!(r["structuredContent"]["content"], "alpha\n");
    assert!(s.shutdown().success());
}

#[test]
fn malformed_truncated_and_junk_frames_are_survived() {
    let (wt, plugins) = setup();
    let (mut s, _) = Server::start(wt.path(), &plugins, &[]);
    for junk in [
        "{not json",
        r#"{"jsonrpc":"2.0","id":77,"method":"tools/list""#,
        "[]",
        "null",
        "12345",
        r#"{"jsonrpc":"1.0","id":78,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":{"nested":true},"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":79,"method":"tools/call","params":"not an object"}"#,
        r#"{"jsonrpc":"2.0","id":80,"method":"tools/call","params":{"name":42}}"#,
        "\u{0}\u{1}\u{2}binary\u{7f}",
        "",
    ] {
        s.send_raw(junk);
    }
    assert!(s.alive(), "server died on junk frames");
    let r = s.call("read_file", json!({"path": "a.txt"}));
    assert!(!is_error(&r), "{r}");
    assert!(s.shutdown().success());
}

#[test]
fn unknown_methods_get_method_not_found() {
    let (wt, plugins) = setup();
    let (mut s, _) = Server::start(wt.path(), &plugins, &[]);
    let r = s.request("no/such/method", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = s.request("resources/list", json!({}));
    assert!(r.get("error").is_some(), "resources are not offered: {r}");
    assert!(s.alive());
}

#[test]
fn an_oversized_frame_is_refused_and_the_session_continues() {
    let (wt, plugins) = setup();
    let (mut s, _) = Server::start(wt.path(), &plugins, &[]);
    // 20 MiB of arguments in one line: above the transport's 16 MiB frame cap.
    let huge = "z".repeat(20 << 20);
    let frame = json!({"jsonrpc":"2.0","id":500,"method":"tools/call",
        "params":{"name":"write_file","arguments":{"path":"huge.txt","content": huge}}});
    s.send_raw(&frame.to_string());
    assert!(s.alive(), "server died on an oversized frame");
    // Refused by its id (-32600, not read), never executed; the answer may
    // have come while `alive` waited for its ping.
    let answered = |m: &serde_json::Value| m["id"] == json!(500);
    let r = match s.notifications.iter().position(answered) {
        Some(i) => s.notifications.remove(i),
        None => s
            .wait_response(500, Duration::from_secs(20))
            .expect("the oversized request is answered"),
    };
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(r.to_string().contains("longer than"), "{r}");
    assert!(!wt.path().join("huge.txt").exists());
    // A large but legal write_file (3 MiB) is refused by the tool's own cap.
    let r = s.call(
        "write_file",
        json!({"path": "big.txt", "content": "q".repeat(3 << 20)}),
    );
    assert!(is_error(&r), "3 MiB write accepted");
    assert!(!wt.path().join("big.txt").exists());
    assert!(s.alive());
}

#[test]
fn bad_command_lines_fail_fast_with_a_clear_error() {
    let (wt, plugins) = setup();
    let missing = wt.path().join("no-such-dir");
    let cases: Vec<(Vec<std::ffi::OsString>, &str)> = vec![
        (
            vec![
                "--worktree".into(),
                missing.clone().into(),
                "--plugins".into(),
                plugins.clone().into(),
            ],
            "worktree",
        ),
        (
            vec![
                "--worktree".into(),
                wt.path().into(),
                "--plugins".into(),
                missing.clone().into(),
            ],
            "plugin dir",
        ),
        (
            vec![
                "--worktree".into(),
                wt.path().join("a.txt").into(),
                "--plugins".into(),
                plugins.clone().into(),
            ],
            "not a directory",
        ),
    ];
    for (args, want) in cases {
        let out = std::process::Command::new(support::server_bin())
            .arg("serve")
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} started");
        assert!(out.stdout.is_empty(), "{args:?} wrote to stdout");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("wasm-mcp: error:") && err.contains(want),
            "{args:?}: {err}"
        );
    }
}
