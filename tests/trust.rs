//! The trust suite: plugins the server can vouch for. Unpinned, tampered
//! (also on hot reload) and unsigned plugins are refused and named; grants
//! bound what a plugin touches and spends, even when it tries for more;
//! the published annotations follow the grants; every call leaves one
//! audit line. Each test drives the real `wasm-mcp` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::Digest;
use wasm_mcp_protocol::CALL_ID_META;
mod support;
use support::{cache_dir, error_kind, is_error, plugin, plugin_dir, server_bin, text_of, Server};

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

fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn sha256_file(p: &Path) -> String {
    hex::encode(sha2::Sha256::digest(std::fs::read(p).unwrap()))
}

/// `wasm-mcp lock` of `plugins` into `lock`.
fn lock(plugins: &Path, lock: &Path) {
    let out = cli(&["lock", "--plugins", s(plugins), "--lock", s(lock)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The bytes of `src` with one byte in the middle flipped.
fn tampered(src: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(src).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    bytes
}

/// Replaces `dest` atomically with `bytes` (as a copy-in would).
fn replace(dest: &Path, bytes: &[u8]) {
    let tmp = dest.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dest).unwrap();
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("grants.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// The directories a server from [`start_granted`] runs on.
struct GrantDirs {
    _config_dir: tempfile::TempDir,
    /// The grants file.
    config: PathBuf,
    plugins: tempfile::TempDir,
}

/// `wasm-mcp serve` on `wt` with copies of `plugins`, the grants file
/// `grants` (`--config`) and `extra` arguments, initialized.
fn start_granted(wt: &Path, grants: &str, plugins: &[&str], extra: &[&str]) -> (Server, GrantDirs) {
    let config = tempfile::tempdir().unwrap();
    let cfg = write_config(config.path(), grants);
    let plugins = plugin_dir(plugins);
    let args: Vec<&str> = ["--config", s(&cfg)].iter().chain(extra).copied().collect();
    let (srv, _) = Server::start(wt, plugins.path(), &args);
    let dirs = GrantDirs {
        _config_dir: config,
        config: cfg,
        plugins,
    };
    (srv, dirs)
}

fn call_with_id(srv: &mut Server, tool: &str, args: Value, id: &str) -> Value {
    let params = json!({"name": tool, "arguments": args, "_meta": {CALL_ID_META: id}});
    let r = srv.request("tools/call", params);
    r.get("result").cloned().unwrap_or_else(|| panic!("{r}"))
}

// ---- pinning ----

#[test]
fn a_plugin_missing_from_the_lock_is_refused_and_named() {
    let wt = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let keep = tempfile::tempdir().unwrap();
    let lockfile = keep.path().join("plugins.lock");
    lock(plugins.path(), &lockfile);
    std::fs::copy(
        plugin("test-plugins/diskbomb.wasm"),
        plugins.path().join("diskbomb.wasm"),
    )
    .unwrap();
    let (mut srv, log) = Server::start_logged(
        wt.path(),
        plugins.path(),
        &["--locked", "--lock", s(&lockfile)],
    );
    let tools = names(&srv.list_all_tools());
    assert!(tools.contains(&"read_file".into()), "{tools:?}");
    assert!(
        !tools.contains(&"big_file".into()),
        "unpinned plugin served: {tools:?}"
    );
    srv.shutdown();
    let log = log.read();
    assert!(
        log.contains("\"diskbomb\" is not in the lock file"),
        "{log}"
    );
    // Without --locked the same directory serves both (the lock refused it).
    let (mut open, _) = Server::start(wt.path(), plugins.path(), &[]);
    assert!(names(&open.list_all_tools()).contains(&"big_file".into()));
}

#[test]
fn a_tampered_plugin_is_refused_at_start_and_on_hot_reload() {
    let wt = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let keep = tempfile::tempdir().unwrap();
    let lockfile = keep.path().join("plugins.lock");
    lock(plugins.path(), &lockfile);
    let ws = plugins.path().join("workspace.wasm");
    let args = ["--locked", "--lock", s(&lockfile), "--watch-ms", "100"];
    let (mut srv, log) = Server::start_logged(wt.path(), plugins.path(), &args);
    assert!(names(&srv.list_all_tools()).contains(&"read_file".into()));
    // One byte flipped, copied in mid-session.
    replace(&ws, &tampered(&plugin("plugins/workspace.wasm")));
    let changed =
        srv.wait_notification("notifications/tools/list_changed", Duration::from_secs(20));
    assert!(
        changed.is_some(),
        "no list_changed after the tampered copy-in"
    );
    assert!(
        srv.list_all_tools().is_empty(),
        "tampered plugin still served"
    );
    srv.shutdown();
    let text = log.read();
    assert!(
        text.contains("\"workspace\" does not match the lock file"),
        "{text}"
    );
    // And at start-up.
    let (mut again, log) = Server::start_logged(wt.path(), plugins.path(), &args);
    assert!(again.list_all_tools().is_empty());
    again.shutdown();
    assert!(log.read().contains("does not match the lock file"));
    // `--locked` without a lock file does not start.
    let out = cli(&[
        "serve",
        "--worktree",
        s(wt.path()),
        "--plugins",
        s(plugins.path()),
        "--locked",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("plugins.lock"));
}

// ---- signatures ----

#[test]
fn under_verify_only_plugins_signed_by_a_trusted_key_load() {
    let wt = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let k = |n: &str| keys.path().join(n);
    for who in ["a", "b"] {
        let out = cli(&[
            "keygen",
            "--secret",
            s(&k(&format!("{who}.key"))),
            "--public",
            s(&k(&format!("{who}.pub"))),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let plugins = plugin_dir(&[
        "plugins/workspace.wasm",
        "test-plugins/diskbomb.wasm",
        "test-plugins/bigwire.wasm",
        "test-plugins/hostile.wasm",
    ]);
    let p = |n: &str| plugins.path().join(n);
    let sign = |file: &str, key: &str| {
        let out = cli(&["sign", "--key", s(&k(key)), s(&p(file))]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    sign("workspace.wasm", "a.key"); // trusted
    sign("bigwire.wasm", "b.key"); // signed, by an untrusted key
    std::fs::write(p("hostile.wasm.minisig"), "not a signature\n").unwrap(); // invalid
                                                                             // diskbomb: no signature. A tampered copy of a signed plugin:
    std::fs::write(p("ws2.wasm"), tampered(&p("workspace.wasm"))).unwrap();
    std::fs::copy(p("workspace.wasm.minisig"), p("ws2.wasm.minisig")).unwrap();
    let (mut srv, log) =
        Server::start_logged(wt.path(), plugins.path(), &["--verify", s(&k("a.pub"))]);
    let mut tools = names(&srv.list_all_tools());
    tools.sort();
    assert_eq!(tools, ["list_dir", "read_file", "search", "write_file"]);
    srv.shutdown();
    let log = log.read();
    for want in [
        "\"diskbomb\" has no signature",
        "\"bigwire\": its signature does not verify against any trusted key",
        "\"hostile\": its signature file is not a minisign signature",
        "\"ws2\": its signature does not verify",
    ] {
        assert!(log.contains(want), "{want} missing from:\n{log}");
    }
    // The base64 key itself works as --verify too, and a garbage key is refused.
    let b64 = std::fs::read_to_string(k("a.pub")).unwrap();
    let b64 = b64.lines().nth(1).unwrap().to_string();
    let (mut srv, _) = Server::start(wt.path(), plugins.path(), &["--verify", &b64]);
    assert!(names(&srv.list_all_tools()).contains(&"read_file".into()));
    let out = cli(&[
        "serve",
        "--worktree",
        s(wt.path()),
        "--plugins",
        s(plugins.path()),
        "--verify",
        "garbage",
    ]);
    assert!(!out.status.success());
}

// ---- grants ----

#[test]
fn a_read_only_grant_makes_writes_fail_with_permission_denied() {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("keep.txt"), "kept\n").unwrap();
    let (mut srv, _dirs) = start_granted(
        wt.path(),
        "[plugins.workspace]\nfilesystem = \"read-only\"\n[plugins.diskbomb]\nfilesystem = \"read-only\"\n",
        &["plugins/workspace.wasm", "test-plugins/diskbomb.wasm"],
        &[],
    );
    let r = srv.call("write_file", json!({"path": "new.txt", "content": "x"}));
    assert_eq!(error_kind(&r), "permission_denied", "{r}");
    let r = srv.call(
        "write_file",
        json!({"path": "keep.txt", "content": "overwritten"}),
    );
    assert_eq!(error_kind(&r), "permission_denied", "{r}");
    for (tool, args) in [
        ("big_file", json!({})),
        ("append_bomb", json!({"path": "keep.txt"})),
        ("mkdir_storm", json!({"count": 3})),
    ] {
        let r = srv.call(tool, args);
        assert_eq!(error_kind(&r), "permission_denied", "{tool}: {r}");
    }
    let r = srv.call("read_file", json!({"path": "keep.txt"}));
    assert!(!is_error(&r), "reading still works: {r}");
    let entries: Vec<_> = std::fs::read_dir(wt.path()).unwrap().collect();
    assert_eq!(entries.len(), 1, "nothing was created");
    assert_eq!(
        std::fs::read_to_string(wt.path().join("keep.txt")).unwrap(),
        "kept\n"
    );
}

#[test]
fn a_no_filesystem_grant_sees_nothing() {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("a.txt"), "TOPSECRET\n").unwrap();
    let (mut srv, _dirs) = start_granted(
        wt.path(),
        "[default]\nfilesystem = \"none\"\n",
        &["plugins/workspace.wasm"],
        &[],
    );
    let r = srv.call("read_file", json!({"path": "a.txt"}));
    assert!(is_error(&r) && !text_of(&r).contains("TOPSECRET"), "{r}");
    let r = srv.call("list_dir", json!({"path": "."}));
    assert!(is_error(&r), "{r}");
}

#[test]
fn a_subdirectory_grant_cannot_reach_its_siblings() {
    let wt = tempfile::tempdir().unwrap();
    let w = wt.path();
    std::fs::create_dir_all(w.join("src")).unwrap();
    std::fs::create_dir_all(w.join("secret")).unwrap();
    std::fs::write(w.join("src/a.txt"), "in src\n").unwrap();
    std::fs::write(w.join("secret/s.txt"), "TOPSECRET\n").unwrap();
    std::fs::write(w.join("top.txt"), "TOPSECRET\n").unwrap();
    // A sibling named like the grant plus a letter, and what a path under
    // it would name were it taken for one under `src` (the plugin picks
    // the preopen a path is under itself: `wasm_mcp_guest::fs`).
    std::fs::create_dir_all(w.join("srcx")).unwrap();
    std::fs::write(w.join("srcx/s.txt"), "TOPSECRET\n").unwrap();
    std::fs::create_dir_all(w.join("src/x")).unwrap();
    std::fs::write(w.join("src/x/s.txt"), "WRONGFILE\n").unwrap();
    std::os::unix::fs::symlink("../secret", w.join("src/link")).unwrap();
    std::os::unix::fs::symlink("/etc", w.join("src/etc")).unwrap();
    let (mut srv, _dirs) = start_granted(
        w,
        "[plugins.workspace]\nfilesystem = \"read-write\"\npaths = [\"src\"]\n",
        &["plugins/workspace.wasm"],
        &[],
    );
    let r = srv.call("read_file", json!({"path": "src/a.txt"}));
    assert!(text_of(&r).contains("in src"), "{r}");
    let r = srv.call(
        "write_file",
        json!({"path": "src/new.txt", "content": "ok"}),
    );
    assert!(!is_error(&r), "{r}");
    for path in [
        "secret/s.txt",
        "src/../secret/s.txt",
        "src/link/s.txt",
        "top.txt",
        "/secret/s.txt",
        "src/etc/passwd",
        "srcx/s.txt",
    ] {
        let r = srv.call("read_file", json!({"path": path}));
        assert!(is_error(&r), "{path} was readable: {r}");
        assert!(
            !text_of(&r).contains("TOPSECRET")
                && !text_of(&r).contains("root:")
                && !text_of(&r).contains("WRONGFILE"),
            "{path}: {r}"
        );
    }
    for path in ["src/link/x.txt", "secret/x.txt", "x.txt", "src/../x.txt"] {
        let r = srv.call("write_file", json!({"path": path, "content": "x"}));
        assert!(is_error(&r), "{path} was writable: {r}");
    }
    assert!(!w.join("secret/x.txt").exists() && !w.join("x.txt").exists());
    let r = srv.call("list_dir", json!({"path": "."}));
    assert!(is_error(&r), "{r}");
    // `src` swapped for a link to its sibling: the grant does not follow it.
    std::fs::rename(w.join("src"), w.join("src_real")).unwrap();
    std::os::unix::fs::symlink("secret", w.join("src")).unwrap();
    let r = srv.call("read_file", json!({"path": "src/s.txt"}));
    assert!(is_error(&r) && !text_of(&r).contains("TOPSECRET"), "{r}");
}

#[test]
fn grants_beyond_the_server_maxima_are_refused_at_start() {
    let wt = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let cfg_dir = tempfile::tempdir().unwrap();
    for (cfg, extra, want) in [
        (
            "[plugins.workspace]\ntimeout_ms = 5000\n",
            "--timeout-ms=1000",
            "--timeout-ms",
        ),
        (
            "[plugins.workspace]\nmemory_mb = 1024\n",
            "--memory-mb=256",
            "--memory-mb",
        ),
        (
            "[default]\nfilesystem = \"read-write\"\n",
            "--read-only",
            "--read-only",
        ),
        (
            "[plugins.workspace]\nmax_write_bytes = 100\n",
            "--max-write-bytes=10",
            "--max-write-bytes",
        ),
        (
            "[plugins.workspace]\nmax_concurrency = 5\n",
            "--max-concurrency=4",
            "--max-concurrency",
        ),
        (
            "[plugins.workspace]\nfilesytem = \"none\"\n",
            "--read-only",
            "unknown field",
        ),
    ] {
        let path = write_config(cfg_dir.path(), cfg);
        let out = cli(&[
            "serve",
            "--worktree",
            s(wt.path()),
            "--plugins",
            s(plugins.path()),
            "--config",
            s(&path),
            extra,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cfg} started");
        assert!(err.contains(want), "{cfg}: {err}");
    }
}

#[test]
fn a_grant_s_own_time_and_memory_budgets_apply() {
    let wt = tempfile::tempdir().unwrap();
    let (mut srv, _dirs) = start_granted(
        wt.path(),
        "[plugins.hostile]\ntimeout_ms = 500\nmemory_mb = 32\n",
        &["test-plugins/hostile.wasm"],
        &[],
    );
    let t = Instant::now();
    let r = srv.call("spin", json!({}));
    assert_eq!(error_kind(&r), "timeout", "{r}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "ran past its 0.5 s grant"
    );
    assert!(text_of(&r).contains("0.5s"), "{r}");
    let r = srv.call("alloc_bomb", json!({}));
    assert_eq!(error_kind(&r), "memory_limit", "{r}");
    assert!(text_of(&r).contains("32 MiB"), "{r}");
}

// ---- annotations ----

#[test]
fn published_annotations_follow_the_grants_not_the_claims() {
    let wt = tempfile::tempdir().unwrap();
    let (mut srv, dirs) = start_granted(
        wt.path(),
        "[plugins.workspace]\nfilesystem = \"read-only\"\n\
         [plugins.hostile]\nfilesystem = \"read-write\"\ntools = [\"fs_write\", \"net\"]\n",
        &["plugins/workspace.wasm", "test-plugins/hostile.wasm"],
        &[],
    );
    let tools = srv.list_all_tools();
    let get = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .unwrap_or_else(|| panic!("{n} missing"))
    };
    // write_file claims to write; its grant is read-only.
    let w = &get("write_file")["annotations"];
    assert_eq!(
        (&w["readOnlyHint"], &w["destructiveHint"]),
        (&json!(true), &json!(false)),
        "{w}"
    );
    assert_eq!(get("read_file")["annotations"]["readOnlyHint"], true);
    // hostile claims open-world; it has write access and no network.
    for name in ["fs_write", "net"] {
        let a = &get(name)["annotations"];
        assert_eq!(a["readOnlyHint"], false, "{name}: {a}");
        assert_eq!(a["destructiveHint"], true, "{name}: {a}");
        assert_eq!(a["openWorldHint"], false, "{name}: {a}");
    }
    // The tool allowlist: hostile's other tools are not published.
    let mut all = names(&tools);
    all.sort();
    assert_eq!(
        all,
        [
            "fs_write",
            "list_dir",
            "net",
            "read_file",
            "search",
            "write_file"
        ]
    );
    // Each tool names its plugin and digest.
    let digest = sha256_file(&dirs.plugins.path().join("workspace.wasm"));
    assert_eq!(
        get("read_file")["_meta"]["wasm-mcp/digest"],
        digest.as_str()
    );
    assert_eq!(get("read_file")["_meta"]["wasm-mcp/plugin"], "workspace");
    // `wasm-mcp tools` prints the digest too.
    let out = cli(&[
        "tools",
        "--worktree",
        s(wt.path()),
        "--plugins",
        s(dirs.plugins.path()),
        "--cache-dir",
        s(&cache_dir()),
        "--config",
        s(&dirs.config),
    ]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&digest));
}

// ---- audit ----

#[test]
fn the_audit_log_has_one_line_per_call_with_its_fields() {
    let wt = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let audit = scratch.path().join("audit.jsonl");
    let (mut srv, dirs) = start_granted(
        wt.path(),
        "[default]\nfilesystem = \"read-write\"\n[plugins.hostile]\ntimeout_ms = 400\nfilesystem = \"none\"\n",
        &["plugins/workspace.wasm", "test-plugins/hostile.wasm"],
        &["--audit-log", s(&audit)],
    );
    let r = call_with_id(
        &mut srv,
        "write_file",
        json!({"path": "a.txt", "content": "hello"}),
        "c-1",
    );
    assert!(!is_error(&r), "{r}");
    call_with_id(&mut srv, "read_file", json!({"path": "a.txt"}), "c-2");
    call_with_id(&mut srv, "read_file", json!({"nope": 1}), "c-3");
    call_with_id(&mut srv, "spin", json!({}), "c-4");
    call_with_id(&mut srv, "read_file", json!({"path": "missing.txt"}), "c-5");
    srv.call("panic", json!({}));
    assert!(srv.shutdown().success());
    let text = std::fs::read_to_string(&audit).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6, "{text}");
    let ws_digest = sha256_file(&dirs.plugins.path().join("workspace.wasm"));
    let by = |id: &str| {
        lines
            .iter()
            .find(|l| l["call_id"] == id)
            .unwrap_or_else(|| panic!("{id}: {text}"))
    };
    for l in &lines {
        for field in [
            "time",
            "plugin",
            "digest",
            "tool",
            "grant",
            "argument_bytes",
            "duration_ms",
            "outcome",
            "bytes_written",
            "files_created",
            "peak_memory_bytes",
        ] {
            assert!(
                l.get(field).is_some_and(|v| !v.is_null()),
                "{field} missing: {l}"
            );
        }
    }
    let w = by("c-1");
    assert_eq!(
        (&w["plugin"], &w["digest"], &w["tool"]),
        (&json!("workspace"), &json!(ws_digest), &json!("write_file"))
    );
    assert_eq!(
        (&w["outcome"], &w["bytes_written"], &w["files_created"]),
        (&json!("ok"), &json!(5), &json!(1)),
        "{w}"
    );
    assert_eq!(w["grant"]["filesystem"], "read-write");
    // Its disk shares: the default even part of the worktree's totals.
    assert_eq!(
        (
            &w["grant"]["plugin_write_bytes"],
            &w["grant"]["plugin_files_created"]
        ),
        (&json!("even"), &json!("even")),
        "{w}"
    );
    assert!(w["peak_memory_bytes"].as_u64().unwrap() > 0, "{w}");
    assert_eq!(
        w["argument_bytes"],
        json!({"path": "a.txt", "content": "hello"})
            .to_string()
            .len()
    );
    assert_eq!(
        by("c-2")["filesystem"],
        "read-only",
        "read_file claims read-only: it runs so"
    );
    assert_eq!(by("c-3")["outcome"], "invalid_arguments");
    let spin = by("c-4");
    assert_eq!(
        (&spin["outcome"], &spin["plugin"]),
        (&json!("timeout"), &json!("hostile")),
        "{spin}"
    );
    assert_eq!(spin["grant"]["timeout_ms"], 400);
    let ms = spin["duration_ms"].as_f64().unwrap();
    assert!((300.0..5000.0).contains(&ms), "{spin}");
    assert_eq!(by("c-5")["outcome"], "tool_error");
    assert!(
        lines
            .iter()
            .any(|l| l["outcome"] == "trap" && l["call_id"].is_null()),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_harness_trace_and_the_audit_log_name_the_same_calls() {
    use wasm_mcp_harness::{run_task, ProviderChoice, RunOptions};
    let repo = support::sample_repo();
    let scratch = tempfile::tempdir().unwrap();
    let audit = scratch.path().join("audit.jsonl");
    let plugins = plugin("plugins/workspace.wasm")
        .parent()
        .unwrap()
        .to_path_buf();
    let tools = ["read_file", "list_dir", "search", "write_file"];
    let extra = ["--audit-log", s(&audit)];
    let policy = support::write_policy(
        scratch.path(),
        &plugins,
        &extra,
        &tools,
        &["read_file"],
        30_000,
    );
    let task = support::repo_root().join("tasks/sample.toml");
    let options = RunOptions {
        provider: ProviderChoice::Scripted,
        repo: Some(repo.path().to_path_buf()),
        out_dir: Some(scratch.path().join("runs")),
        ..RunOptions::default()
    };
    let report = run_task(&policy, &task, options).await.expect("run_task");
    assert!(report.ok(), "run failed: {:?}", report.error);
    let trace = std::fs::read_to_string(&report.trace_path).unwrap();
    let mut sent: Vec<String> = trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "tool_call")
        // Calls refused by the harness itself never reach the server.
        .filter(|e| e["stages"].to_string().contains("\"call\""))
        .map(|e| e["call_id"].as_str().unwrap().to_string())
        .collect();
    let mut audited: Vec<String> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["call_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    sent.sort();
    audited.sort();
    assert!(!sent.is_empty(), "{trace}");
    assert_eq!(sent, audited, "{trace}");
}

#[test]
fn a_grant_s_concurrency_share_bounds_its_calls_in_flight() {
    let wt = tempfile::tempdir().unwrap();
    let (mut srv, _dirs) = start_granted(
        wt.path(),
        "[plugins.hostile]\nmax_concurrency = 1\ntimeout_ms = 3000\n",
        &["test-plugins/hostile.wasm"],
        &[],
    );
    // One spin holds the plugin's only slot for its 3 s; the other waits
    // half its deadline for it, then is `busy` without running (which of
    // the two gets the slot is up to the scheduler).
    for id in [9001, 9002] {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": "spin", "arguments": {}}});
        srv.send_raw(&msg.to_string());
    }
    let mut kinds = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while kinds.len() < 2 && Instant::now() < deadline {
        let Some(msg) = srv.next_message(Duration::from_secs(20)) else {
            break;
        };
        if msg["id"] == 9001 || msg["id"] == 9002 {
            kinds.push(error_kind(&msg["result"]).to_string());
            if kinds.last().unwrap() == "busy" {
                assert!(
                    text_of(&msg["result"]).contains("maximum of 1 calls"),
                    "{msg}"
                );
            }
        }
    }
    kinds.sort();
    assert_eq!(kinds, ["busy", "timeout"]);
}

/// The files the trust policy is read from (`--config`, the lock of
/// `--locked`, a `--verify` key file), kept inside the writable worktree,
/// are each named in the log: a tool can rewrite them, and the next start
/// trusts what it wrote. Outside the worktree, or with `--read-only`,
/// nothing is said.
#[test]
fn trust_files_tools_can_write_are_named_in_the_log() {
    let wt = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let out = cli(&[
        "keygen",
        "--secret",
        s(&outside.path().join("k.key")),
        "--public",
        s(&wt.path().join("k.pub")),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let signed = cli(&[
        "sign",
        "--key",
        s(&outside.path().join("k.key")),
        s(&plugins.path().join("workspace.wasm")),
    ]);
    assert!(
        signed.status.success(),
        "{}",
        String::from_utf8_lossy(&signed.stderr)
    );
    let in_wt = |n: &str| wt.path().join(n);
    lock(plugins.path(), &in_wt("plugins.lock"));
    std::fs::write(
        in_wt("grants.toml"),
        "[default]\nfilesystem = \"read-only\"\n",
    )
    .unwrap();
    let warned = |extra: &[&str]| {
        let (mut srv, log) = Server::spawn_logged(wt.path(), plugins.path(), extra);
        srv.initialize();
        assert!(srv.shutdown().success());
        let log = log.read();
        ["--config", "--lock", "--verify"]
            .into_iter()
            .filter(|what| {
                log.contains(&format!("the {what} file is inside the writable worktree"))
            })
            .collect::<Vec<_>>()
    };
    let (cfg, lock_file, key) = (in_wt("grants.toml"), in_wt("plugins.lock"), in_wt("k.pub"));
    let inside = [
        "--config",
        s(&cfg),
        "--locked",
        "--lock",
        s(&lock_file),
        "--verify",
        s(&key),
    ];
    assert_eq!(warned(&inside), ["--config", "--lock", "--verify"]);
    let read_only: Vec<&str> = inside.iter().copied().chain(["--read-only"]).collect();
    assert_eq!(warned(&read_only), Vec::<&str>::new());
    let cfg_outside = outside.path().join("grants.toml");
    std::fs::copy(&cfg, &cfg_outside).unwrap();
    assert_eq!(warned(&["--config", s(&cfg_outside)]), Vec::<&str>::new());
}
