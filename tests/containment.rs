//! Containment: a hostile plugin can block in host calls, hang at load or
//! hog slots, and must still end at its deadlines without starving other
//! plugins or the server.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
mod support;
use support::{
    assert_flag_refused, each_str, error_kind, is_error, plugin, plugin_dir, text_of, Server,
};

fn worktree() -> tempfile::TempDir {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("inside.txt"), "inside\n").unwrap();
    wt
}

fn send_call(s: &mut Server, id: u64, tool: &str) {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}});
    s.send_raw(&msg.to_string());
}

/// The `result` of the response to `id`, within `within` (other responses
/// that arrive meanwhile are kept in `s.notifications` for later).
fn result_of(s: &mut Server, id: u64, within: Duration) -> Value {
    let is_it = |m: &Value| m["id"] == json!(id) && m.get("method").is_none();
    if let Some(i) = s.notifications.iter().position(is_it) {
        return s.notifications.remove(i)["result"].clone();
    }
    let r = s
        .wait_response(id, within)
        .unwrap_or_else(|| panic!("request {id} not answered within {within:?}"));
    r["result"].clone()
}

/// `tools/call` of `read_file inside.txt`, which must answer within `within`.
fn read_file_within(s: &mut Server, id: u64, within: Duration) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "inside.txt"}}});
    s.send_raw(&msg.to_string());
    result_of(s, id, within)
}

fn tool_names(s: &mut Server) -> Vec<String> {
    s.list_all_tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn calls_blocked_in_host_calls_end_at_the_deadline_and_free_their_slots() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let args = ["--max-concurrency", "2", "--timeout-ms", "1000"];
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &args);
    let t = Instant::now();
    send_call(&mut s, 901, "sleep_forever");
    send_call(&mut s, 902, "sleep_far");
    send_call(&mut s, 903, "sleep_forever");
    let r = read_file_within(&mut s, 1, Duration::from_secs(5));
    assert!(!is_error(&r), "{r}");
    let mut kinds = Vec::new();
    for id in 901..=903 {
        let left = Duration::from_secs(8).saturating_sub(t.elapsed());
        let r = result_of(&mut s, id, left);
        assert!(is_error(&r), "{r}");
        kinds.push(error_kind(&r).to_string());
    }
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    kinds.sort();
    // Half the slots are the hostile plugin's share: one call ran into its
    // deadline, the two others waited for the share until theirs.
    assert_eq!(kinds, ["busy", "busy", "timeout"]);
    // Everything was released: the same calls are served again.
    let r = s.call("sleep_far", json!({}));
    assert_eq!(error_kind(&r), "timeout", "{r}");
    assert!(text_of(&r).contains("timed out"), "{r}");
    assert!(s.alive());
}

#[test]
fn one_plugin_cannot_take_every_slot() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    // A long deadline: only the per-plugin share keeps slots free.
    let args = ["--max-concurrency", "4", "--timeout-ms", "60000"];
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &args);
    for id in 901..=906 {
        send_call(&mut s, id, "sleep_forever");
    }
    for id in 1..=3 {
        let r = read_file_within(&mut s, id, Duration::from_secs(5));
        assert!(!is_error(&r), "{r}");
        assert_eq!(r["structuredContent"]["content"], "inside\n", "{r}");
    }
    assert!(s.alive());
}

#[test]
fn a_smaller_share_can_be_set() {
    let wt = worktree();
    let plugins = plugin_dir(&["test-plugins/hostile.wasm"]);
    let args = [
        "--max-concurrency",
        "4",
        "--max-concurrency-per-plugin",
        "1",
        "--timeout-ms",
        "1000",
    ];
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &args);
    send_call(&mut s, 901, "sleep_forever");
    send_call(&mut s, 902, "sleep_forever");
    let mut kinds: Vec<String> = (901..=902)
        .map(|id| error_kind(&result_of(&mut s, id, Duration::from_secs(8))).to_string())
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["busy", "timeout"]);
}

/// Copies `files` (dist-relative) into a new plugin dir under the given names.
fn named_plugin_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (src, name) in files {
        std::fs::copy(plugin(src), dir.path().join(name)).unwrap();
    }
    dir
}

/// Compiles the plugins of `plugins` into the shared test cache (untimed),
/// so timed start-ups measure loading, not a cold debug-build compile.
fn warm_cache(wt: &Path, plugins: &Path) {
    let status = std::process::Command::new(support::server_bin())
        .args(["tools", "--load-timeout-ms", "100", "--cache-dir"])
        .arg(support::cache_dir())
        .arg("--worktree")
        .arg(wt)
        .arg("--plugins")
        .arg(plugins)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Starts a server (cache warmed first); returns how long initialize took.
fn spawn_timed(
    wt: &Path,
    plugins: &Path,
    extra: &[&str],
) -> (Server, support::ServerLog, Duration) {
    warm_cache(wt, plugins);
    let t = Instant::now();
    let (s, log) = Server::start_logged(wt, plugins, extra);
    (s, log, t.elapsed())
}

#[test]
fn a_plugin_whose_list_tools_blocks_is_refused_alone_and_reload_keeps_working() {
    let wt = worktree();
    let plugins = named_plugin_dir(&[
        ("test-plugins/slowload.wasm", "a_slowload.wasm"),
        ("plugins/workspace.wasm", "workspace.wasm"),
    ]);
    let args = ["--load-timeout-ms", "1000", "--watch-ms", "200"];
    let (mut s, log, took) = spawn_timed(wt.path(), plugins.path(), &args);
    assert!(took < Duration::from_secs(10), "start took {took:?}");
    let names = tool_names(&mut s);
    assert!(names.contains(&"read_file".to_string()), "{names:?}");
    let log_text = log.read();
    assert!(
        log_text.contains("a_slowload.wasm: list-tools failed") && log_text.contains("timed out"),
        "{log_text}"
    );
    // Hot reload still works: a plugin added later is loaded.
    std::fs::copy(
        plugin("test-plugins/hostile.wasm"),
        plugins.path().join("hostile.wasm"),
    )
    .unwrap();
    s.wait_notification("notifications/tools/list_changed", Duration::from_secs(20))
        .expect("list_changed after adding a plugin");
    let names = tool_names(&mut s);
    assert!(names.contains(&"sleep_forever".to_string()), "{names:?}");
    assert!(names.contains(&"read_file".to_string()), "{names:?}");
}

#[test]
fn a_plugin_whose_tool_list_is_too_large_is_refused_alone() {
    let wt = worktree();
    let plugins = named_plugin_dir(&[
        ("test-plugins/hugelist.wasm", "a_hugelist.wasm"),
        ("plugins/workspace.wasm", "workspace.wasm"),
    ]);
    let (mut s, log, _) = spawn_timed(wt.path(), plugins.path(), &[]);
    let names = tool_names(&mut s);
    assert!(names.contains(&"read_file".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("huge_")), "{names:?}");
    let r = s.call("read_file", json!({"path": "inside.txt"}));
    assert_eq!(r["structuredContent"]["content"], json!("inside\n"), "{r}");
    let log_text = log.read();
    assert!(
        log_text.contains("a_hugelist.wasm: list-tools failed")
            && log_text.contains("more than 50331648 bytes at once while listing its tools"),
        "{log_text}"
    );
}

#[test]
fn slow_plugins_load_in_parallel_and_busy_loads_are_retried() {
    let wt = worktree();
    let mut files = vec![("plugins/workspace.wasm", "a_workspace.wasm".to_string())];
    for i in 1..=6 {
        files.push(("test-plugins/slowload.wasm", format!("s{i}_slowload.wasm")));
    }
    files.push(("test-plugins/hostile.wasm", "zz_hostile.wasm".to_string()));
    let files: Vec<(&str, &str)> = files.iter().map(|(a, b)| (*a, b.as_str())).collect();
    let plugins = named_plugin_dir(&files);
    let args = ["--load-timeout-ms", "2000", "--watch-ms", "200"];
    let (mut s, log, took) = spawn_timed(wt.path(), plugins.path(), &args);
    // One after the other, six slow plugins would take twelve seconds; in
    // parallel about four, with room for a loaded two-core machine.
    assert!(took < Duration::from_secs(9), "start took {took:?}");
    let names = tool_names(&mut s);
    assert!(names.contains(&"read_file".to_string()), "{names:?}");
    // The plugins that found no load slot were not refused: a later scan
    // loads the hostile one.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !tool_names(&mut s).contains(&"sleep_forever".to_string()) {
        assert!(
            Instant::now() < deadline,
            "zz_hostile.wasm never loaded: {}",
            log.read()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(log.read().contains("not loaded yet"), "{}", log.read());
}

/// After a plugin's first call, its next ones take a spare instance made
/// ahead (`src/spare.rs`): still one instance per call, and a call on a
/// spare ends at its own deadline (a spare is built with at most 1 s).
#[test]
fn every_served_call_runs_in_an_instance_of_its_own() {
    let wt = worktree();
    let plugins = plugin_dir(&["test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--timeout-ms", "1500"]);
    for _ in 0..5 {
        let r = s.call("count_calls", json!({}));
        assert_eq!(r["structuredContent"]["calls"], 1, "{r}");
        std::thread::sleep(Duration::from_millis(20));
    }
    for id in 701..=708 {
        send_call(&mut s, id, "count_calls");
    }
    for id in 701..=708 {
        let r = result_of(&mut s, id, Duration::from_secs(10));
        assert_eq!(r["structuredContent"]["calls"], 1, "{r}");
    }
    for _ in 0..2 {
        let t = Instant::now();
        let r = s.call("spin", json!({}));
        assert_eq!(error_kind(&r), "timeout", "{r}");
        assert!(
            t.elapsed() >= Duration::from_millis(1450),
            "{:?}",
            t.elapsed()
        );
    }
    assert!(s.shutdown().success());
}

#[test]
fn spare_instances_can_be_turned_off_and_are_bounded() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--spare-instances", "0"]);
    for id in 1..=3 {
        let r = read_file_within(&mut s, id, Duration::from_secs(5));
        assert_eq!(r["structuredContent"]["content"], "inside\n", "{r}");
    }
    assert!(s.shutdown().success());
    for bad in ["-1", "257", "many", ""] {
        assert_flag_refused(wt.path(), plugins.path(), "--spare-instances", bad);
    }
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

/// What a guest's WASI calls allocate on the host, outside its memory
/// limit, is bounded per call: one `get-random-bytes` asks for at most
/// 1 MiB (wasmtime-wasi allowed 64 MiB: one uninterruptible host call of
/// ~330 ms, and eight calls looping on it held up another plugin's calls
/// for 2 s), and a call holds at most 16,384 resources (a million: ~290 MB
/// of clock pollables in one call). Past either, the call traps, saying
/// why; the server goes on.
#[test]
fn what_a_call_allocates_on_the_host_is_bounded() {
    let wt = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &[]);
    let hoard =
        |s: &mut Server, kind: &str, n: u64| s.call("host_hoard", json!({"kind": kind, "n": n}));
    let r = hoard(&mut s, "random", 1 << 20);
    assert_eq!(r["structuredContent"]["got"], 1 << 20, "{r}");
    let r = hoard(&mut s, "random", (1 << 20) + 1);
    assert_eq!(error_kind(&r), "trap", "{r}");
    assert!(text_of(&r).contains("exceeds limit 1048576"), "{r}");
    // A clock subscription is two resources (its deadline and its pollable).
    let r = hoard(&mut s, "pollables", 5_000);
    assert_eq!(r["structuredContent"]["got"], 5_000, "{r}");
    let r = hoard(&mut s, "pollables", 20_000);
    assert_eq!(error_kind(&r), "trap", "{r}");
    assert!(
        text_of(&r).contains("resource table has no free keys"),
        "{r}"
    );
    let r = hoard(&mut s, "random", 16);
    assert_eq!(r["structuredContent"]["got"], 16, "{r}");
}

/// The check before an open cannot see a FIFO renamed into place after
/// it: one call of a hostile plugin trades the file `f` and a FIFO `p`
/// places over and over, while another opens `f` for reading over and
/// over. An open that found the FIFO blocked its thread for good (past the
/// deadline: the call was never answered). The open cannot block now
/// (`disk_guard::open_beneath`: `O_NONBLOCK`, then `fstat` on what it
/// opened): both calls end on time and the server keeps serving.
/// Also by a long `d/../d/../…/f` path, whose resolution fails `EAGAIN`
/// when a rename happens meanwhile: the open fell back to wasmtime-wasi's
/// after a few of those, and that one blocked (a helper's find); now it
/// fails `would-block`. Two openers: as many as the call pool has threads
/// on a 2-core machine.
#[test]
fn a_fifo_renamed_in_after_the_check_does_not_block_the_open() {
    for opener in ["open", "open_dotdot"] {
        let wt = tempfile::tempdir().unwrap();
        std::fs::write(wt.path().join("f"), "file").unwrap();
        std::fs::create_dir(wt.path().join("d")).unwrap();
        mkfifo(&wt.path().join("p"));
        let plugins = plugin_dir(&["test-plugins/hostile.wasm"]);
        let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--timeout-ms", "8000"]);
        for (id, mode) in [(1, "swap_fifo"), (2, opener), (3, opener)] {
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "create_race", "arguments": {"mode": mode, "ms": 3000}}});
            s.send_raw(&msg.to_string());
        }
        for id in [2, 3] {
            let opens = result_of(&mut s, id, Duration::from_secs(30));
            assert!(!is_error(&opens), "{opener}: {opens}");
            let kept = opens["structuredContent"]["kept"].as_u64().unwrap();
            assert!(kept > 0, "{opener}: {opens}");
        }
        let swaps = result_of(&mut s, 1, Duration::from_secs(30));
        assert!(!is_error(&swaps), "{swaps}");
        let r = s.call("fs_read", json!({"path": "f"}));
        let ok = !is_error(&r) || text_of(&r).contains("not a regular file");
        assert!(ok, "{r}");
    }
}

/// A hostile file tree: FIFOs (and a socket) in the worktree, put there by
/// someone other than a plugin (git cannot check one out, a guest cannot
/// make one). Opening a FIFO blocks until a writer comes, on the thread
/// running the call and past its deadline; more such calls than the
/// server has threads would wedge it. Every way a tool opens one is
/// refused at once, naming why, and the server keeps serving.
#[test]
fn special_files_in_the_worktree_are_refused_at_open_without_blocking() {
    let wt = worktree();
    let root = wt.path();
    std::fs::create_dir(root.join("sub")).unwrap();
    mkfifo(&root.join("pipe"));
    mkfifo(&root.join("sub/pipe"));
    std::os::unix::fs::symlink("pipe", root.join("link")).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    // A deadline far past the answers awaited: a blocked open would not
    // answer in time, whatever the machine's speed.
    let (mut s, _) = Server::start(root, plugins.path(), &["--timeout-ms", "60000"]);
    let calls = [
        ("read_file", json!({"path": "pipe"})),
        ("read_file", json!({"path": "sub/pipe"})),
        ("read_file", json!({"path": "link"})),
        ("read_file", json!({"path": "sock"})),
        ("search", json!({"pattern": "x", "path": "pipe"})),
        ("read_file", json!({"path": "pipe", "line_limit": 1})),
        ("write_file", json!({"path": "pipe", "content": "x"})),
    ];
    for (i, (tool, args)) in calls.iter().enumerate() {
        let msg = json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
            "params": {"name": tool, "arguments": args}});
        s.send_raw(&msg.to_string());
    }
    for (i, (tool, args)) in calls.iter().enumerate() {
        let r = result_of(&mut s, 100 + i as u64, Duration::from_secs(20));
        assert!(is_error(&r), "{tool} {args}: {r}");
        let text = text_of(&r);
        assert!(
            text.contains("not a regular file or directory"),
            "{tool} {args}: {r}"
        );
        assert!(text.contains(args["path"].as_str().unwrap()), "{r}");
    }
    // The tree around them is still served: a search skips them.
    let r = s.call("search", json!({"pattern": "inside"}));
    assert!(!is_error(&r), "{r}");
    assert_eq!(
        r["structuredContent"]["matches"][0]["path"], "inside.txt",
        "{r}"
    );
    let r = read_file_within(&mut s, 200, Duration::from_secs(20));
    assert_eq!(r["structuredContent"]["content"], "inside\n", "{r}");
    let r = s.call("list_dir", json!({"path": "."}));
    assert!(r.to_string().contains("pipe"), "{r}");
    // The refused write replaced nothing.
    let kind = std::fs::symlink_metadata(root.join("pipe"))
        .unwrap()
        .file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind));
    assert!(s.alive());
}

/// A hostile file tree: a name that is not UTF-8 (which WASI cannot carry:
/// its paths are strings) made the whole listing of its directory fail, so
/// `list_dir` failed and `search` skipped every file beside it. Such an
/// entry is left out of the listing alone; the guest could not name it.
#[test]
fn a_name_that_is_not_utf8_hides_only_itself() {
    use std::os::unix::ffi::OsStrExt;
    let wt = worktree();
    let root = wt.path();
    std::fs::create_dir(root.join("d")).unwrap();
    let bad = std::ffi::OsStr::from_bytes(b"\xff\xfe.txt");
    std::fs::write(root.join("d").join(bad), "needle in a bad name\n").unwrap();
    std::fs::write(root.join("d/ok.txt"), "needle\n").unwrap();
    std::fs::write(root.join("d/z.txt"), "needle too\n").unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut s, _) = Server::start(root, plugins.path(), &[]);
    let r = s.call("list_dir", json!({"path": "d"}));
    assert!(!is_error(&r), "{r}");
    let names = each_str(&r["structuredContent"]["entries"], "name");
    assert_eq!(names, ["ok.txt", "z.txt"], "{r}");
    let r = s.call("search", json!({"pattern": "needle"}));
    assert!(!is_error(&r), "{r}");
    let found = each_str(&r["structuredContent"]["matches"], "path");
    assert_eq!(found, ["d/ok.txt", "d/z.txt"], "{r}");
    assert!(s.alive());
}

/// Lowers the open-file limit of the running server `pid` to `n` (soft and
/// hard), as an operator's `ulimit -n` would, so the test does not depend
/// on the machine's own limit.
fn limit_open_files(pid: u32, n: u64) {
    use rustix::process::{prlimit, Pid, Resource, Rlimit};
    let pid = Pid::from_raw(pid as i32).unwrap();
    let limit = Rlimit {
        current: Some(n),
        maximum: Some(n),
    };
    prlimit(Some(pid), Resource::Nofile, limit).unwrap();
}

/// A hostile plugin holding handles: each file it opens is a descriptor of
/// the server process, whose limit all plugins share, and each directory
/// listing a copy of the directory in host memory. Its calls together may
/// hold only `--max-open-files` each (default 256), so with the process
/// limited to 2048, two calls trying for 5,000 each leave the other plugin
/// its files; each ends `quota_exceeded` naming the flag.
#[test]
fn a_plugin_cannot_take_the_servers_open_files() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--timeout-ms", "20000"]);
    limit_open_files(s.pid(), 2048);
    let hold = |s: &mut Server, id: u64, listings: bool| {
        let args = json!({"count": 5000, "listings": listings, "hold_ms": 4000});
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "hold_files", "arguments": args}});
        s.send_raw(&msg.to_string());
    };
    hold(&mut s, 901, false);
    hold(&mut s, 902, false);
    hold(&mut s, 903, true);
    // While they hold what they got, the other plugin opens its files.
    std::thread::sleep(Duration::from_millis(1500));
    let r = read_file_within(&mut s, 1, Duration::from_secs(10));
    assert!(!is_error(&r), "{r}");
    assert_eq!(r["structuredContent"]["content"], "inside\n", "{r}");
    for id in 901..=903 {
        let r = result_of(&mut s, id, Duration::from_secs(30));
        assert_eq!(error_kind(&r), "quota_exceeded", "{r}");
        let text = text_of(&r);
        assert!(
            text.contains("256") && text.contains("--max-open-files"),
            "{r}"
        );
    }
    // A smaller bound holds too.
    drop(s);
    let args = ["--max-open-files", "10"];
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &args);
    let r = s.call("hold_files", json!({"count": 11}));
    assert!(text_of(&r).contains("more than 10"), "{r}");
    let r = s.call("hold_files", json!({"count": 10}));
    assert!(!is_error(&r), "{r}");
    let out: Value = serde_json::from_str(&text_of(&r)).unwrap();
    assert_eq!(out["opened"], 10, "{r}");
    // Dropping handles that were never counted gives nothing back: the
    // worktree's preopen handles, which `get-directories` hands out anew
    // each time, took the count to zero (a helper's find: 20,000 held).
    for listings in [false, true] {
        let args = json!({"count": 1000, "listings": listings, "drop_preopens": true});
        let r = s.call("hold_files", args);
        assert!(text_of(&r).contains("more than 10"), "{r}");
    }
    assert_flag_refused(wt.path(), plugins.path(), "--max-open-files", "0");
}

/// A directory listing is a copy of the whole directory in host memory,
/// outside the call's memory limit: 256 listings of a 30,000-entry
/// directory held 0.9 GB in one call (a helper's find). A listing counts
/// as one open file per 512 entries (and one more), so a call holds at
/// most ~131,000 listed entries at once under the default bound.
#[test]
fn big_listings_count_by_their_size() {
    let wt = worktree();
    for i in 0..20_000 {
        std::fs::write(wt.path().join(format!("f{i:05}")), "").unwrap();
    }
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &[]);
    // 20,004 entries: 40 each of the 256.
    let r = s.call("hold_files", json!({"count": 100, "listings": true}));
    assert_eq!(error_kind(&r), "quota_exceeded", "{r}");
    assert!(text_of(&r).contains("--max-open-files"), "{r}");
    let r = s.call("hold_files", json!({"count": 6, "listings": true}));
    assert!(!is_error(&r), "{r}");
    let r = s.call("list_dir", json!({"path": "."}));
    assert!(!is_error(&r), "one big listing is still served: {r}");
}

/// Code too costly to compile is refused from its shape before any
/// compiler runs: a 4 MB component of 1,000,000 empty functions took
/// 6.2 GB and 11-26 s to compile, holding start-up; 246 MB of unused record
/// types loaded and kept 4.5 GB for the server's life; a 1.1 MB element
/// segment passed 4 GB at load (helpers' finds).
/// The other plugin is served.
#[test]
fn a_compile_bomb_is_refused_before_it_is_compiled() {
    let funcs = "(func)".repeat(wasm_mcp_host::code_limits::MAX_FUNCTIONS as usize + 1);
    let bomb = wat::parse_str(format!("(component (core module {funcs}))")).unwrap();
    // ~1 KB of binary per type: past the 4 MiB of declarations allowed.
    let ty = format!("(type (func (param {})))", "i32 ".repeat(1000));
    let types = ty.repeat(4400);
    let types = wat::parse_str(format!("(component (core module {types}))")).unwrap();
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    std::fs::write(plugins.path().join("bomb.wasm"), bomb).unwrap();
    std::fs::write(plugins.path().join("types.wasm"), types).unwrap();
    // ~7 KB at load per item (1,000,000 passed 4 GB); one byte each here.
    let refs = "0 ".repeat(20_000);
    let table = "(table 1 funcref) (func)";
    let elems = format!("(component (core module {table} (elem (i32.const 0) func {refs})))");
    let elems = wat::parse_str(elems).unwrap();
    std::fs::write(plugins.path().join("elems.wasm"), elems).unwrap();
    let (mut s, log) = Server::start_logged(wt.path(), plugins.path(), &["--no-cache"]);
    let r = read_file_within(&mut s, 1, Duration::from_secs(30));
    assert_eq!(r["structuredContent"]["content"], "inside\n", "{r}");
    assert!(s.shutdown().success());
    let log = log.read();
    assert!(log.contains("too costly to compile"), "{log}");
    assert!(log.contains("100001 functions"), "{log}");
    assert!(
        log.contains("bytes of type and linking declarations"),
        "{log}"
    );
    assert!(log.contains("20000 element segment items"), "{log}");
}

/// A directory listing is made on a blocking thread, not on the thread
/// running calls: wasmtime-wasi `stat`s every entry, and a plugin listing
/// 50,000 entries in a loop held other plugins' calls for up to 5 s (a
/// helper's find). (The deadline is long: in a debug build, on a loaded
/// 2-core machine, the eight listings took up to ~30 s, ~1 s in release.)
/// Here eight listings of 60,000 entries run while another
/// plugin's `read_file` is timed.
#[test]
fn listings_do_not_hold_up_other_calls() {
    let wt = worktree_with_many_files(60_000);
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--timeout-ms", "150000"]);
    let reads = |s: &mut Server| -> Vec<Duration> {
        (0..11)
            .map(|_| {
                let t = Instant::now();
                let r = s.call("read_file", json!({"path": "inside.txt"}));
                assert!(!is_error(&r), "{r}");
                t.elapsed()
            })
            .collect()
    };
    let quiet = reads(&mut s).into_iter().max().unwrap();
    for id in 0..8 {
        s.send_raw(
            &json!({"jsonrpc": "2.0", "id": 700 + id, "method": "tools/call",
                "params": {"name": "fs_list", "arguments": {"path": "many"}}})
            .to_string(),
        );
    }
    std::thread::sleep(Duration::from_millis(50));
    let during = reads(&mut s);
    eprintln!("read_file: quiet at most {quiet:?}, during eight listings {during:?}");
    let listing = during.into_iter().max().unwrap();
    for id in 0..8 {
        let early = s.notifications.iter().position(|m| m["id"] == 700 + id);
        let r = match early {
            Some(i) => s.notifications.remove(i),
            None => s
                .wait_response(700 + id, Duration::from_secs(160))
                .expect("a listing"),
        };
        let n = r["result"]["structuredContent"]["entries"]
            .as_array()
            .map(Vec::len);
        assert_eq!(
            n,
            Some(60_000),
            "{}",
            r.to_string().chars().take(300).collect::<String>()
        );
    }
    assert!(
        listing < quiet * 10 + Duration::from_millis(100),
        "quiet at most {quiet:?}, during eight listings at most {listing:?}"
    );
    assert!(s.shutdown().success());
}

/// A worktree with a directory `many` of `n` empty files.
fn worktree_with_many_files(n: usize) -> tempfile::TempDir {
    let wt = worktree();
    let many = wt.path().join("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..n {
        std::fs::File::create(many.join(format!("f{i}"))).unwrap();
    }
    wt
}

/// A cancelled listing ends with its call: it ran on a blocking task of its
/// own, which went on when the call was dropped, its slot freed; clients
/// cancelling listings of a large directory piled up 300 threads and slowed
/// every other call to seconds (a helper's find). Here listings of 120,000
/// entries are cancelled 100 ms after they are sent, two at a time (the
/// server's `--max-concurrency`), 30 times: the most threads the server
/// has meanwhile stay near what two calls need.
#[test]
fn a_cancelled_listing_ends_with_its_call() {
    let wt = worktree_with_many_files(120_000);
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let args = ["--timeout-ms", "30000", "--max-concurrency", "2"];
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &args);
    let threads =
        |pid: u32| std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    let before = threads(s.pid());
    let mut most = before;
    for round in 0..30 {
        let ids = [1000 + 2 * round, 1001 + 2 * round];
        for id in ids {
            s.send_raw(
                &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "fs_list", "arguments": {"path": "many"}}})
                .to_string(),
            );
        }
        std::thread::sleep(Duration::from_millis(100));
        for id in ids {
            s.notify(
                "notifications/cancelled",
                json!({"requestId": id, "reason": "test"}),
            );
        }
        most = most.max(threads(s.pid()));
    }
    let r = s.call("read_file", json!({"path": "inside.txt"}));
    assert!(!is_error(&r), "{r}");
    eprintln!("threads {before} before, at most {most} during");
    // Measured (debug build): +1 with the listing inside its call, +5 with
    // it on a task of its own.
    assert!(
        most <= before + 3,
        "threads: {before} before, at most {most} during"
    );
    assert!(s.shutdown().success());
}

/// Compiles run in a child process bounded in memory and time, for shapes
/// no static limit foresaw (helpers' finds): one function of 50,000
/// locals and 100,000 joins that uses them all took Cranelift ~1.4 GB/s
/// until the machine ran out, and one Winch compiles in time quadratic in
/// its size (45 s for 1 MB, nothing served meanwhile). Each is refused,
/// named in the log, and the other plugin is served. (Components nested
/// 30 deep, 2^30 instances from 1.5 KB, are refused from their shape.)
#[test]
fn compiles_are_bounded_in_memory_and_time() {
    let locals = "i32 ".repeat(49_999);
    let joins: String = (0..100_000)
        .map(|i| {
            format!(
                "(if (local.get 0) (then (local.set {} (i32.const 1))))",
                1 + i % 49_999
            )
        })
        .collect();
    let uses: String = (1..50_000)
        .map(|i| format!("(local.get {i}) i32.add "))
        .collect();
    let ssa = format!(
        "(component (core module (func (param i32) (result i32) (local {locals}) {joins} \
         (i32.const 0) {uses})))"
    );
    let ssa = wat::parse_str(ssa).unwrap();
    let slow = winch_slow_component();
    let wt = worktree();
    // Cranelift from the start for the first (on Winch it loads, and the
    // background tier-up is what the bound stops), Winch for the second.
    let cases = [
        (
            ssa,
            "joins.wasm",
            &["--no-baseline-compiler", "--compile-memory-mb", "1024"][..],
            "more than 1024 MiB (--compile-memory-mb)",
        ),
        (
            slow,
            "slow.wasm",
            &["--compile-timeout-ms", "20000"][..],
            "longer than 20000 ms (--compile-timeout-ms)",
        ),
    ];
    for (bomb, name, bounds, why) in cases {
        let plugins = plugin_dir(&["plugins/workspace.wasm"]);
        std::fs::write(plugins.path().join(name), bomb).unwrap();
        let args = [&["--no-cache"][..], bounds].concat();
        let (mut s, log) = Server::start_logged(wt.path(), plugins.path(), &args);
        // On a busy machine (CI runs the other tests beside it) the
        // workspace plugin's own compile may outlast the first scan's load
        // budget beside the bomb's; a busy load is retried at the next
        // scan, so wait for its tool first.
        let listed = Instant::now() + Duration::from_secs(60);
        while !tool_names(&mut s).iter().any(|t| t == "read_file") {
            assert!(
                Instant::now() < listed,
                "read_file never listed: {}",
                log.read()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let r = read_file_within(&mut s, 1, Duration::from_secs(60));
        assert_eq!(
            r["structuredContent"]["content"],
            "inside\n",
            "{r}: {}",
            log.read()
        );
        assert!(s.shutdown().success());
        let log = log.read();
        let refused = log
            .lines()
            .find(|l| l.contains("refused plugin") && l.contains(name))
            .unwrap_or_else(|| panic!("{name} was not refused: {log}"));
        assert!(refused.contains(why), "{refused}");
    }
}

/// ~3 minutes for Winch here (250,000 values and 167,000 blocks took 45 s):
/// far past a 20 s deadline on any machine, which the workspace plugin's
/// own compile, on a loaded machine too, is far within.
fn winch_slow_component() -> Vec<u8> {
    let consts = "i32.const 0\n".repeat(500_000);
    let blocks = "block end\n".repeat(330_000);
    let slow = format!("(component (core module (func {consts} {blocks} unreachable)))");
    wat::parse_str(slow).unwrap()
}

/// The pids of the `compile-worker` children of process `parent`.
fn compile_workers_of(parent: u32) -> Vec<u32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat.rsplit(") ").next().and_then(|r| r.split(' ').nth(1));
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            ppid == Some(parent.to_string().as_str())
                && String::from_utf8_lossy(&cmdline).contains("compile-worker")
        })
        .collect()
}

/// A compiler child ends with its server: a server stopped mid-compile (an
/// MCP client ends a stdio session with SIGTERM, the TypeScript SDK
/// signals the server alone) left its compiler running, several at once,
/// each writing tens of MB nothing removed (a helper's find).
#[test]
fn a_compiler_ends_with_its_server() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    std::fs::write(plugins.path().join("slow.wasm"), winch_slow_component()).unwrap();
    let s = Server::spawn(wt.path(), plugins.path(), &["--no-cache"]);
    let server = s.pid();
    let deadline = Instant::now() + Duration::from_secs(60);
    let workers = loop {
        let workers = compile_workers_of(server);
        if !workers.is_empty() {
            break workers;
        }
        assert!(Instant::now() < deadline, "no compile worker was started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Past reading its input (killed before, the worker reads a cut
    // component and fails at once).
    std::thread::sleep(Duration::from_secs(2));
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &server.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let alive = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| !stat.rsplit(") ").next().unwrap_or("").starts_with('Z'))
    };
    while workers.iter().any(alive) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = workers.iter().copied().filter(alive).collect();
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "compile workers {left:?} outlived their server"
    );
    drop(s);
}

/// At the end of its input a stdio server exits without waiting for a
/// background tier-up compile (its compiler is killed with it): it stayed
/// 14 s for a compile nobody would use (a helper's find: MCP clients give
/// a server 2 s after closing its input, then signal it).
#[test]
fn the_end_of_input_does_not_wait_for_a_background_compile() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "samples/js-json.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--no-cache"]);
    let server = s.pid();
    let deadline = Instant::now() + Duration::from_secs(60);
    while compile_workers_of(server).is_empty() {
        assert!(Instant::now() < deadline, "no tier-up compile was started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let workers = compile_workers_of(server);
    s.close_input();
    let t = Instant::now();
    let exited = s.exit_within(Duration::from_secs(60));
    assert!(exited.is_some(), "the server did not exit");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "exit took {:?}",
        t.elapsed()
    );
    std::thread::sleep(Duration::from_millis(500));
    for pid in workers {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let running = !stat.is_empty() && !stat.rsplit(") ").next().unwrap_or("").starts_with('Z');
        assert!(!running, "compile worker {pid} outlived its server");
    }
}

/// A read stream of a file holds a buffer on the host once a read is
/// started (wasmtime-wasi reads ahead on a blocking thread), outside the
/// call's memory limit: 99,000 streams of one open file took 6.4 GB in one
/// call (a helper's find). Streams count as open files, so a call holds at
/// most `--max-open-files` of them, and dropped ones count no more.
#[test]
fn read_streams_count_as_open_files() {
    let wt = worktree();
    std::fs::write(wt.path().join("big.bin"), vec![b'h'; 65536]).unwrap();
    let plugins = plugin_dir(&["test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--max-open-files", "64"]);
    let r = s.call(
        "hold_files",
        json!({"count": 5000, "streams_of": "big.bin"}),
    );
    assert_eq!(error_kind(&r), "quota_exceeded", "{r}");
    assert!(text_of(&r).contains("more than 64"), "{r}");
    // The file and 63 streams fit; again and again (each call's are freed).
    for _ in 0..3 {
        let r = s.call("hold_files", json!({"count": 63, "streams_of": "big.bin"}));
        assert!(!is_error(&r), "{r}");
        let out: Value = serde_json::from_str(&text_of(&r)).unwrap();
        assert_eq!(out["opened"], 63, "{r}");
    }
    // Write and append streams hold their file open after its descriptor
    // is dropped, so they count too (16,000 were held past a bound of 256:
    // a helper's find).
    let r = s.call(
        "hold_files",
        json!({"count": 5000, "streams_of": "write:ws"}),
    );
    assert_eq!(error_kind(&r), "quota_exceeded", "{r}");
    assert!(text_of(&r).contains("more than 64"), "{r}");
    let r = s.call("hold_files", json!({"count": 63, "streams_of": "write:ws"}));
    assert!(!is_error(&r), "{r}");
}

/// A hostile file tree for the workspace plugin's own limits: a file whose
/// escaped text is 6× its bytes (900,000 control characters: 5.4 MB of
/// JSON, over the host's 5 MiB output cap) is still readable, cut and
/// marked `truncated`; a search says what it did not search (a directory
/// 70 levels down) instead of reporting a complete answer; a write to a
/// path naming a directory is refused, not turned into a file.
#[test]
fn hostile_contents_stay_readable_and_search_says_what_it_skipped() {
    let wt = worktree();
    let root = wt.path();
    std::fs::write(root.join("ctl.txt"), vec![1u8; 900_000]).unwrap();
    let deep: std::path::PathBuf = (0..70).map(|i| format!("d{i}")).collect();
    std::fs::create_dir_all(root.join(&deep)).unwrap();
    std::fs::write(root.join(&deep).join("needle.txt"), "inside\n").unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut s, _) = Server::start(root, plugins.path(), &[]);
    let r = s.call("read_file", json!({"path": "ctl.txt"}));
    assert!(!is_error(&r), "{}", text_of(&r));
    let out = &r["structuredContent"];
    assert_eq!(out["truncated"], true, "{out}");
    let got = out["content"].as_str().unwrap().len();
    assert!(got > 100_000 && got < 900_000, "{got} characters");
    let r = s.call("search", json!({"pattern": "inside"}));
    assert!(!is_error(&r), "{r}");
    let out = &r["structuredContent"];
    assert_eq!(out["matches"][0]["path"], "inside.txt", "{out}");
    assert_eq!(out["matches"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(out["skipped"]["too_deep"], 1, "{out}");
    assert_eq!(out["truncated"], false, "{out}");
    let r = s.call("write_file", json!({"path": "newdir/", "content": "a"}));
    assert!(
        is_error(&r) && text_of(&r).contains("names a directory"),
        "{r}"
    );
    assert!(!root.join("newdir").exists());
}

/// A call alone runs on the connection's thread until its first yield; a
/// step with no yield at all (here one `memory.fill` over 200 MiB of fresh
/// pages, which no epoch check interrupts) held that thread, and a client
/// calling such a tool one call at a time made every other request wait
/// ~100× longer, each call alone and so inline (a helper's find). After
/// one such step calls stop running inline for a while: of six calls, at
/// most the first holds up a ping sent while it runs.
#[test]
fn a_step_that_never_yields_holds_the_connection_once() {
    let wt = worktree();
    let plugins = plugin_dir(&["test-plugins/hostile.wasm"]);
    let (mut s, _p) = Server::start(wt.path(), plugins.path(), &[]);
    let mut held = Vec::new();
    for i in 0..6u64 {
        let (call, ping) = (1000 + 2 * i, 1001 + 2 * i);
        let fill = json!({"jsonrpc": "2.0", "id": call, "method": "tools/call",
            "params": {"name": "fill", "arguments": {"mb": 200}}});
        s.send_raw(&fill.to_string());
        std::thread::sleep(Duration::from_millis(5));
        let t = Instant::now();
        s.send_raw(&json!({"jsonrpc": "2.0", "id": ping, "method": "ping"}).to_string());
        s.wait_response(ping, Duration::from_secs(30))
            .expect("ping answered");
        held.push(t.elapsed());
        let answered = s.notifications.iter().any(|m| m["id"] == call)
            || s.wait_response(call, Duration::from_secs(30)).is_some();
        assert!(answered, "call {call} answered");
    }
    let slow = held
        .iter()
        .filter(|d| **d > Duration::from_millis(40))
        .count();
    assert!(slow <= 1, "pings held up: {held:?}");
}

/// A call reads nothing an earlier call left in its instance's memory: the
/// pages a pooled slot keeps resident are zeroed at every reset, the rest
/// given back. `scribble` fills fresh heap with a byte no JSON text holds;
/// `peek` counts that byte in all of its linear memory and reads 4 MiB it
/// grows it by.
#[test]
fn a_call_never_sees_what_an_earlier_call_left_in_memory() {
    let wt = worktree();
    let plugins = plugin_dir(&["test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &[]);
    let peek = |s: &mut Server| s.call("peek", json!({}))["structuredContent"].clone();
    let clean = peek(&mut s);
    assert_eq!(clean["dirty_grown"], 0, "{clean}");
    let base = clean["marked"].as_u64().unwrap();
    // `peek` finds marks where there are some.
    let r = s.call("scribble", json!({"bytes": 1 << 20, "then_peek": true}));
    assert!(
        r["structuredContent"]["peek_marked"].as_u64().unwrap() >= base + (1 << 20),
        "{r}"
    );
    for round in 0..6u64 {
        // Past what a slot keeps resident (64 KiB, `KEEP_RESIDENT_BYTES`
        // in `host/src/sandbox.rs`), and past the 4 MiB
        // tried in the twenty-first bench round.
        let bytes = if round % 2 == 0 { 3 << 20 } else { 8 << 20 };
        let r = s.call("scribble", json!({"bytes": bytes}));
        assert_eq!(r["structuredContent"]["marked"], bytes, "{r}");
        if round >= 3 {
            // Peeked at once, then (from here) after a pause.
            std::thread::sleep(Duration::from_millis(50));
        }
        for _ in 0..3 {
            assert_sees_nothing_left(&peek(&mut s), base);
        }
    }
    // Calls in flight at once: scribbles and peeks interleaved.
    for id in 0..16u64 {
        let (tool, args) = match id % 2 {
            0 => ("scribble", json!({"bytes": 3 << 20})),
            _ => ("peek", json!({})),
        };
        let msg = json!({"jsonrpc": "2.0", "id": 900 + id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}});
        s.send_raw(&msg.to_string());
    }
    for id in (0..16u64).filter(|i| i % 2 == 1) {
        let seen = &result_of(&mut s, 900 + id, Duration::from_secs(20))["structuredContent"];
        assert_sees_nothing_left(seen, base);
    }
    assert!(s.shutdown().success());
}

/// `peek`'s answer `seen` finds no more marks than a clean instance's
/// `base`, and nothing but zeros in the memory it grew.
fn assert_sees_nothing_left(seen: &Value, base: u64) {
    assert!(seen["marked"].as_u64().unwrap() <= base + 64, "{seen}");
    assert_eq!(seen["dirty_grown"], 0, "{seen}");
}
