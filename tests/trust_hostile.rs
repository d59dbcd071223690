//! The trust model against hostile plugins and hostile set-ups: every
//! write path under grants that allow no writes, pins and signatures
//! attacked on disk while serving, grants that ask for too much or point
//! where they should not, and an audit log that every call reaches.
//! Each test drives the real `wasm-mcp` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
mod support;
use support::{is_error, plugin, plugin_dir, server_bin, text_of, Server};

fn cli(args: &[&str]) -> Output {
    Command::new(server_bin())
        .args(args)
        .stdin(Stdio::null())
        .env("WASM_MCP_LOG", "warn")
        .output()
        .unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn error_kind(r: &Value) -> &str {
    r["_meta"]["wasm-mcp/errorKind"].as_str().unwrap_or("")
}

fn names(tools: &[Value]) -> Vec<String> {
    let mut n: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

/// A config file in its own directory (kept alive by the returned guard).
fn config(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("grants.toml");
    std::fs::write(&p, text).unwrap();
    (dir, p)
}

/// A server on `wt` with `plugins` under the grants `cfg` (plus `extra`).
fn start_granted(wt: &Path, plugins: &[&str], cfg: &str, extra: &[&str]) -> (Server, Guards) {
    let dir = plugin_dir(plugins);
    let (cfg_dir, cfg) = config(cfg);
    let mut args = vec!["--config", s(&cfg)];
    args.extend(extra);
    let (srv, _) = Server::start(wt, dir.path(), &args);
    (srv, Guards(dir, cfg_dir))
}

/// Temp dirs a server needs alive.
struct Guards(
    #[allow(dead_code)] tempfile::TempDir,
    #[allow(dead_code)] tempfile::TempDir,
);

/// A worktree with a file, a directory and a file inside it: something to
/// change for every mutation.
fn victim_worktree() -> tempfile::TempDir {
    let wt = tempfile::tempdir().unwrap();
    let w = wt.path();
    std::fs::create_dir_all(w.join("src/dir")).unwrap();
    std::fs::write(w.join("keep.txt"), "kept\n").unwrap();
    std::fs::write(w.join("src/a.txt"), "a\n").unwrap();
    wt
}

/// Every file and directory under `root` with its content (files) and
/// modification time: what a refused change must leave as it was.
fn snapshot(root: &Path) -> Vec<(PathBuf, Option<String>, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let content = meta.is_file().then(|| std::fs::read_to_string(&p).unwrap());
            if meta.is_dir() {
                todo.push(p.clone());
            }
            out.push((p, content, meta.modified().unwrap()));
        }
    }
    out.sort();
    out
}

/// Each mutation of the hostile plugin, with paths that exist in
/// [`victim_worktree`] (`base` prefixes them: "" or "src/").
fn mutations(base: &str) -> Vec<(&'static str, String, String)> {
    let p = |rel: &str| format!("{base}{rel}");
    let file = if base.is_empty() { "keep.txt" } else { "a.txt" };
    vec![
        ("create", p("new.txt"), String::new()),
        ("write", p(file), String::new()),
        ("write_read_only_fd", p(file), String::new()),
        ("truncate", p(file), String::new()),
        ("append", p(file), String::new()),
        ("rename", p(file), p("moved.txt")),
        ("remove", p(file), String::new()),
        ("rmdir", "src/dir".into(), String::new()),
        ("mkdir", p("newdir"), String::new()),
        ("symlink", p("link"), "keep.txt".into()),
        ("hardlink", p(file), p("hard.txt")),
        ("set_times", p(file), String::new()),
    ]
}

/// Mutations that first open an existing file for reading: where the
/// plugin sees no file they end in the guest (not found) before any
/// change is attempted.
const THROUGH_A_READ_DESCRIPTOR: [&str; 3] = ["write_read_only_fd", "truncate", "set_times"];

/// Runs every mutation; each must end `permission_denied` (whatever the
/// plugin reported) and leave the worktree exactly as it was. Where the
/// grant shows no files (`sees_files` false) the mutations that need a
/// read descriptor first find nothing to change.
fn every_write_is_denied(srv: &mut Server, wt: &Path, base: &str, sees_files: bool) {
    let before = snapshot(wt);
    for (op, path, to) in mutations(base) {
        let r = srv.call("fs_mutate", json!({"op": op, "path": path, "to": to}));
        if !sees_files && THROUGH_A_READ_DESCRIPTOR.contains(&op) {
            let said = r["structuredContent"]["error"].as_str().unwrap_or("");
            assert!(said.contains("No such file"), "{op} {path}: {r}");
            continue;
        }
        assert_eq!(error_kind(&r), "permission_denied", "{op} {path}: {r}");
        assert!(text_of(&r).contains("permission denied"), "{op}: {r}");
    }
    assert_eq!(snapshot(wt), before, "the worktree changed");
}

// ---- grants that allow no writes: every write path ----

#[test]
fn every_write_path_under_a_read_only_grant_is_permission_denied() {
    let wt = victim_worktree();
    let cfg = "[plugins.hostile]\nfilesystem = \"read-only\"\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &[]);
    every_write_is_denied(&mut srv, wt.path(), "", true);
    let r = srv.call("fs_read", json!({"path": "keep.txt"}));
    assert!(text_of(&r).contains("kept"), "reads still work: {r}");
}

#[test]
fn every_write_path_under_a_none_grant_is_permission_denied() {
    let wt = victim_worktree();
    let cfg = "[plugins.hostile]\nfilesystem = \"none\"\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &[]);
    every_write_is_denied(&mut srv, wt.path(), "", false);
    // It still sees nothing: no file, no listing.
    let r = srv.call("fs_read", json!({"path": "keep.txt"}));
    assert!(is_error(&r) && !text_of(&r).contains("kept"), "{r}");
    let r = srv.call("fs_list", json!({"path": "/"}));
    assert!(is_error(&r) && error_kind(&r) == "tool_error", "{r}");
}

#[test]
fn writes_outside_a_narrowed_grant_are_permission_denied_inside_it_they_work() {
    let wt = victim_worktree();
    let cfg = "[plugins.hostile]\nfilesystem = \"read-write\"\npaths = [\"src\"]\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &[]);
    // Outside `src`: the top level of the worktree (src/dir, the one
    // rmdir target, is inside the grant: moved out of the way first).
    std::fs::rename(wt.path().join("src/dir"), wt.path().join("dir")).unwrap();
    let mutations_outside = mutations("")
        .into_iter()
        .map(|(op, p, to)| (op, p.replace("src/dir", "dir"), to));
    let before = snapshot(wt.path());
    for (op, path, to) in mutations_outside {
        let r = srv.call("fs_mutate", json!({"op": op, "path": path, "to": to}));
        if THROUGH_A_READ_DESCRIPTOR.contains(&op) {
            assert!(!wt.path().join("moved.txt").exists(), "{r}");
            continue;
        }
        assert_eq!(error_kind(&r), "permission_denied", "{op} {path}: {r}");
    }
    assert_eq!(snapshot(wt.path()), before);
    std::fs::rename(wt.path().join("dir"), wt.path().join("src/dir")).unwrap();
    // Inside it every change is allowed (and audited as ok).
    let r = srv.call("fs_mutate", json!({"op": "create", "path": "src/new.txt"}));
    assert!(
        !is_error(&r) && r["structuredContent"]["error"].is_null(),
        "{r}"
    );
    assert!(wt.path().join("src/new.txt").is_file());
    // A read-only narrowed grant refuses inside too.
    drop(srv);
    let cfg = "[plugins.hostile]\nfilesystem = \"read-only\"\npaths = [\"src\"]\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &[]);
    let before = snapshot(wt.path());
    every_write_is_denied(&mut srv, wt.path(), "src/", true);
    assert_eq!(snapshot(wt.path()), before);
}

#[test]
fn a_granted_subdirectory_that_does_not_exist_yet_grants_nothing_until_it_does() {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("top.txt"), "TOPSECRET\n").unwrap();
    let cfg = "[plugins.hostile]\nfilesystem = \"read-write\"\npaths = [\"later\"]\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &[]);
    // The plugin cannot make the directory it is granted.
    let r = srv.call("fs_mutate", json!({"op": "mkdir", "path": "later"}));
    assert_eq!(error_kind(&r), "permission_denied", "{r}");
    assert!(!wt.path().join("later").exists());
    // A link named like it, into the rest of the worktree, is not followed.
    std::os::unix::fs::symlink(".", wt.path().join("later")).unwrap();
    let r = srv.call("fs_read", json!({"path": "later/top.txt"}));
    assert!(is_error(&r) && !text_of(&r).contains("TOPSECRET"), "{r}");
    // Made by the operator, it is granted from the next call on.
    std::fs::remove_file(wt.path().join("later")).unwrap();
    std::fs::create_dir(wt.path().join("later")).unwrap();
    let r = srv.call("fs_write", json!({"path": "later/x.txt", "content": "ok"}));
    assert!(!is_error(&r), "{r}");
    assert_eq!(
        std::fs::read_to_string(wt.path().join("later/x.txt")).unwrap(),
        "ok"
    );
}

// ---- signatures ----

/// A fresh key pair `NAME.key` / `NAME.pub` in `dir`.
fn keygen(dir: &Path, name: &str) -> PathBuf {
    let (sk, pk) = (
        dir.join(format!("{name}.key")),
        dir.join(format!("{name}.pub")),
    );
    let out = cli(&["keygen", "--secret", s(&sk), "--public", s(&pk)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    pk
}

fn sign(key: &Path, plugin: &Path) -> PathBuf {
    let out = cli(&["sign", "--key", s(key), s(plugin)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(format!("{}.minisig", plugin.display()))
}

/// A plugin dir of workspace copies named `names` (plus hostile.wasm).
fn copies_of_workspace(names: &[&str]) -> tempfile::TempDir {
    let dir = plugin_dir(&["test-plugins/hostile.wasm"]);
    for n in names {
        std::fs::copy(
            plugin("plugins/workspace.wasm"),
            dir.path().join(format!("{n}.wasm")),
        )
        .unwrap();
    }
    dir
}

#[test]
fn under_verify_broken_misplaced_and_tampered_signatures_are_refused_and_named() {
    let wt = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let pk = keygen(keys.path(), "a");
    let sk = keys.path().join("a.key");
    let dir = copies_of_workspace(&["good", "trunc", "other", "comment", "zero", "huge"]);
    let p = |n: &str| dir.path().join(n);
    sign(&sk, &p("good.wasm"));
    // The first half of a valid signature file.
    let sig = std::fs::read_to_string(sign(&sk, &p("trunc.wasm"))).unwrap();
    std::fs::write(p("trunc.wasm.minisig"), &sig[..sig.len() / 2]).unwrap();
    // A valid signature, of another file (hostile.wasm) by the trusted key.
    let of_hostile = sign(&sk, &p("hostile.wasm"));
    std::fs::rename(&of_hostile, p("other.wasm.minisig")).unwrap();
    // The trusted comment edited after signing.
    let sig = std::fs::read_to_string(sign(&sk, &p("comment.wasm"))).unwrap();
    let edited = sig.replace(
        "trusted comment: ",
        "trusted comment: approved by security ",
    );
    assert_ne!(sig, edited);
    std::fs::write(p("comment.wasm.minisig"), edited).unwrap();
    // An endless signature file, and a huge one.
    std::os::unix::fs::symlink("/dev/zero", p("zero.wasm.minisig")).unwrap();
    let mut big = std::fs::read_to_string(sign(&sk, &p("huge.wasm"))).unwrap();
    big.push_str(&"x".repeat(1 << 20));
    std::fs::write(p("huge.wasm.minisig"), big).unwrap();
    let t = std::time::Instant::now();
    let (mut srv, log) = Server::start_logged(wt.path(), dir.path(), &["--verify", s(&pk)]);
    let tools = srv.list_all_tools();
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "start-up hung on a signature file"
    );
    let from: Vec<_> = tools
        .iter()
        .map(|t| t["_meta"]["wasm-mcp/plugin"].as_str().unwrap())
        .collect();
    assert!(from.iter().all(|p| *p == "good"), "{from:?}");
    assert_eq!(
        names(&tools),
        ["list_dir", "read_file", "search", "write_file"]
    );
    srv.shutdown();
    let log = log.read();
    for want in [
        "\"hostile\" has no signature",
        "\"trunc\": its signature file is not a minisign signature",
        "\"other\": its signature does not verify",
        "\"comment\": its signature does not verify",
        "\"zero\"",
        "zero.wasm.minisig is not a regular file",
        "huge.wasm.minisig is over 65536 bytes",
    ] {
        assert!(log.contains(want), "{want:?} missing from:\n{log}");
    }
}

#[test]
fn keys_in_the_lock_file_require_signatures_under_locked() {
    let wt = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let (a, b) = (keygen(keys.path(), "a"), keygen(keys.path(), "b"));
    let dir = copies_of_workspace(&["signed", "stranger"]);
    let p = |n: &str| dir.path().join(n);
    sign(&keys.path().join("a.key"), &p("signed.wasm"));
    sign(&keys.path().join("b.key"), &p("stranger.wasm"));
    let lock = keys.path().join("plugins.lock");
    let out = cli(&[
        "lock",
        "--plugins",
        s(dir.path()),
        "--lock",
        s(&lock),
        "--key",
        s(&a),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&lock).unwrap();
    let a_b64 = std::fs::read_to_string(&a)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    assert!(text.contains(&a_b64), "{text}");
    // Pinned, all three; only the one signed by the lock's key loads.
    let (mut srv, log) =
        Server::start_logged(wt.path(), dir.path(), &["--locked", "--lock", s(&lock)]);
    let tools = srv.list_all_tools();
    let from: Vec<_> = tools
        .iter()
        .map(|t| t["_meta"]["wasm-mcp/plugin"].as_str().unwrap())
        .collect();
    assert!(
        !from.is_empty() && from.iter().all(|p| *p == "signed"),
        "{from:?}"
    );
    srv.shutdown();
    let log = log.read();
    assert!(log.contains("\"hostile\" has no signature"), "{log}");
    assert!(
        log.contains("\"stranger\": its signature does not verify"),
        "{log}"
    );
    // A `--verify` key adds to the lock's.
    let args = ["--locked", "--lock", s(&lock), "--verify", s(&b)];
    let (mut srv, _) = Server::start_logged(wt.path(), dir.path(), &args);
    let tools = srv.list_all_tools();
    let mut from: Vec<_> = tools
        .iter()
        .map(|t| t["_meta"]["wasm-mcp/plugin"].as_str().unwrap().to_string())
        .collect();
    from.dedup();
    assert_eq!(
        from,
        ["signed"],
        "read_file etc. come from the first plugin by name"
    );
    drop(srv);
    // A key that does not parse refuses the lock, and the server.
    std::fs::write(&lock, text.replace(&a_b64, "not-a-key")).unwrap();
    let out = cli(&[
        "serve",
        "--worktree",
        s(wt.path()),
        "--plugins",
        s(dir.path()),
        "--locked",
        "--lock",
        s(&lock),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a minisign public key"));
}

// ---- pinning on hot reload ----

#[test]
fn locked_hot_reload_refuses_a_same_size_same_mtime_swap_and_a_new_unpinned_plugin() {
    let wt = tempfile::tempdir().unwrap();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    let keep = tempfile::tempdir().unwrap();
    let lock = keep.path().join("plugins.lock");
    let out = cli(&["lock", "--plugins", s(dir.path()), "--lock", s(&lock)]);
    assert!(out.status.success());
    let args = ["--locked", "--lock", s(&lock), "--watch-ms", "100"];
    let (mut srv, log) = Server::start_logged(wt.path(), dir.path(), &args);
    assert!(!srv.list_all_tools().is_empty());
    // An unpinned plugin copied in while serving: refused and named.
    std::fs::copy(
        plugin("test-plugins/hostile.wasm"),
        dir.path().join("hostile.wasm"),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !log.read().contains("\"hostile\" is not in the lock file") {
        assert!(std::time::Instant::now() < deadline, "{}", log.read());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!names(&srv.list_all_tools()).contains(&"spin".to_string()));
    // The pinned one swapped for a tampered copy of the same size, its
    // modification time set back to the original's.
    let ws = dir.path().join("workspace.wasm");
    let mtime = std::fs::metadata(&ws).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(&ws).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    let tmp = dir.path().join("workspace.tmp");
    std::fs::write(&tmp, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&tmp)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    std::fs::rename(&tmp, &ws).unwrap();
    let changed =
        srv.wait_notification("notifications/tools/list_changed", Duration::from_secs(20));
    assert!(changed.is_some(), "the swap was not noticed");
    assert!(
        srv.list_all_tools().is_empty(),
        "tampered plugin still served"
    );
    srv.shutdown();
    assert!(log
        .read()
        .contains("\"workspace\" does not match the lock file"));
}

// ---- grants ----

#[test]
fn annotations_follow_a_none_grant_whatever_the_plugin_claims_and_digests_are_shown() {
    let wt = tempfile::tempdir().unwrap();
    let cfg = "[plugins.hostile]\nfilesystem = \"none\"\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &[]);
    let tools = srv.list_all_tools();
    assert!(tools.len() > 10);
    // hostile claims every tool writes, destroys and reaches the world.
    for t in &tools {
        let a = &t["annotations"];
        assert_eq!(
            (
                &a["readOnlyHint"],
                &a["destructiveHint"],
                &a["openWorldHint"]
            ),
            (&json!(true), &json!(false), &json!(false)),
            "{t}"
        );
    }
    // `wasm-mcp inspect` prints the digest, as the tools' `_meta` does.
    let digest = tools[0]["_meta"]["wasm-mcp/digest"]
        .as_str()
        .unwrap()
        .to_string();
    let out = cli(&["inspect", "--json", s(&plugin("test-plugins/hostile.wasm"))]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report.to_string().contains(&digest), "{report}");
}

#[test]
fn malformed_digest_sections_and_grants_over_the_maxima_refuse_to_start() {
    let wt = tempfile::tempdir().unwrap();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    for (cfg, extra, want) in [
        (
            "[plugins.\"sha256:1234\"]\nfilesystem = \"none\"\n",
            "--timeout-ms=1000",
            "64 hex digits",
        ),
        (
            "[plugins.workspace]\nmax_output_bytes = 2000\n",
            "--max-output-bytes=1000",
            "--max-output-bytes",
        ),
        (
            "[plugins.workspace]\nmax_files_created = 20\n",
            "--max-files-created=10",
            "--max-files-created",
        ),
        (
            "[default]\nmemory_mb = 4096\n",
            "--memory-mb=256",
            "--memory-mb",
        ),
        (
            "[plugins.workspace]\npaths = [\"src/../..\"]\n",
            "--timeout-ms=1000",
            "without `..`",
        ),
    ] {
        let (_d, path) = config(cfg);
        let out = cli(&[
            "serve",
            "--worktree",
            s(wt.path()),
            "--plugins",
            s(dir.path()),
            "--config",
            s(&path),
            extra,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cfg} started");
        assert!(err.contains(want), "{cfg}: {err}");
    }
    // An upper-case digest section is the plugin's.
    let digest = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(
            std::fs::read(dir.path().join("workspace.wasm")).unwrap(),
        ))
    };
    let cfg = format!(
        "[default]\nfilesystem = \"read-write\"\n[plugins.\"sha256:{}\"]\nfilesystem = \"none\"\n",
        digest.to_uppercase()
    );
    let (mut srv, _g) = start_granted(wt.path(), &["plugins/workspace.wasm"], &cfg, &[]);
    let tools = srv.list_all_tools();
    let w = tools.iter().find(|t| t["name"] == "write_file").unwrap();
    assert_eq!(w["annotations"]["readOnlyHint"], true, "{w}");
}

// ---- audit ----

fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits until the audit log has a line for `id`.
fn audit_line(path: &Path, id: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(l) = audit_lines(path).into_iter().find(|l| l["call_id"] == id) {
            return l;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no audit line for {id}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn call_with_id(srv: &mut Server, tool: &str, args: Value, id: &str) -> Value {
    let params = json!({"name": tool, "arguments": args, "_meta": {"wasm-mcp/callId": id}});
    srv.request("tools/call", params)
}

#[test]
fn every_outcome_leaves_one_audit_line() {
    let wt = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let audit = scratch.path().join("audit.jsonl");
    let cfg = "[plugins.hostile]\nfilesystem = \"read-only\"\ntimeout_ms = 3000\nmemory_mb = 32\n\
               max_output_bytes = 100000\n\
               tools = [\"spin\", \"alloc_bomb\", \"panic\", \"flood\", \"fs_mutate\", \"fs_read\", \"sleep_forever\"]\n";
    let extra = ["--audit-log", s(&audit), "--max-response-bytes", "60000"];
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &extra);
    let cases = [
        ("ok", "fs_read", json!({"path": "/"}), "tool_error"),
        (
            "args",
            "flood",
            json!({"bytes": "many"}),
            "invalid_arguments",
        ),
        ("spin", "spin", json!({}), "timeout"),
        ("oom", "alloc_bomb", json!({}), "memory_limit"),
        ("trap", "panic", json!({}), "trap"),
        ("big", "flood", json!({"bytes": 200000}), "output_too_large"),
        ("wire", "flood", json!({"bytes": 80000}), "output_too_large"),
        ("small", "flood", json!({"bytes": 10}), "ok"),
        (
            "ro",
            "fs_mutate",
            json!({"op": "create", "path": "x"}),
            "permission_denied",
        ),
        ("hidden", "net", json!({}), "not_allowed"),
        ("nope", "no_such_tool", json!({}), "unknown_tool"),
    ];
    for (id, tool, args, _) in &cases {
        call_with_id(&mut srv, tool, args.clone(), id);
    }
    // Cancelled by the client mid-call.
    let msg = json!({"jsonrpc": "2.0", "id": 777, "method": "tools/call",
        "params": {"name": "sleep_forever", "arguments": {}, "_meta": {"wasm-mcp/callId": "cancel"}}});
    srv.send_raw(&msg.to_string());
    std::thread::sleep(Duration::from_millis(300));
    srv.notify("notifications/cancelled", json!({"requestId": 777}));
    assert_eq!(audit_line(&audit, "cancel")["outcome"], "cancelled");
    assert!(srv.shutdown().success());
    let lines = audit_lines(&audit);
    assert_eq!(lines.len(), cases.len() + 1, "{lines:#?}");
    for (id, tool, _, want) in &cases {
        let l = lines.iter().find(|l| l["call_id"] == *id).unwrap();
        assert_eq!(
            (&l["outcome"], &l["tool"]),
            (&json!(want), &json!(tool)),
            "{l}"
        );
        let published = !matches!(*id, "hidden" | "nope");
        assert_eq!(l["plugin"] == "hostile", *id != "nope", "{l}");
        assert_eq!(
            l["grant"]["filesystem"] == "read-only",
            *id != "nope",
            "{l}"
        );
        assert_eq!(l["filesystem"].is_null(), !published, "{l}");
    }
    let oom = lines.iter().find(|l| l["call_id"] == "oom").unwrap();
    assert!(
        oom["peak_memory_bytes"].as_u64().unwrap() >= 16 << 20,
        "{oom}"
    );
}

#[test]
fn an_audit_log_a_plugin_could_reach_is_refused_and_a_failing_one_does_not_stop_calls() {
    let wt = tempfile::tempdir().unwrap();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    let outside = tempfile::tempdir().unwrap();
    let link = outside.path().join("audit-link.jsonl");
    std::os::unix::fs::symlink(wt.path().join("audit.jsonl"), &link).unwrap();
    let fifo = outside.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let hard = outside.path().join("hard.jsonl");
    std::fs::write(wt.path().join("shared.jsonl"), "").unwrap();
    std::fs::hard_link(wt.path().join("shared.jsonl"), &hard).unwrap();
    let inside = wt.path().join("audit.jsonl");
    let dotdot = wt.path().join("sub/../audit.jsonl");
    for (path, want) in [
        (inside.as_path(), "inside the worktree"),
        (dotdot.as_path(), "directory"),
        (link.as_path(), "inside the worktree"),
        (fifo.as_path(), "opening it"),
        (hard.as_path(), "hard links"),
    ] {
        let t = std::time::Instant::now();
        let out = cli(&[
            "serve",
            "--worktree",
            s(wt.path()),
            "--plugins",
            s(dir.path()),
            "--audit-log",
            s(path),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: started", path.display());
        assert!(err.contains(want), "{}: {err}", path.display());
        assert!(t.elapsed() < Duration::from_secs(20));
    }
    assert!(!inside.exists(), "nothing was created in the worktree");
    // A device that fails every write: the calls go on, the loss is logged.
    let (mut srv, log) = Server::start_logged(wt.path(), dir.path(), &["--audit-log", "/dev/full"]);
    for _ in 0..5 {
        let r = srv.call("list_dir", json!({"path": "."}));
        assert!(!is_error(&r), "{r}");
    }
    srv.shutdown();
    let log = log.read();
    assert!(log.contains("could not write the audit log"), "{log}");
    // Logged the 1st, 2nd and 4th time, not each time.
    assert_eq!(
        log.matches("could not write the audit log").count(),
        3,
        "{log}"
    );
}

// ---- the harness's server entry ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_policy_s_locked_server_entry_refuses_a_tampered_plugin() {
    use wasm_mcp_harness::{run_task, ProviderChoice, RunOptions};
    let scratch = tempfile::tempdir().unwrap();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    let lock = scratch.path().join("plugins.lock");
    let out = cli(&["lock", "--plugins", s(dir.path()), "--lock", s(&lock)]);
    assert!(out.status.success());
    let ws = dir.path().join("workspace.wasm");
    let mut bytes = std::fs::read(&ws).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&ws, bytes).unwrap();
    let tools = ["read_file", "list_dir", "search", "write_file"];
    let extra = ["--locked", "--lock", s(&lock)];
    let policy = support::write_policy(
        scratch.path(),
        dir.path(),
        &extra,
        &tools,
        &["read_file"],
        30_000,
    );
    let repo = support::sample_repo();
    let options = RunOptions {
        provider: ProviderChoice::Scripted,
        repo: Some(repo.path().to_path_buf()),
        out_dir: Some(scratch.path().join("runs")),
        ..RunOptions::default()
    };
    let task = support::repo_root().join("tasks/sample.toml");
    let report = run_task(&policy, &task, options).await;
    let error = match report {
        Ok(r) => r.error.unwrap_or_default(),
        Err(e) => format!("{e:#}"),
    };
    // The server refused the plugin: the run stops before any call.
    assert!(
        error.contains("allowed tools missing on server") && error.contains("read_file"),
        "the run used a tampered plugin: {error:?}"
    );
}

#[test]
fn the_audit_summary_is_on_stderr_at_debug_level() {
    let wt = tempfile::tempdir().unwrap();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    let out = Command::new(server_bin())
        .args([
            "call",
            "--worktree",
            s(wt.path()),
            "--plugins",
            s(dir.path()),
        ])
        .args([
            "--cache-dir",
            s(&support::cache_dir()),
            "list_dir",
            r#"{"path":"."}"#,
        ])
        .env("WASM_MCP_LOG", "warn,audit=debug")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.contains("call audited"))
        .unwrap_or_else(|| panic!("{err}"));
    for want in ["tool=list_dir", "outcome=ok", "workspace"] {
        assert!(line.contains(want), "{want}: {line}");
    }
}

#[test]
fn a_grant_s_own_write_budget_stops_a_disk_bomb() {
    let wt = tempfile::tempdir().unwrap();
    let cfg = "[plugins.diskbomb]\nfilesystem = \"read-write\"\nmax_write_bytes = 4096\nmax_files_created = 3\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/diskbomb.wasm"], cfg, &[]);
    let r = srv.call("big_file", json!({"path": "big.bin", "chunk": 1024}));
    assert_eq!(error_kind(&r), "quota_exceeded", "{r}");
    let len = std::fs::metadata(wt.path().join("big.bin")).unwrap().len();
    assert!(len <= 4096, "{len} bytes written under a 4096-byte grant");
    let r = srv.call("many_files", json!({"dir": "d", "count": 50}));
    assert_eq!(error_kind(&r), "quota_exceeded", "{r}");
    let files = std::fs::read_dir(wt.path().join("d")).unwrap().count();
    assert!(files <= 3, "{files} entries under a 3-entry grant");
}

#[test]
fn a_huge_plugin_file_is_refused_without_being_read_and_the_others_load() {
    let wt = tempfile::tempdir().unwrap();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    // 64 GiB, sparse: reading it whole would exhaust memory.
    let f = std::fs::File::create(dir.path().join("huge.wasm")).unwrap();
    f.set_len(64 << 30).unwrap();
    let t = std::time::Instant::now();
    let (mut srv, log) = Server::start_logged(wt.path(), dir.path(), &[]);
    assert!(names(&srv.list_all_tools()).contains(&"read_file".to_string()));
    assert!(t.elapsed() < Duration::from_secs(30));
    srv.shutdown();
    let log = log.read();
    assert!(log.contains("huge.wasm: over 256 MiB"), "{log}");
}

#[test]
fn a_grant_section_that_matches_no_plugin_is_reported() {
    let wt = tempfile::tempdir().unwrap();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    let (_d, cfg) = config(
        "[default]\nfilesystem = \"none\"\n[plugins.Workspace]\nfilesystem = \"read-only\"\n",
    );
    let (mut srv, log) = Server::start_logged(wt.path(), dir.path(), &["--config", s(&cfg)]);
    // The case slip leaves workspace to [default]: nothing to read.
    let r = srv.call("list_dir", json!({"path": "."}));
    assert!(is_error(&r), "{r}");
    srv.shutdown();
    let log = log.read();
    assert!(
        log.contains("grant section plugins.\"Workspace\" matches no loaded plugin"),
        "{log}"
    );
}
