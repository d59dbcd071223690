//! A task server killed in the middle of a non-idempotent call: the harness
//! must report the call's state as `unknown`, must not re-send it, must
//! reconnect (a new server process) at the next safe point and carry on.
//! The side effect happened exactly once.

use std::path::Path;
use std::time::{Duration, Instant};

use wasm_mcp_harness::{run_task, ProviderChoice, RunOptions};

mod support;
use support::{plugin_dir, sample_repo, write_policy};

/// Pids of `wasm-mcp serve` processes whose command line mentions `needle`.
fn servers_mentioning(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains("wasm-mcp") && cmd.contains(" serve ") && cmd.contains(needle) {
            pids.push(pid);
        }
    }
    pids
}

const TASK: &str = r#"
id = "killed"
base_ref = "HEAD"
prompt = "append a line, then read the file back"
max_rounds = 8

[scripted]
final_message = "log has {{check.total_lines}} line(s)"

[[scripted.steps]]
id = "append"
tool = "append_then_spin"
args = { path = "/log.txt", line = "written once" }
expect_error = true

[[scripted.steps]]
id = "check"
tool = "read_file"
args = { path = "log.txt" }
expect_contains = "written once"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_leaves_state_unknown_and_nothing_written_twice() {
    let repo = sample_repo();
    let scratch = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let policy = write_policy(
        scratch.path(),
        plugins.path(),
        &["--timeout-ms", "120000"],
        &["append_then_spin", "read_file"],
        &["read_file"],
        120_000,
    );
    let task = scratch.path().join("task.toml");
    std::fs::write(&task, TASK).unwrap();
    let worktrees = scratch.path().join("wt");

    // The killer: wait until the first server has done the append (the call
    // is now spinning), then SIGKILL that server process.
    let needle = worktrees.display().to_string();
    let killer = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            let pids = servers_mentioning(&needle);
            // The guest creates the file before it writes the line: the
            // append has happened once the line is there.
            let written = std::fs::read_dir(&needle)
                .ok()
                .and_then(|mut d| d.next())
                .and_then(|e| e.ok())
                .and_then(|e| std::fs::read_to_string(e.path().join("log.txt")).ok())
                .is_some_and(|log| log.ends_with('\n'));
            if written && pids.len() == 1 {
                let st = std::process::Command::new("kill")
                    .arg("-9")
                    .arg(pids[0].to_string())
                    .status()
                    .unwrap();
                assert!(st.success());
                return pids[0];
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the append never happened");
    });

    let report = run_task(
        &policy,
        &task,
        RunOptions {
            provider: ProviderChoice::Scripted,
            repo: Some(repo.path().to_path_buf()),
            out_dir: Some(scratch.path().join("runs")),
            worktrees_root: Some(worktrees.clone()),
            keep_worktree: true,
            ..RunOptions::default()
        },
    )
    .await
    .expect("run_task");
    let killed = killer.join().unwrap();
    assert!(report.ok(), "run failed: {:?}", report.error);
    let result = report.result.as_ref().unwrap();
    assert_eq!(result.unknown_state_calls, 1, "{result:?}");
    assert_eq!(result.final_message, "log has 1 line(s)");

    let trace = std::fs::read_to_string(&report.trace_path).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let append = events
        .iter()
        .find(|e| e["kind"] == "tool_call" && e["origin"]["remote_name"] == "append_then_spin")
        .unwrap();
    assert_eq!(append["state"], "unknown", "{append}");
    assert_eq!(
        append["attempts"], 1,
        "a non-idempotent call was re-sent: {append}"
    );
    assert!(
        events.iter().any(|e| e["kind"] == "server_lost"),
        "no server_lost in trace"
    );
    assert!(
        events.iter().any(|e| e["kind"] == "server_reconnected"),
        "no reconnect in trace"
    );

    // Exactly one line on disk; the killed process is gone (reaped).
    assert_eq!(
        std::fs::read_to_string(report.worktree.join("log.txt")).unwrap(),
        "written once\n"
    );
    assert!(
        !Path::new(&format!("/proc/{killed}")).exists(),
        "killed server {killed} was not reaped"
    );
}
