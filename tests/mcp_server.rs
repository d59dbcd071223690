//! The MCP surface of `wasm-mcp serve`: handshake, discovery with
//! pagination, tool calls with structuredContent, allow-lists, hot reload.

use std::time::Duration;

use serde_json::{json, Value};
mod support;
use support::{is_error, plugin, plugin_dir, text_of, Server};
use wasm_mcp_protocol::text::{self, LOG_DETAIL_BYTES};

fn worktree() -> tempfile::TempDir {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(
        wt.path().join("hello.txt"),
        "line one\nline two\nline three\n",
    )
    .unwrap();
    std::fs::create_dir(wt.path().join("src")).unwrap();
    std::fs::write(
        wt.path().join("src/lib.rs"),
        "pub fn answer() -> u32 {\n    42\n}\n",
    )
    .unwrap();
    wt
}

fn default_plugins() -> std::path::PathBuf {
    plugin("plugins/workspace.wasm")
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn initialize_advertises_tools_with_list_changed() {
    let wt = worktree();
    let (server, init) = Server::start(wt.path(), &default_plugins(), &[]);
    let res = &init["result"];
    assert_eq!(res["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(res["capabilities"]["tools"]["listChanged"], true, "{init}");
    assert_eq!(res["serverInfo"]["name"], "wasm-mcp");
    assert!(server.shutdown().success());
}

#[test]
fn lists_the_workspace_tools_with_schemas() {
    let wt = worktree();
    let (mut s, _) = Server::start(wt.path(), &default_plugins(), &[]);
    let tools = s.list_all_tools();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for want in ["list_dir", "read_file", "search", "write_file"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for t in &tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        assert!(t["description"].as_str().is_some_and(|d| !d.is_empty()));
    }
    let read = tools.iter().find(|t| t["name"] == "read_file").unwrap();
    assert_eq!(read["annotations"]["readOnlyHint"], true);
    let write = tools.iter().find(|t| t["name"] == "write_file").unwrap();
    assert_eq!(write["annotations"]["readOnlyHint"], false);
    assert!(s.shutdown().success());
}

#[test]
fn tools_list_paginates_and_rejects_bad_cursors() {
    let wt = worktree();
    let (mut s, _) = Server::start(wt.path(), &default_plugins(), &["--page-size", "1"]);
    let first = s.request("tools/list", json!({}));
    assert_eq!(first["result"]["tools"].as_array().unwrap().len(), 1);
    assert!(first["result"]["nextCursor"].is_string(), "{first}");
    let all = s.list_all_tools();
    assert_eq!(all.len(), 4, "one page per tool, all collected");
    let mut names: Vec<&str> = all.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.dedup();
    assert_eq!(names.len(), 4, "no duplicates across pages");
    let bad = s.request("tools/list", json!({"cursor": "garbage"}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(s.alive());
}

/// A cursor names the tool list it pages through, not a count of this
/// process's reloads: replicas behind a load balancer with the same tools
/// accept each other's cursors, and one with other tools refuses it as
/// stale (both were at version 1, so a client paging across them silently
/// skipped tools; a helper's find).
#[test]
fn a_cursor_is_good_on_replicas_with_the_same_tools_only() {
    let wt = worktree();
    let same = plugin_dir(&["plugins/workspace.wasm"]);
    let other = plugin_dir(&["plugins/workspace.wasm", "test-plugins/conformance.wasm"]);
    let page = ["--page-size", "2"];
    let (mut a, _) = Server::start(wt.path(), &default_plugins(), &page);
    let (mut b, _) = Server::start(wt.path(), same.path(), &page);
    let (mut c, _) = Server::start(wt.path(), other.path(), &page);
    let first = a.request("tools/list", json!({}));
    let cursor = first["result"]["nextCursor"].clone();
    let from_a = a.request("tools/list", json!({"cursor": cursor}));
    let from_b = b.request("tools/list", json!({"cursor": cursor}));
    assert_eq!(
        from_a["result"]["tools"], from_b["result"]["tools"],
        "{from_b}"
    );
    let from_c = c.request("tools/list", json!({"cursor": cursor}));
    assert_eq!(from_c["error"]["code"], -32602, "{from_c}");
    assert!(from_c.to_string().contains("stale cursor"), "{from_c}");
}

#[test]
fn read_file_returns_structured_content_and_a_text_block() {
    let wt = worktree();
    let (mut s, _) = Server::start(wt.path(), &default_plugins(), &[]);
    let r = s.call("read_file", json!({"path": "hello.txt"}));
    assert!(!is_error(&r), "{r}");
    let sc = &r["structuredContent"];
    assert_eq!(sc["content"], "line one\nline two\nline three\n");
    assert_eq!(sc["truncated"], false);
    assert_eq!(sc["path"], "hello.txt");
    let text: Value = serde_json::from_str(&text_of(&r)).expect("text block is the JSON result");
    assert_eq!(&text, sc);
    // Absolute-looking paths are relative to the worktree root.
    let r = s.call("read_file", json!({"path": "/src/lib.rs"}));
    assert!(
        r["structuredContent"]["content"]
            .as_str()
            .unwrap()
            .contains("42"),
        "{r}"
    );
    assert!(s.shutdown().success());
}

#[test]
fn read_file_limits_lines_and_bytes() {
    let wt = worktree();
    let big_line = "x".repeat(1023) + "\n";
    std::fs::write(wt.path().join("big.txt"), big_line.repeat(3 * 1024)).unwrap(); // 3 MiB, 3072 lines
    let (mut s, _) = Server::start(wt.path(), &default_plugins(), &[]);
    let r = s.call("read_file", json!({"path": "hello.txt", "line_limit": 2}));
    assert_eq!(r["structuredContent"]["content"], "line one\nline two\n");
    assert_eq!(r["structuredContent"]["truncated"], true);
    let r = s.call("read_file", json!({"path": "big.txt", "line_limit": 1000}));
    let sc = &r["structuredContent"];
    assert_eq!(
        sc["truncated"],
        true,
        "{}",
        text_of(&r).chars().take(300).collect::<String>()
    );
    assert_eq!(sc["content"].as_str().unwrap().len(), 1000 * 1024);
    for bad in [json!(0), json!(1001), json!("ten")] {
        let r = s.call("read_file", json!({"path": "hello.txt", "line_limit": bad}));
        assert!(is_error(&r), "line_limit {bad} accepted: {r}");
        assert!(text_of(&r).contains("invalid arguments"), "{r}");
    }
    let r = s.call("read_file", json!({}));
    assert!(is_error(&r) && text_of(&r).contains("path"), "{r}");
    let r = s.call("read_file", json!({"path": "missing.txt"}));
    assert!(is_error(&r), "{r}");
    assert!(s.alive());
}

#[test]
fn read_file_caps_reads_at_two_mebibytes() {
    let wt = worktree();
    // One line, 3 MiB: only the line cap's byte limit can stop it.
    std::fs::write(wt.path().join("oneline.txt"), "y".repeat(3 << 20)).unwrap();
    let (mut s, _) = Server::start(wt.path(), &default_plugins(), &[]);
    let r = s.call("read_file", json!({"path": "oneline.txt"}));
    assert!(!is_error(&r), "{}", text_of(&r));
    let sc = &r["structuredContent"];
    assert_eq!(sc["truncated"], true);
    assert!(sc["content"].as_str().unwrap().len() <= 2 << 20);
    assert!(s.alive());
}

#[test]
fn write_list_search_round_trip_on_the_host_disk() {
    let wt = worktree();
    let (mut s, _) = Server::start(wt.path(), &default_plugins(), &[]);
    let r = s.call(
        "write_file",
        json!({"path": "notes/todo.md", "content": "find the needle\n", "create_dirs": true}),
    );
    assert!(!is_error(&r), "{r}");
    assert_eq!(
        std::fs::read_to_string(wt.path().join("notes/todo.md")).unwrap(),
        "find the needle\n"
    );
    let r = s.call("list_dir", json!({"path": "."}));
    let names = support::each_str(&r["structuredContent"]["entries"], "name");
    assert_eq!(names, ["hello.txt", "notes", "src"], "{r}");
    let r = s.call("search", json!({"pattern": "needle"}));
    let m = r["structuredContent"]["matches"].as_array().unwrap();
    assert_eq!(m.len(), 1, "{r}");
    assert_eq!(m[0]["path"], "notes/todo.md");
    assert_eq!(m[0]["line"], 1);
    assert!(s.shutdown().success());
}

#[test]
fn unknown_tools_are_protocol_errors_and_allow_lists_hide_tools() {
    let wt = worktree();
    let (mut s, _) = Server::start(
        wt.path(),
        &default_plugins(),
        &["--allow", "read_file,list_dir"],
    );
    let names: Vec<String> = s
        .list_all_tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["list_dir", "read_file"]);
    let r = s.request(
        "tools/call",
        json!({"name": "write_file", "arguments": {"path": "x", "content": "y"}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(!wt.path().join("x").exists());
    let r = s.request(
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(s.alive());
}

#[test]
fn plugin_changes_send_list_changed_and_refresh_the_catalog() {
    let wt = worktree();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut s, _) = Server::start(wt.path(), dir.path(), &["--watch-ms", "100"]);
    assert_eq!(s.list_all_tools().len(), 4);
    std::fs::copy(
        plugin("test-plugins/hostile.wasm"),
        dir.path().join("hostile.wasm"),
    )
    .unwrap();
    assert!(s
        .wait_notification("notifications/tools/list_changed", Duration::from_secs(60))
        .is_some());
    let names: Vec<String> = s
        .list_all_tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        names.contains(&"spin".to_string()) && names.contains(&"read_file".to_string()),
        "{names:?}"
    );
    std::fs::remove_file(dir.path().join("hostile.wasm")).unwrap();
    assert!(s
        .wait_notification("notifications/tools/list_changed", Duration::from_secs(60))
        .is_some());
    assert_eq!(s.list_all_tools().len(), 4);
    assert!(s.shutdown().success());
}

#[test]
fn broken_plugins_are_refused_and_the_rest_still_served() {
    let wt = worktree();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    std::fs::write(dir.path().join("garbage.wasm"), b"this is not wasm").unwrap();
    // A core module (not a component): the smallest valid one.
    std::fs::write(dir.path().join("core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    // A component that exports some other world (here: nothing at all).
    std::fs::write(
        dir.path().join("wrong-world.wasm"),
        wat::parse_str("(component)").unwrap(),
    )
    .unwrap();
    let (mut s, _) = Server::start(wt.path(), dir.path(), &[]);
    assert_eq!(s.list_all_tools().len(), 4);
    let r = s.call("read_file", json!({"path": "hello.txt"}));
    assert!(!is_error(&r));
    // `wasm-mcp tools` reports each refusal on stderr, naming the file.
    let out = std::process::Command::new(support::server_bin())
        .args(["tools", "--no-cache", "--worktree"])
        .arg(wt.path())
        .arg("--plugins")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (file, why) in [
        ("garbage.wasm", "not a WebAssembly component"),
        ("core.wasm", "core wasm module"),
        ("wrong-world.wasm", "cannot be linked"),
    ] {
        assert!(
            stderr.lines().any(|l| l.contains(file) && l.contains(why)),
            "no refusal of {file} in:\n{stderr}"
        );
    }
    assert!(s.shutdown().success());
}

#[test]
fn a_refused_plugin_is_not_retried_until_it_changes() {
    let wt = worktree();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    std::fs::write(dir.path().join("later.wasm"), b"not yet a component").unwrap();
    let (mut s, log) = Server::start_logged(wt.path(), dir.path(), &["--watch-ms", "50"]);
    std::thread::sleep(Duration::from_millis(600)); // ~10 rescans
    let refusals = log.read().matches("refused plugin").count();
    assert_eq!(
        refusals, 1,
        "an unchanged refused file was re-read on every scan"
    );
    // Once the file becomes a real plugin, it is loaded and clients are told.
    std::fs::copy(
        plugin("test-plugins/hostile.wasm"),
        dir.path().join("later.wasm"),
    )
    .unwrap();
    assert!(s
        .wait_notification("notifications/tools/list_changed", Duration::from_secs(60))
        .is_some());
    assert!(s.list_all_tools().iter().any(|t| t["name"] == "spin"));
    assert!(s.shutdown().success());
}

#[test]
fn a_tool_name_defined_by_two_plugins_is_served_once_from_the_first() {
    let wt = worktree();
    let dir = tempfile::tempdir().unwrap();
    for name in ["a-first.wasm", "b-second.wasm"] {
        std::fs::copy(plugin("plugins/workspace.wasm"), dir.path().join(name)).unwrap();
    }
    let (mut s, log) = Server::start_logged(wt.path(), dir.path(), &[]);
    let names: Vec<String> = s
        .list_all_tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["list_dir", "read_file", "search", "write_file"]);
    let r = s.call("read_file", json!({"path": "hello.txt"}));
    assert!(!is_error(&r), "{r}");
    assert!(s.shutdown().success());
    let log = log.read();
    let dupes: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("already provided by"))
        .collect();
    assert_eq!(dupes.len(), 4, "{log}");
    assert!(
        dupes.iter().all(|l| l.contains("b-second.wasm")),
        "{dupes:?}"
    );
}

/// A plugin file linked from the writable worktree (a symlink, or a file
/// with other hard links) is the same as a plugin dir inside it: the dir
/// is not watched, and the log says why. A tool overwrote the link's
/// target and the reload served it under that plugin's name and grant
/// (helpers' finds, the hard link the round after the symlink).
#[test]
fn a_plugin_file_linked_into_the_worktree_is_not_watched() {
    for hard in [false, true] {
        let wt = worktree();
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace.wasm");
        std::fs::copy(plugin("plugins/workspace.wasm"), workspace).unwrap();
        std::fs::create_dir(wt.path().join("plug")).unwrap();
        let target = wt.path().join("plug/x.wasm");
        std::fs::copy(plugin("test-plugins/hostile.wasm"), &target).unwrap();
        let link = dir.path().join("x.wasm");
        if hard {
            std::fs::hard_link(&target, &link).unwrap();
        } else {
            std::os::unix::fs::symlink(&target, &link).unwrap();
        }
        let (mut s, log) = Server::spawn_logged(wt.path(), dir.path(), &["--watch-ms", "100"]);
        s.initialize();
        let before = tool_names(&mut s);
        assert!(before.contains(&"spin".to_string()), "{before:?}");
        // Overwritten in place, as a tool's open, truncate and write do.
        let other = std::fs::read(plugin("test-plugins/badmeta.wasm")).unwrap();
        std::fs::write(&target, other).unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(tool_names(&mut s), before, "hard {hard}: reloaded");
        let text = log.read();
        assert!(text.contains("links into the writable worktree"), "{text}");
    }
}

/// The names `tools/list` gives.
fn tool_names(s: &mut Server) -> Vec<String> {
    let tools = s.request("tools/list", json!({}));
    tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// A plugin dir inside the writable worktree (the authoring guide serves
/// `--worktree . --plugins plugins`) is not watched: a tool writing there
/// replaced another plugin (here: moved it away), and a reload then
/// published the change (a helper's find). The log says why; with
/// `--read-only` it is watched as usual.
#[test]
fn a_plugin_dir_tools_can_write_to_is_not_watched() {
    let wt = worktree();
    let dir = wt.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    for name in ["plugins/workspace.wasm", "test-plugins/hostile.wasm"] {
        let to = dir.join(std::path::Path::new(name).file_name().unwrap());
        std::fs::copy(plugin(name), to).unwrap();
    }
    let (mut s, log) = Server::spawn_logged(wt.path(), &dir, &["--watch-ms", "100"]);
    s.initialize();
    let moved = s.call(
        "fs_mutate",
        json!({"op": "rename", "path": "plugins/workspace.wasm", "to": "plugins/moved.txt"}),
    );
    assert_eq!(moved["structuredContent"]["error"], Value::Null, "{moved}");
    assert!(dir.join("moved.txt").exists());
    std::thread::sleep(Duration::from_millis(1500));
    let tools = s.request("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"read_file"),
        "the move was published: {names:?}"
    );
    assert!(s.shutdown().success());
    let log = log.read();
    assert!(
        log.contains("the plugin dir is inside the writable worktree: not watched"),
        "{log}"
    );
    assert!(!log.contains("catalog built version=2"), "{log}");
}

/// A published name keeps its plugin across reloads: a plugin dropped in
/// later whose file name sorts first (`aaa.wasm`) took over `read_file`
/// and `write_file` and got their arguments, file contents included, and
/// the log blamed the plugin it displaced (a helper's find). The newcomer
/// is refused those names, and named.
#[test]
fn a_plugin_dropped_in_later_cannot_take_over_published_names() {
    let wt = worktree();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        plugin("plugins/workspace.wasm"),
        dir.path().join("workspace.wasm"),
    )
    .unwrap();
    let audit = tempfile::tempdir().unwrap();
    let audit_log = audit.path().join("audit.jsonl");
    let args = [
        "--watch-ms",
        "100",
        "--audit-log",
        audit_log.to_str().unwrap(),
    ];
    let (mut s, log) = Server::spawn_logged(wt.path(), dir.path(), &args);
    s.initialize();
    std::fs::copy(
        plugin("plugins/workspace.wasm"),
        dir.path().join("aaa.wasm"),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !log.read().contains("catalog built version=2") {
        assert!(
            std::time::Instant::now() < deadline,
            "aaa.wasm never loaded"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = s.call("read_file", json!({"path": "hello.txt"}));
    assert!(!is_error(&r), "{r}");
    assert!(s.shutdown().success());
    let served: Value = std::fs::read_to_string(&audit_log)
        .unwrap()
        .lines()
        .next_back()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .unwrap();
    assert_eq!(served["plugin"], "workspace", "{served}");
    let log = log.read();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("already")).collect();
    assert_eq!(refused.len(), 4, "{log}");
    assert!(
        refused.iter().all(|l| l.contains("aaa.wasm")),
        "{refused:?}"
    );
}

/// Nor when the plugin that published a name fails to reload (a
/// half-written upgrade): the name stays its own, unserved, until its file
/// loads again; another loaded plugin declaring it took `read_file` and
/// `write_file`, and the agent's file contents, until the server restarted
/// (a helper's find).
#[test]
fn a_failed_reload_does_not_hand_its_names_to_another_plugin() {
    let wt = worktree();
    let dir = tempfile::tempdir().unwrap();
    let workspace = std::fs::read(plugin("plugins/workspace.wasm")).unwrap();
    std::fs::write(dir.path().join("workspace.wasm"), &workspace).unwrap();
    let (mut s, log) = Server::spawn_logged(wt.path(), dir.path(), &["--watch-ms", "100"]);
    s.initialize();
    let wait_for = |what: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !log.read().contains(what) {
            assert!(std::time::Instant::now() < deadline, "never logged: {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    std::fs::write(dir.path().join("aaa.wasm"), &workspace).unwrap();
    wait_for("catalog built version=2");
    // Half of the upgrade written: workspace.wasm no longer loads.
    std::fs::write(
        dir.path().join("workspace.wasm"),
        &workspace[..workspace.len() / 2],
    )
    .unwrap();
    wait_for("name reserved for workspace");
    let names = |s: &mut Server| -> Vec<String> {
        s.list_all_tools()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let listed = names(&mut s);
    assert!(!listed.iter().any(|n| n == "read_file"), "{listed:?}");
    let call = json!({"name": "read_file", "arguments": {"path": "hello.txt"}});
    let r = s.request("tools/call", call);
    assert_eq!(r["error"]["code"], -32602, "read_file was served: {r}");
    std::fs::write(dir.path().join("workspace.wasm"), &workspace).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !names(&mut s).iter().any(|n| n == "read_file") {
        assert!(
            std::time::Instant::now() < deadline,
            "read_file never came back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = s.call("read_file", json!({"path": "hello.txt"}));
    assert!(!is_error(&r), "{r}");
    assert!(s.shutdown().success());
}

#[test]
fn descriptors_that_break_the_contract_are_refused_one_by_one() {
    let wt = worktree();
    let dir = plugin_dir(&["test-plugins/badmeta.wasm"]);
    let (mut s, log) = Server::start_logged(wt.path(), dir.path(), &[]);
    let tools = s.list_all_tools();
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["name"], "good_tool");
    assert_eq!(
        tools[0]["description"].as_str().unwrap().chars().count(),
        2000,
        "description not capped"
    );
    let r = s.call("good_tool", json!({}));
    assert!(!is_error(&r), "{r}");
    assert!(s.shutdown().success());
    let log = log.read();
    for (tool, why) in [
        ("bad name!", "is not [A-Za-z0-9_-]{1,64}"),
        ("not_object_schema", r#"must have "type": "object""#),
        ("broken_json_schema", "input-schema is not valid JSON"),
        ("invalid_schema", "is not a valid JSON Schema"),
        ("bad_output_schema", "output-schema is not a JSON object"),
        ("good_tool", "declared twice by the same plugin"),
        ("exponential_ref", "$ref expansion limit"),
        ("exponential_output", "output-schema refused"),
        ("recursive_ref", "recursive schemas are not accepted"),
        ("remote_ref", "is not local"),
        ("huge_schema", "schema size limit"),
        ("huge_title", "256-char title limit"),
        ("huge_invalid_schema", "is not a valid JSON Schema"),
        ("slow_regexes", "regex weight limit"),
        ("lookahead_regexes", "a lookaround or backreference"),
        ("hidden_regexes", "regex at /x-hidden/p/pattern"),
        ("folding_regex", "case-insensitive matching"),
        ("backtracking_output", "a lookaround or backreference"),
        ("thrashing_output", "regex DFA limit"),
        ("nfa_output", "regex NFA limit"),
        ("nnnnnnnn", "(4194304 bytes) is not [A-Za-z0-9_-]{1,64}"),
    ] {
        assert!(
            log.lines()
                .any(|l| l.contains("tool not published") && l.contains(tool) && l.contains(why)),
            "no refusal of {tool:?} ({why}) in:\n{}",
            text::head_bytes(&log, 64 << 10)
        );
    }
    // The 4 MiB name is shown by its head, not repeated whole.
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    // The longest a line may be: a load's detail and the line's own words.
    assert!(
        longest < LOG_DETAIL_BYTES + 1024,
        "a log line of {longest} bytes"
    );
}
