//! Both protocol revisions over stdio, as raw JSON-RPC frames: the
//! 2025-11-25 handshake and the stateless 2026-07-28 revision
//! (`server/discover`, `_meta` per request, `subscriptions/listen`), their
//! error codes, malformed params, cancellation and progress.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
mod support;
use support::{is_error, plugin, plugin_dir, proc_memory_bytes, Server};

const V2026: &str = "2026-07-28";

/// The `_meta` every 2026-07-28 request carries.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V2026,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "protocol-tests", "version": "0"},
    })
}

/// `params` with the 2026-07-28 `_meta` added (merged with any given).
fn with_meta(mut params: Value) -> Value {
    let mut m = meta();
    if let Some(extra) = params.get("_meta").and_then(Value::as_object) {
        m.as_object_mut().unwrap().extend(extra.clone());
    }
    params["_meta"] = m;
    params
}

fn worktree() -> tempfile::TempDir {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("hello.txt"), "hello\n").unwrap();
    wt
}

fn error_code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected a JSON-RPC error, got {r}"))
}

/// How a test speaks to the server: 2025-11-25 after `initialize`, or
/// 2026-07-28 with `_meta` on each request and no handshake.
#[derive(Clone, Copy, Debug)]
enum Revision {
    Handshake,
    Stateless,
}

impl Revision {
    fn start(
        self,
        wt: &std::path::Path,
        plugins: &std::path::Path,
        extra: &[&str],
    ) -> (Server, support::ServerLog) {
        let (mut s, log) = Server::spawn_logged(wt, plugins, extra);
        if let Revision::Handshake = self {
            s.initialize();
        }
        (s, log)
    }

    fn params(self, params: Value) -> Value {
        match self {
            Revision::Handshake => params,
            Revision::Stateless => with_meta(params),
        }
    }
}

#[test]
fn discover_and_initialize_advertise_only_what_is_served() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let mut s = Server::spawn(wt.path(), plugins.path(), &[]);
    let d = s.request("server/discover", json!({"_meta": meta()}));
    let res = &d["result"];
    assert_eq!(
        res["supportedVersions"],
        json!(["2025-06-18", "2025-11-25", V2026]),
        "{d}"
    );
    assert_eq!(
        res["capabilities"],
        json!({"tools": {"listChanged": true}}),
        "{d}"
    );
    assert_eq!(
        res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "wasm-mcp"
    );
    // discover is a probe: the 2025-11-25 handshake is still possible after it.
    let init = s.initialize();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(
        init["result"]["capabilities"],
        json!({"tools": {"listChanged": true}}),
        "{init}"
    );
    // A 2025-11-25 session has no subscriptions/listen.
    let listen = s.request(
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    assert_eq!(error_code(&listen), -32601, "{listen}");
    assert!(s.shutdown().success());

    // A version older than we serve is answered with ours.
    let mut s = Server::spawn(wt.path(), plugins.path(), &[]);
    let init = s.request(
        "initialize",
        json!({"protocolVersion": "2024-11-05", "capabilities": {},
               "clientInfo": {"name": "old", "version": "0"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert!(s.shutdown().success());
}

#[test]
fn stateless_requests_work_without_initialize_and_get_its_error_codes() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let mut s = Server::spawn(wt.path(), plugins.path(), &["--page-size", "1"]);
    // A request without the required _meta is malformed: -32602.
    let bare = s.request("tools/list", json!({}));
    assert_eq!(error_code(&bare), -32602, "{bare}");
    let half = s.request(
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": V2026}}),
    );
    assert_eq!(error_code(&half), -32602, "{half}");
    assert!(
        half["error"]["message"]
            .as_str()
            .unwrap()
            .contains("clientCapabilities"),
        "{half}"
    );
    // An unknown version: -32022 naming what we support.
    let mut future = meta();
    future["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = s.request("tools/list", json!({"_meta": future}));
    assert_eq!(error_code(&r), -32022, "{r}");
    assert!(r.to_string().contains(V2026), "{r}");

    // Pagination and calls, each request standing alone.
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut p = json!({});
        if let Some(c) = &cursor {
            p["cursor"] = json!(c);
        }
        let page = s.request("tools/list", with_meta(p));
        let res = &page["result"];
        assert_eq!(res["resultType"], "complete", "{page}");
        assert_eq!(
            res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "wasm-mcp"
        );
        for t in res["tools"].as_array().unwrap() {
            names.push(t["name"].as_str().unwrap().to_string());
        }
        match res["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.into()),
            None => break,
        }
    }
    assert_eq!(names, ["list_dir", "read_file", "search", "write_file"]);
    let call = s.request(
        "tools/call",
        with_meta(json!({"name": "read_file", "arguments": {"path": "hello.txt"}})),
    );
    assert_eq!(
        call["result"]["structuredContent"]["content"], "hello\n",
        "{call}"
    );
    assert_eq!(call["result"]["resultType"], "complete", "{call}");
    let named = "io.modelcontextprotocol/serverInfo";
    assert_eq!(call["result"]["_meta"][named]["name"], "wasm-mcp", "{call}");
    // A tool error is a result with isError, not a protocol error.
    let missing = s.request(
        "tools/call",
        with_meta(json!({"name": "read_file", "arguments": {"path": "nope.txt"}})),
    );
    assert!(is_error(&missing["result"]), "{missing}");
    // An unknown tool is invalid params; ping is gone in 2026-07-28.
    let unknown = s.request(
        "tools/call",
        with_meta(json!({"name": "nope", "arguments": {}})),
    );
    assert_eq!(error_code(&unknown), -32602, "{unknown}");
    let ping = s.request("ping", with_meta(json!({})));
    assert_eq!(error_code(&ping), -32601, "{ping}");
    assert!(s.shutdown().success());
}

#[test]
fn malformed_params_are_invalid_params_naming_the_problem() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    for rev in [Revision::Handshake, Revision::Stateless] {
        let (mut s, _log) = rev.start(wt.path(), plugins.path(), &[]);
        let cases = [
            ("tools/call", json!({"arguments": {}}), "`name` is missing"),
            (
                "tools/call",
                json!({"name": 7}),
                "`name` must be a string, got a number",
            ),
            (
                "tools/call",
                json!({"name": "read_file", "arguments": "{\"path\":\"x\"}"}),
                "`arguments` must be an object, got a string",
            ),
        ];
        for (method, params, says) in cases {
            let r = s.request(method, rev.params(params.clone()));
            assert_eq!(error_code(&r), -32602, "{rev:?} {method} {params}: {r}");
            let message = r["error"]["message"].as_str().unwrap();
            assert!(
                message.contains(says),
                "{rev:?} {method} {params}: {message}"
            );
        }
        // Methods we do not serve stay -32601, whatever their params.
        let r = s.request("prompts/get", rev.params(json!({"name": 1})));
        assert_eq!(error_code(&r), -32601, "{rev:?}: {r}");
        // Still serving.
        let ok = s.request(
            "tools/call",
            rev.params(json!({"name": "read_file", "arguments": {"path": "hello.txt"}})),
        );
        assert!(ok.get("result").is_some(), "{rev:?}: {ok}");
        assert!(s.shutdown().success());
    }
}

/// Subscription ids of the `list_changed` notifications received within
/// `wait` (the test reads all messages meanwhile).
fn list_changed_ids(s: &mut Server, wait: Duration) -> Vec<Value> {
    let deadline = Instant::now() + wait;
    let mut ids = Vec::new();
    while let Some(n) = s.wait_notification(
        "notifications/tools/list_changed",
        deadline.saturating_duration_since(Instant::now()),
    ) {
        ids.push(n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone());
    }
    ids.sort_by_key(|v| v.to_string());
    ids
}

/// When its input closes, the server ends its open listen streams with
/// their final result (2026-07-28 graceful closure) and exits at once: it
/// left them to rmcp's 5 s drain timeout, which the Inspector and the
/// Python SDK 2.x, both leaving a listen open, met at every exit (a
/// helper's find; the spec: servers SHOULD exit promptly when their
/// standard input is closed).
#[test]
fn a_closed_input_ends_open_listen_streams_and_the_server_at_once() {
    let wt = worktree();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    let mut s = Server::spawn(wt.path(), dir.path(), &[]);
    let listen = json!({"notifications": {"toolsListChanged": true}});
    let id = s.send_request("subscriptions/listen", with_meta(listen));
    let ack = s.wait_notification(
        "notifications/subscriptions/acknowledged",
        Duration::from_secs(30),
    );
    assert!(ack.is_some(), "listen acknowledged");
    let closed = Instant::now();
    s.close_input();
    let done = s.wait_response(id, Duration::from_secs(10));
    let done = done.expect("the listen stream's final result");
    assert!(done.get("result").is_some(), "{done}");
    assert!(s.shutdown().success());
    let took = closed.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "exited {took:?} after its input closed"
    );
}

#[test]
fn every_listen_stream_hears_of_hot_reload_until_it_is_cancelled() {
    let wt = worktree();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut s, _log) = Server::spawn_logged(wt.path(), dir.path(), &["--watch-ms", "100"]);
    let listen = json!({"notifications": {"toolsListChanged": true}});
    let first = s.send_request("subscriptions/listen", with_meta(listen.clone()));
    let second = s.send_request("subscriptions/listen", with_meta(listen));
    for id in [first, second] {
        let ack = s
            .wait_notification(
                "notifications/subscriptions/acknowledged",
                Duration::from_secs(30),
            )
            .expect("listen acknowledged");
        assert_eq!(
            ack["params"]["notifications"],
            json!({"toolsListChanged": true}),
            "{ack} ({id})"
        );
    }

    std::fs::copy(
        plugin("test-plugins/hostile.wasm"),
        dir.path().join("hostile.wasm"),
    )
    .unwrap();
    let ids = list_changed_ids(&mut s, Duration::from_secs(5));
    assert_eq!(
        ids,
        vec![json!(first), json!(second)],
        "one notification per stream"
    );
    let tools = s.request("tools/list", with_meta(json!({})));
    assert!(tools.to_string().contains("\"spin\""), "{tools}");

    // Cancelling a stream ends it (no response is sent for it); the other
    // keeps hearing.
    // The cancel ends the stream a moment after it arrives: plugin changes
    // until one reaches the second stream alone (the first change, unless
    // the machine is slow), then never the first again.
    s.notify("notifications/cancelled", json!({"requestId": first}));
    let hostile = dir.path().join("hostile.wasm");
    let change = || {
        std::thread::sleep(Duration::from_millis(300));
        if hostile.exists() {
            std::fs::remove_file(&hostile).unwrap();
        } else {
            std::fs::copy(plugin("test-plugins/hostile.wasm"), &hostile).unwrap();
        }
    };
    for changes in 1.. {
        change();
        let ids = list_changed_ids(&mut s, Duration::from_secs(5));
        if ids == vec![json!(second)] {
            break;
        }
        assert_eq!(ids, vec![json!(first), json!(second)], "change {changes}");
        assert!(changes < 5, "the cancelled stream still hears");
    }
    change();
    let ids = list_changed_ids(&mut s, Duration::from_secs(5));
    assert_eq!(ids, vec![json!(second)], "the cancelled stream heard again");
    assert!(s.wait_response(first, Duration::from_millis(200)).is_none());
    assert!(s.shutdown().success());
}

/// A session that repeats `notifications/initialized` is still registered
/// once: 60,000 repeats registered it 60,000 times, each change was sent
/// to it as often, one after another, and with its stream unread the
/// watcher waited on it and hot reload stopped for every client (a
/// helper's find).
#[test]
fn a_repeated_initialized_registers_the_session_once() {
    let wt = worktree();
    let dir = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut s, _) = Server::start(wt.path(), dir.path(), &["--watch-ms", "100"]);
    for _ in 0..500 {
        s.notify("notifications/initialized", json!({}));
    }
    s.request("ping", json!({}));
    std::fs::copy(
        plugin("test-plugins/hostile.wasm"),
        dir.path().join("hostile.wasm"),
    )
    .unwrap();
    let heard = list_changed_ids(&mut s, Duration::from_secs(5));
    assert_eq!(
        heard.len(),
        1,
        "one list_changed per change, heard {}",
        heard.len()
    );
    assert!(s.shutdown().success());
}

/// A call that computes without end runs on the connection's thread when
/// it is alone, yielding at every epoch tick; the connection is read
/// between its slices, so a `ping` is answered in a few milliseconds, not
/// after the runtime's 61st tick (~270 ms: wasmtime's plain wake put the
/// guest straight back in the queue, ahead of the runtime's I/O).
#[test]
fn a_spinning_call_does_not_hold_up_the_connection() {
    let wt = worktree();
    let dir = plugin_dir(&["test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), dir.path(), &["--timeout-ms", "8000"]);
    s.send_raw(
        &json!({"jsonrpc": "2.0", "id": 900, "method": "tools/call",
            "params": {"name": "spin", "arguments": {}}})
        .to_string(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut waits: Vec<Duration> = (0..9)
        .map(|_| {
            let t = Instant::now();
            s.request("ping", json!({}));
            std::thread::sleep(Duration::from_millis(20));
            t.elapsed()
        })
        .collect();
    waits.sort();
    // Bug: ~270 ms each; fixed: ~25 ms (the 20 ms sleep included).
    assert!(
        waits[4] < Duration::from_millis(150),
        "median ping {:?}",
        waits[4]
    );
    s.notify("notifications/cancelled", json!({"requestId": 900}));
    assert!(s.shutdown().success());
}

/// A call that computes for long moves off the connection's thread to the
/// call pool: inline, it left the connection's I/O only the gaps between
/// its 5 ms slices, and every other call waited for them (`read_file` p50
/// 0.45 → 14 ms while one call spun, with a core idle: a helper's find).
#[test]
fn a_long_call_leaves_the_connection_to_other_calls() {
    let wt = worktree();
    let dir = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), dir.path(), &["--timeout-ms", "15000"]);
    let median_read = |s: &mut Server| {
        let mut took: Vec<Duration> = (0..21)
            .map(|_| {
                let t = Instant::now();
                let r = s.call("read_file", json!({"path": "hello.txt"}));
                assert!(!is_error(&r), "{r}");
                t.elapsed()
            })
            .collect();
        took.sort();
        took[10]
    };
    let quiet = median_read(&mut s);
    s.send_raw(
        &json!({"jsonrpc": "2.0", "id": 900, "method": "tools/call",
            "params": {"name": "spin", "arguments": {}}})
        .to_string(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let spinning = median_read(&mut s);
    eprintln!("read_file median: quiet {quiet:?}, while a call spins {spinning:?}");
    assert!(
        spinning < quiet * 2 + Duration::from_millis(2),
        "quiet {quiet:?}, while a call spins {spinning:?}"
    );
    s.notify("notifications/cancelled", json!({"requestId": 900}));
    assert!(s.shutdown().success());
}

/// A request reusing the id of a call the client has just cancelled is
/// refused (-32600, its id still in flight) and the cancelled call's
/// answer never goes out: both were sent, the cancelled call's result
/// under the id the new request took, and the new request was never
/// answered (rmcp matches cancellations and answers by id; a helper's
/// find). Cancel and reuse arrive in one write.
#[test]
fn an_id_reused_right_after_its_cancel_gets_no_stale_answer() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    for rev in [Revision::Handshake, Revision::Stateless] {
        let (mut s, _log) = rev.start(wt.path(), plugins.path(), &["--timeout-ms", "20000"]);
        let call = |name: &str, args: Value| {
            json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call",
                "params": rev.params(json!({"name": name, "arguments": args}))})
        };
        s.send_raw(&call("spin", json!({})).to_string());
        std::thread::sleep(Duration::from_millis(300));
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 100}});
        let read = call("read_file", json!({"path": "hello.txt"}));
        s.send_raw(&format!("{cancel}\n{read}"));
        let mut answers = Vec::new();
        while let Some(m) = s.next_message(Duration::from_secs(2)) {
            if m["id"] == 100 {
                answers.push(m);
            }
        }
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["error"]["code"], -32600, "{answers:?}");
        // The id is free once the cancelled call is over, and the server serves.
        let r = s.request(
            "tools/call",
            rev.params(json!({"name": "read_file",
            "arguments": {"path": "hello.txt"}})),
        );
        assert!(!is_error(&r["result"]), "{r}");
    }
}

/// A progress token is repeated in every notification of its request's
/// progress: one over 256 bytes is refused, clearly, and the call is not
/// run (40 calls sharing a 1 MiB token, their streams unread, stopped
/// rmcp's session worker for every request of the session: a helper's
/// find). One of 256 bytes is taken.
#[test]
fn a_huge_progress_token_is_refused() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    for rev in [Revision::Handshake, Revision::Stateless] {
        let (mut s, _log) = rev.start(wt.path(), plugins.path(), &[]);
        let call = |token: &str| {
            rev.params(
                json!({"name": "read_file", "arguments": {"path": "hello.txt"},
                "_meta": {"progressToken": token}}),
            )
        };
        let r = s.request("tools/call", call(&"t".repeat(64 << 10)));
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(r["error"]["code"], -32602, "{rev:?}: {r}");
        assert!(
            message.contains("progressToken is 65536 bytes"),
            "{rev:?}: {message}"
        );
        let r = s.request("tools/call", call(&"t".repeat(256)));
        assert!(!is_error(&r["result"]), "{rev:?}: {r}");
        assert!(s.shutdown().success());
    }
}

#[test]
fn a_cancelled_call_stops_its_guest_and_frees_its_slot() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    // One slot, a long deadline: without cancellation the next call would
    // wait half of it (10 s) and come back `busy`.
    let extra = ["--max-concurrency", "1", "--timeout-ms", "20000"];
    // A guest in wasm code (spin) and one blocked in a host call (a WASI sleep).
    let runs = [
        (Revision::Handshake, "spin"),
        (Revision::Stateless, "spin"),
        (Revision::Stateless, "sleep_forever"),
    ];
    for (rev, tool) in runs {
        let (mut s, log) = rev.start(wt.path(), plugins.path(), &extra);
        let spin = s.send_request(
            "tools/call",
            rev.params(
                json!({"name": tool, "arguments": {}, "_meta": {"progressToken": "spin-1"}}),
            ),
        );
        // Progress tells us when the guest is running.
        let mut seen = Vec::new();
        while !seen.iter().any(|m: &String| m.ends_with("running")) {
            let p = s
                .wait_notification("notifications/progress", Duration::from_secs(30))
                .expect("progress of the spinning call");
            assert_eq!(p["params"]["progressToken"], "spin-1", "{p}");
            seen.push(p["params"]["message"].as_str().unwrap().to_string());
        }
        assert_eq!(seen, [format!("{tool}: running")]);
        std::thread::sleep(Duration::from_millis(100));

        let cancelled = Instant::now();
        s.notify(
            "notifications/cancelled",
            json!({"requestId": spin, "reason": "test"}),
        );
        let r = s.request(
            "tools/call",
            rev.params(json!({"name": "read_file", "arguments": {"path": "hello.txt"}})),
        );
        let took = cancelled.elapsed();
        assert!(
            !is_error(&r["result"]),
            "{rev:?}: the slot was not freed: {r}"
        );
        assert!(
            took < Duration::from_secs(5),
            "{rev:?}: next call took {took:?}"
        );
        eprintln!("{rev:?} {tool}: cancel → next call answered in {took:?}");
        // No response (nor a `done` progress) for the cancelled request.
        assert!(
            s.wait_response(spin, Duration::from_millis(300)).is_none(),
            "{rev:?}"
        );
        assert!(
            !s.notifications
                .iter()
                .any(|n| n["params"]["message"] == format!("{tool}: done")),
            "{rev:?}"
        );
        assert!(s.shutdown().success());
        let text = log.read();
        assert!(
            text.contains("call cancelled by the client")
                && text.contains(&format!("tool=\"{tool}\"")),
            "{rev:?}: {text}"
        );
    }
}

#[test]
fn a_call_that_waits_for_a_slot_is_reported_queued_then_running() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(
        wt.path(),
        plugins.path(),
        &[
            "--max-concurrency",
            "1",
            "--timeout-ms",
            "20000",
            "--progress-after-ms",
            "0",
        ],
    );
    // Holds the only slot until it is cancelled: read_file is sent once
    // the slow call is reported running (not after a guessed sleep).
    let slow = s.send_request(
        "tools/call",
        json!({"name": "sleep_forever", "arguments": {},
               "_meta": {"progressToken": "slow"}}),
    );
    wait_progress(&mut s, "slow", "sleep_forever: running");
    let read = s.send_request(
        "tools/call",
        json!({"name": "read_file", "arguments": {"path": "hello.txt"},
               "_meta": {"progressToken": "q"}}),
    );
    wait_progress(&mut s, "q", "read_file: waiting for a call slot");
    s.notify(
        "notifications/cancelled",
        json!({"requestId": slow, "reason": "test"}),
    );
    let r = s
        .wait_response(read, Duration::from_secs(10))
        .expect("read_file runs once the slot is free");
    assert!(!is_error(&r["result"]), "{r}");
    // A call that waited is reported running at once; its response is the
    // last step (no notification of the end).
    s.notifications
        .retain(|n| n["params"]["progressToken"] != "slow");
    assert_eq!(
        progress_steps(&mut s),
        [(json!(2.0), json!("read_file: running"))]
    );
    assert!(s.shutdown().success());
}

/// Waits (10 s at most) for the progress notification of `token` whose
/// message is `message`, and drops the ones of `token` before it.
fn wait_progress(s: &mut Server, token: &str, message: &str) {
    let mine = |n: &Value| {
        n["method"] == "notifications/progress" && n["params"]["progressToken"] == token
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(i) = s.notifications.iter().position(mine) {
            if s.notifications.remove(i)["params"]["message"] == message {
                return;
            }
            continue;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let n = s
            .next_message(left)
            .unwrap_or_else(|| panic!("no progress {message:?} for {token}"));
        s.notifications.push(n);
    }
}

/// The progress notifications in `s.notifications` so far, as
/// (step, message), drained.
fn progress_steps(s: &mut Server) -> Vec<(Value, Value)> {
    s.notifications
        .drain(..)
        .filter(|n| n["method"] == "notifications/progress")
        .map(|n| {
            (
                n["params"]["progress"].clone(),
                n["params"]["message"].clone(),
            )
        })
        .collect()
}

fn with_progress(params: Value, token: Option<&str>) -> Value {
    let mut p = params;
    if let Some(t) = token {
        p["_meta"] = json!({"progressToken": t});
    }
    p
}

/// A call is reported only once it has run `--progress-after-ms` (100 by
/// default; 300 here, so a loaded machine cannot make a read slow): a fast
/// call is answered with no notification, a slow one gets "running"
/// before its response, and no notification of its end.
#[test]
fn progress_reports_a_slow_call_and_leaves_a_fast_one_quiet() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(
        wt.path(),
        plugins.path(),
        &["--progress-after-ms", "300", "--timeout-ms", "1500"],
    );
    let read = json!({"name": "read_file", "arguments": {"path": "hello.txt"}});
    for _ in 0..3 {
        let r = s.request("tools/call", with_progress(read.clone(), Some("fast")));
        assert!(!is_error(&r["result"]), "{r}");
        assert_eq!(progress_steps(&mut s), [], "a fast call sends no progress");
    }
    let slow = json!({"name": "sleep_forever", "arguments": {}});
    let r = s.request("tools/call", with_progress(slow, Some("slow")));
    assert!(is_error(&r["result"]), "{r}");
    // It arrived before the response (`request` keeps what came first),
    // and nothing of the end: the response is the last step.
    assert_eq!(
        progress_steps(&mut s),
        [(json!(2.0), json!("sleep_forever: running"))]
    );
    assert!(s.shutdown().success());
}

/// The largest `--progress-after-ms` only means "never report a start":
/// calls are answered (no overflow of the deadline); a negative or
/// non-numeric value is refused before anything is served.
#[test]
fn progress_after_ms_at_its_extremes() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let max = u64::MAX.to_string();
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--progress-after-ms", &max]);
    let read = json!({"name": "read_file", "arguments": {"path": "hello.txt"}});
    let r = s.request("tools/call", with_progress(read, Some("never")));
    assert!(!is_error(&r["result"]), "{r}");
    assert_eq!(progress_steps(&mut s), []);
    assert!(s.shutdown().success());
    for bad in ["-1", "soon", ""] {
        support::assert_flag_refused(wt.path(), plugins.path(), "--progress-after-ms", bad);
    }
}

/// `--progress-after-ms 0`: every call with a token reports each stage
/// (not queued when admitted at once); no token, no progress.
#[test]
fn progress_reports_each_stage_of_every_call_when_asked_to() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--progress-after-ms", "0"]);
    let read = json!({"name": "read_file", "arguments": {"path": "hello.txt"}});
    let r = s.request("tools/call", with_progress(read.clone(), Some("p")));
    assert!(r.get("result").is_some(), "{r}");
    // A 2025-11-25 result keeps its shape: no 2026-07-28 fields.
    assert!(
        r["result"].get("_meta").is_none() && r["result"].get("resultType").is_none(),
        "{r}"
    );
    assert_eq!(
        progress_steps(&mut s),
        [(json!(2.0), json!("read_file: running"))]
    );
    s.request("tools/call", with_progress(read, None));
    assert_eq!(progress_steps(&mut s), [], "no token, no progress");
    assert!(s.shutdown().success());
}

#[test]
fn open_listen_streams_are_bounded_and_a_cancelled_one_frees_its_place() {
    const MAX: u64 = 1024; // host::subscriptions::MAX_SUBSCRIPTIONS
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let mut s = Server::spawn(wt.path(), plugins.path(), &[]);
    let listen = with_meta(json!({"notifications": {"toolsListChanged": true}}));
    let ids: Vec<u64> = (0..=MAX)
        .map(|_| s.send_request("subscriptions/listen", listen.clone()))
        .collect();
    // Handlers run concurrently: whichever came last is refused.
    let refused = loop {
        let m = s
            .next_message(Duration::from_secs(60))
            .expect("one listen refused");
        if m.get("error").is_some() {
            break m;
        }
    };
    assert_eq!(error_code(&refused), -32600, "{refused}");
    assert!(
        refused.to_string().contains("too many open subscriptions"),
        "{refused}"
    );
    // The others are open: none was answered.
    let open: Vec<u64> = ids
        .iter()
        .copied()
        .filter(|i| json!(i) != refused["id"])
        .collect();
    assert_eq!(open.len() as u64, MAX);
    assert!(s
        .wait_response(open[0], Duration::from_millis(300))
        .is_none());

    // The place is freed a moment after the cancel arrives: a listen sent
    // before that is refused, so one is tried until it is not.
    s.notify("notifications/cancelled", json!({"requestId": open[0]}));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let again = s.send_request("subscriptions/listen", listen.clone());
        match s.wait_response(again, Duration::from_millis(500)) {
            None => break,
            Some(r) => assert!(
                r.to_string().contains("too many open subscriptions") && Instant::now() < deadline,
                "a freed place is never usable: {r}"
            ),
        }
    }
    let call = s.request(
        "tools/call",
        with_meta(json!({"name": "read_file", "arguments": {"path": "hello.txt"}})),
    );
    assert!(call.get("result").is_some(), "{call}");
    assert!(s.shutdown().success());
}

/// The answer to `id`, whether it came before other answers or after.
fn answer(s: &mut Server, id: u64, within: Duration) -> Value {
    let is_it = |m: &Value| m["id"] == json!(id) && m.get("method").is_none();
    if let Some(i) = s.notifications.iter().position(is_it) {
        return s.notifications.remove(i);
    }
    s.wait_response(id, within)
        .unwrap_or_else(|| panic!("no answer to {id} within {within:?}"))
}

fn call_frame(id: u64, tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args}})
    .to_string()
}

/// A client that sends its requests and closes its end (`wasm-mcp serve <
/// requests.jsonl`) gets every answer: the server answers what it has read
/// before it exits. rmcp's own drain gave up after 5 s and cancelled the
/// rest, so a 6.5 s call within its deadline lost its answer.
#[test]
fn the_end_of_input_waits_for_every_answer() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--timeout-ms", "20000"]);
    s.send_raw(&call_frame(
        901,
        "hold_files",
        json!({"count": 0, "hold_ms": 6500}),
    ));
    s.send_raw(&call_frame(902, "read_file", json!({"path": "hello.txt"})));
    s.close_input();
    let slow = answer(&mut s, 901, Duration::from_secs(30));
    assert!(!is_error(&slow["result"]), "{slow}");
    let fast = answer(&mut s, 902, Duration::from_secs(5));
    assert_eq!(
        fast["result"]["structuredContent"]["content"], "hello\n",
        "{fast}"
    );
    let status = s
        .exit_within(Duration::from_secs(10))
        .expect("exits once answered");
    assert!(status.success(), "{status}");
}

/// A client at the bound of requests in flight (64 unanswered) can still
/// cancel one: the cancel is read, and the request after it is answered
/// at once. Reading used to stop at the bound, so the cancel was not read
/// until some call ended on its own (here: a minute, when the calls
/// queued for a slot are answered `busy`).
#[test]
fn a_client_at_the_bound_of_requests_in_flight_can_cancel() {
    let wt = worktree();
    let plugins = plugin_dir(&["test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--timeout-ms", "120000"]);
    for id in 1..=64 {
        s.send_raw(&call_frame(id, "sleep_forever", json!({})));
    }
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "no longer needed"}});
    s.send_raw(&cancel.to_string());
    s.send_raw(&json!({"jsonrpc": "2.0", "id": 1000, "method": "ping"}).to_string());
    let pong = answer(&mut s, 1000, Duration::from_secs(20));
    assert_eq!(pong["result"], json!({}), "{pong}");
    let cancel = |s: &mut Server, id: u64| {
        s.send_raw(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id}})
            .to_string(),
        );
    };
    let ping = |s: &mut Server, id: u64| {
        s.send_raw(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string());
    };
    // At the bound again, a request waits for a place, and a cancel sent
    // after it still gets through.
    s.send_raw(&call_frame(1001, "sleep_forever", json!({})));
    ping(&mut s, 1002);
    assert!(
        s.next_message(Duration::from_secs(2)).is_none(),
        "answered at the bound"
    );
    cancel(&mut s, 2);
    let pong = answer(&mut s, 1002, Duration::from_secs(20));
    assert_eq!(pong["result"], json!({}), "{pong}");
    // A request cancelled while it waits never runs, and is not answered.
    s.send_raw(&call_frame(1003, "sleep_forever", json!({})));
    ping(&mut s, 1004);
    cancel(&mut s, 1004);
    cancel(&mut s, 3);
    ping(&mut s, 1005);
    let pong = answer(&mut s, 1005, Duration::from_secs(20));
    assert_eq!(pong["result"], json!({}), "{pong}");
    std::thread::sleep(Duration::from_millis(500));
    while let Some(m) = s.next_message(Duration::from_millis(200)) {
        s.notifications.push(m);
    }
    let answered: Vec<&Value> = s
        .notifications
        .iter()
        .filter(|m| m.get("id").is_some())
        .collect();
    assert!(answered.is_empty(), "{answered:?}");
}

/// Requests held at the bound when the input ends are still run and
/// answered, each within its own deadline: the wait for answers at the
/// end of input was fixed when the end was read, and cut the held calls,
/// which start only when a place frees (a helper's find).
#[test]
fn requests_held_at_the_bound_are_answered_after_the_input_ends() {
    let wt = worktree();
    let plugins = plugin_dir(&["test-plugins/hostile.wasm"]);
    // Held calls start at 12 s and end at 24 s: past the end's own wait
    // (12 + 5 s from the end of input) and rmcp's 5 s drain after it.
    let args = [
        "--timeout-ms",
        "12000",
        "--max-concurrency",
        "64",
        "--max-concurrency-per-plugin",
        "64",
    ];
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &args);
    for id in 1..=67 {
        s.send_raw(&call_frame(id, "sleep_forever", json!({})));
    }
    s.close_input();
    for id in 1..=67 {
        let a = answer(&mut s, id, Duration::from_secs(60));
        assert_eq!(a["result"]["isError"], true, "{a}");
    }
    let status = s
        .exit_within(Duration::from_secs(20))
        .expect("exits once answered");
    assert!(status.success(), "{status}");
}

/// A client writing tiny notifications as fast as the pipe takes them
/// cannot grow the server's memory: rmcp spawns a task for each, and the
/// reader handed them over faster than those tasks ran (1 million 31-byte
/// lines held 1.26 GB; a helper's find). The server yields to each
/// notification's task before it reads on.
#[test]
fn a_burst_of_notifications_does_not_grow_the_server() {
    let line = "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n";
    let mut burst = line.repeat(524_288);
    burst.push_str("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n");
    let (answered, peak) = peak_rss_during(burst.into_bytes(), 1, "\"id\":7", &[]);
    assert_eq!(answered, 1, "the ping after the burst was answered");
    assert!(
        peak < 200 << 20,
        "RSS {} MiB during 524,288 notifications",
        peak >> 20
    );
}

/// Requests held at the bound are not run once the client has closed its
/// end of stdout: nobody could read their answers (they ran, writes
/// included, when a place freed; a helper's find).
#[test]
fn held_requests_do_not_run_once_stdout_is_closed() {
    use std::io::Write;
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let args = [
        "--timeout-ms",
        "3000",
        "--max-concurrency",
        "64",
        "--max-concurrency-per-plugin",
        "64",
    ];
    let (mut child, mut stdin) = spawn_initialized_with(wt.path(), plugins.path(), &args);
    for id in 1..=64 {
        writeln!(stdin, "{}", call_frame(id, "sleep_forever", json!({}))).unwrap();
    }
    for (id, path) in [(65, "h1.txt"), (66, "h2.txt")] {
        let write = json!({"path": path, "content": "x"});
        writeln!(stdin, "{}", call_frame(id, "write_file", write)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1000));
    drop(child.stdout.take());
    // The 64 calls end at their 3 s deadline; their answers find no reader.
    std::thread::sleep(Duration::from_millis(5000));
    let _ = child.kill();
    let _ = child.wait();
    for held in ["h1.txt", "h2.txt"] {
        assert!(!wt.path().join(held).exists(), "{held} was written");
    }
}

/// `subscriptions/listen` requests, which the bound of 64 unanswered
/// requests does not count (a listen stream stays open by design), cannot
/// grow the server either: each one's handling runs before the next line
/// is read, and past as many as may be open they count like any request
/// (50,000 refused at once held 1 GB before they were answered; a
/// helper's find).
#[test]
fn a_burst_of_listen_requests_does_not_grow_the_server() {
    const LISTENS: usize = 20_000;
    let burst: String = (1..=LISTENS)
        .map(|id| {
            let listen = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
                "params": {"notifications": {}}});
            format!("{listen}\n")
        })
        .collect();
    let (answered, peak) = peak_rss_during(burst.into_bytes(), LISTENS, "\"id\":", &[]);
    assert_eq!(answered, LISTENS, "every listen request is answered");
    assert!(
        peak < 200 << 20,
        "RSS {} MiB during {LISTENS} listen requests",
        peak >> 20
    );
}

/// Calls each cancelled right after it is sent, as fast as the pipe takes
/// them: a call cancelled before it began never starts, so the server
/// neither grows nor spends minutes of CPU on them (100,000 pairs of a
/// computing tool held 2.7 GB and both cores for 4 minutes; a helper's
/// find), and a call after them is answered at once.
#[test]
fn calls_cancelled_at_once_cost_nothing() {
    const PAIRS: u64 = 20_000;
    let mut burst = String::new();
    for id in 1..=PAIRS {
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id}});
        burst.push_str(&format!(
            "{}\n{cancel}\n",
            call_frame(id, "spin", json!({}))
        ));
    }
    let last = call_frame(PAIRS + 1, "read_file", json!({"path": "hello.txt"}));
    burst.push_str(&format!("{last}\n"));
    let plugins = ["test-plugins/hostile.wasm"];
    let after = format!("\"id\":{}", PAIRS + 1);
    let (answered, peak) = peak_rss_during(burst.into_bytes(), 1, &after, &plugins);
    assert_eq!(
        answered, 1,
        "the call after the cancelled ones was answered"
    );
    assert!(
        peak < 250 << 20,
        "RSS {} MiB during {PAIRS} cancelled calls",
        peak >> 20
    );
}

/// Writes `burst` to a server (the workspace plugin and `plugins`) as fast
/// as its stdin takes it, reads its answers, and samples its RSS until
/// `answers` lines holding `marker` (the handshake's aside) came or 120 s
/// passed. Returns those counted and the peak RSS.
fn peak_rss_during(burst: Vec<u8>, answers: usize, marker: &str, plugins: &[&str]) -> (usize, u64) {
    use std::io::{BufRead, BufReader, Write};
    let wt = worktree();
    let mut all = vec!["plugins/workspace.wasm"];
    all.extend(plugins);
    let plugins = plugin_dir(&all);
    let (mut child, mut stdin) = spawn_initialized(wt.path(), plugins.path());
    let pid = child.id();
    let writer = std::thread::spawn(move || {
        stdin.write_all(&burst).unwrap();
        stdin
    });
    let out = BufReader::new(child.stdout.take().unwrap());
    let marker = marker.to_string();
    let counts = move |l: &String| l.contains(&marker) && !l.contains("\"id\":0,");
    let reader = std::thread::spawn(move || {
        out.lines()
            .map_while(Result::ok)
            .filter(counts)
            .take(answers)
            .count()
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut peak = 0;
    while !reader.is_finished() && Instant::now() < deadline {
        peak = peak.max(rss_bytes(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    drop(writer.join().unwrap());
    (reader.join().unwrap(), peak)
}

/// JSON-RPC ids must be unique among requests in flight: a second request
/// with the id of one still running is refused, not run (both ran and one
/// answer was lost, so the client never learnt of one write).
#[test]
fn a_request_reusing_an_id_in_flight_is_refused_not_run() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &[]);
    s.send_raw(&call_frame(
        7,
        "hold_files",
        json!({"count": 0, "hold_ms": 1500}),
    ));
    let second = json!({"path": "second.txt", "content": "x"});
    s.send_raw(&call_frame(7, "write_file", second));
    let mut answers = Vec::new();
    while answers.len() < 2 {
        let m = s
            .next_message(Duration::from_secs(20))
            .expect("two answers to id 7");
        if m["id"] == json!(7) {
            answers.push(m);
        }
    }
    let refused = &answers[0];
    assert_eq!(error_code(refused), -32600, "{refused}");
    assert!(refused.to_string().contains("already in use"), "{refused}");
    assert!(
        !is_error(&answers[1]["result"]),
        "the first request ran: {}",
        answers[1]
    );
    assert!(
        !wt.path().join("second.txt").exists(),
        "the refused request ran"
    );
    // Once answered, the id may be used again.
    s.send_raw(&call_frame(
        7,
        "write_file",
        json!({"path": "third.txt", "content": "x"}),
    ));
    let again = answer(&mut s, 7, Duration::from_secs(20));
    assert!(!is_error(&again["result"]), "{again}");
    assert!(wt.path().join("third.txt").exists());
}

/// Resident memory of `pid` in bytes (`VmRSS`).
fn rss_bytes(pid: u32) -> u64 {
    proc_memory_bytes(pid, "VmRSS")
}

/// A client that pipelines 1,000 reads of a 512 KiB file and does not read
/// the answers makes itself wait: the server reads no more than 64
/// unanswered requests, so its memory stays near one frame per request
/// read. Without the bound it read them all, and the answers its stdout
/// could not take (~1 MB each) piled up past a gigabyte.
/// A server whose stdin and stdout are the test's, the initialize
/// handshake written (its answer left unread).
fn spawn_initialized(
    wt: &std::path::Path,
    plugins: &std::path::Path,
) -> (std::process::Child, std::process::ChildStdin) {
    spawn_initialized_with(wt, plugins, &[])
}

/// [`spawn_initialized`] with `extra` arguments to `serve`.
fn spawn_initialized_with(
    wt: &std::path::Path,
    plugins: &std::path::Path,
    extra: &[&str],
) -> (std::process::Child, std::process::ChildStdin) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(support::server_bin())
        .args(["serve", "--worktree"])
        .arg(wt)
        .arg("--plugins")
        .arg(plugins)
        .arg("--cache-dir")
        .arg(support::cache_dir())
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    writeln!(stdin, "{init}").unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    (child, stdin)
}

/// A client that closes its end of stdout ends the session: nothing it
/// asks could be answered, yet the server ran its calls, writes included,
/// logging a broken pipe for each (a helper's find).
#[test]
fn a_closed_stdout_ends_the_session() {
    use std::io::Write;
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut child, mut stdin) = spawn_initialized(wt.path(), plugins.path());
    // The handshake answered, then the client's end of stdout closed.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut answer = String::new();
    std::io::BufRead::read_line(&mut out, &mut answer).unwrap();
    assert!(answer.contains("protocolVersion"), "{answer}");
    drop(out);
    let write =
        |id: u64, path: &str| call_frame(id, "write_file", json!({"path": path, "content": "x"}));
    writeln!(stdin, "{}", write(1, "first.txt")).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let _ = writeln!(stdin, "{}", write(2, "second.txt"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.is_some(), "still running with its stdout closed");
    assert!(!wt.path().join("second.txt").exists(), "a call ran unseen");
}

/// Refusals wait for stdout as answers do: lines that are not requests but
/// carry a 1 MiB id are each answered with that id, and with stdout unread
/// those answers piled up in memory (800 lines: 889 MB) while the server
/// read on (a helper's find). Now the next line is read once the refusal
/// is written.
#[test]
fn refusals_of_a_client_that_does_not_read_make_it_wait() {
    use std::io::{BufRead, BufReader, Write};
    const LINES: usize = 400;
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut child, mut stdin) = spawn_initialized(wt.path(), plugins.path());
    let writer = std::thread::spawn(move || {
        for i in 0..LINES {
            let id = format!("{i:08}{}", "x".repeat(1 << 20));
            writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": id})).unwrap();
        }
        stdin
    });
    std::thread::sleep(Duration::from_secs(6));
    let rss = rss_bytes(child.id());
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut refused = 0;
    for line in out.lines() {
        let m: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if m["id"].as_str().is_some_and(|id| id.len() > 1 << 20) {
            assert_eq!(error_code(&m), -32600);
            refused += 1;
        }
        if refused == LINES {
            break;
        }
    }
    drop(writer.join().unwrap());
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        rss < 200 << 20,
        "RSS {} MiB while its answers were unread",
        rss >> 20
    );
}

#[test]
fn a_client_that_pipelines_and_does_not_read_makes_itself_wait() {
    use std::io::{BufRead, BufReader, Write};
    const CALLS: u64 = 1000;
    let wt = worktree();
    let line = format!("{}\n", "a".repeat(1023));
    std::fs::write(wt.path().join("half.txt"), line.repeat(512)).unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut child, mut stdin) = spawn_initialized(wt.path(), plugins.path());
    let writer = std::thread::spawn(move || {
        for id in 1..=CALLS {
            let args = json!({"path": "half.txt", "line_limit": 1000});
            writeln!(stdin, "{}", call_frame(id, "read_file", args)).unwrap();
        }
        stdin
    });
    // Nothing read: the server answers until its stdout is full, then waits.
    std::thread::sleep(Duration::from_secs(4));
    let rss = rss_bytes(child.id());
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut answered = std::collections::BTreeSet::new();
    for line in out.lines() {
        let m: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let id = m["id"].as_u64().unwrap();
        if id > 0 {
            assert_eq!(
                m["result"]["structuredContent"]["size_bytes"], 524288,
                "{id}"
            );
            assert!(answered.insert(id), "answered twice: {id}");
        }
        if answered.len() as u64 == CALLS {
            break;
        }
    }
    drop(writer.join().unwrap());
    let _ = child.wait();
    assert_eq!(answered.len() as u64, CALLS);
    assert!(
        rss < 400 << 20,
        "server RSS {} MiB while its answers went unread",
        rss >> 20
    );
}

/// Lines the server cannot take as messages: each one whose request id can
/// be read is answered by that id (the client would otherwise wait for it
/// forever), with -32700 for what is not readable JSON and -32600 for JSON
/// that is no message, a line over 16 MiB or over 100,000 JSON values (a
/// million empty objects parse to ~90× their size); garbage with no id is dropped
/// (as rmcp and the official SDKs do), and the server keeps serving.
#[test]
fn unreadable_requests_are_answered_by_their_id() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &[]);
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":33,"method":"ping","params":{{"x":{}{}}}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let frames: Vec<(u64, Vec<u8>, i64)> = vec![
        (31, b"{\"jsonrpc\":\"2.0\",\"id\":31,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"\xff\"}}}".to_vec(), -32700),
        (32, br#"{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"\ud800"}}}"#.to_vec(), -32700),
        (33, deep.into_bytes(), -32700),
        (34, br#"{"jsonrpc":"2.0","id":34,"method":"ping"}{"jsonrpc":"2.0","id":35,"method":"ping"}"#.to_vec(), -32700),
        (36, br#"{"jsonrpc":"2.0","id":36}"#.to_vec(), -32600),
        (37, [&br#"{"jsonrpc":"2.0","id":37,"method":"ping","params":{"x":""#[..], &vec![b'a'; 17 << 20], b"\"}}"].concat(), -32600),
        (38, format!(r#"{{"jsonrpc":"2.0","id":38,"method":"ping","params":{{"x":[{}0]}}}}"#, "{},".repeat(1 << 20)).into_bytes(), -32600),
    ];
    for (_, frame, _) in &frames {
        s.send_bytes(frame);
        s.send_bytes(b"garbage with no id\n");
    }
    for (id, _, code) in &frames {
        let r = answer(&mut s, *id, Duration::from_secs(20));
        assert_eq!(error_code(&r), *code, "{r}");
    }
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    assert!(s.alive());
}

/// A client's strings reach the server's log only cut: rmcp's warning for
/// an unknown method names it whole, and every error answer's warning its
/// request id (one client's 4 MB strings wrote ~200 MB/s of log).
#[test]
fn a_client_s_long_strings_reach_the_log_cut() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut s, log) = Server::spawn_logged(wt.path(), plugins.path(), &[]);
    let long = "m".repeat(1 << 20);
    s.send_raw(
        &json!({"jsonrpc": "2.0", "id": 900, "method": long, "params": with_meta(json!({}))})
            .to_string(),
    );
    let unknown = s
        .wait_response(900, Duration::from_secs(30))
        .expect("answered");
    assert_eq!(error_code(&unknown), -32601, "{unknown}");
    let long_id = "i".repeat(1 << 20);
    let call = json!({"name": "no_such_tool", "arguments": {}});
    s.send_raw(&json!({"jsonrpc": "2.0", "id": long_id, "method": "tools/call", "params": with_meta(call)}).to_string());
    let answered = s.next_message(Duration::from_secs(30)).expect("answered");
    assert_eq!(answered["id"].as_str().map(str::len), Some(1 << 20));
    s.close_input();
    s.exit_within(Duration::from_secs(10))
        .expect("exits at EOF");
    let text = log.read();
    assert!(text.len() < 64 * 1024, "log of {} bytes", text.len());
    assert!(text.contains("bytes of this log line left out]"), "{text}");
}

/// rmcp's lines that name what a client did are written the first time
/// and at each power of two: requests naming a 4,100-byte unknown method,
/// each answered -32601, wrote a 4 KiB warning each, 22 MB/s of log at the
/// client's own rate (a helper's find). 300 of them write at most 10.
#[test]
fn a_client_cannot_write_the_log_at_its_own_rate() {
    let wt = worktree();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut s, log) = Server::spawn_logged(wt.path(), plugins.path(), &[]);
    let method = "x".repeat(4100);
    for id in 0..300 {
        s.send_raw(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": with_meta(json!({}))})
                .to_string(),
        );
        let answer = s
            .wait_response(id, Duration::from_secs(30))
            .expect("answered");
        assert_eq!(error_code(&answer), -32601, "{answer}");
    }
    s.close_input();
    s.exit_within(Duration::from_secs(10))
        .expect("exits at EOF");
    let text = log.read();
    let lines = text.lines().filter(|l| l.contains("xxxxxxxx")).count();
    assert!((1..=10).contains(&lines), "{lines} lines naming the method");
}
