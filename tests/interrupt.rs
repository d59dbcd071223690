//! Ctrl-C on the real `wasm-agent` binary while a tool call hangs (the
//! hostile plugin's `spin`): the call is cancelled (`notifications/cancelled`),
//! the run shuts down in order, the work done so far is committed on
//! `agent/<run-id>`, the worktree is removed, and the exit status is 130.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{agent_bin, git, plugin_dir, sample_repo, write_policy};

const TASK: &str = r#"
id = "interrupted"
prompt = "write notes, then hang"
[scripted]
final_message = "never reached"
[[scripted.steps]]
tool = "write_file"
args = { path = "NOTES.md", content = "written before Ctrl-C\n" }
[[scripted.steps]]
tool = "spin"
args = {}
"#;

#[test]
fn ctrl_c_during_a_hanging_call_keeps_the_work_and_exits_130() {
    let repo = sample_repo();
    let scratch = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm", "test-plugins/hostile.wasm"]);
    let policy = write_policy(
        scratch.path(),
        plugins.path(),
        &["--timeout-ms", "120000"],
        &["write_file", "spin"],
        &[],
        120_000,
    );
    let task = scratch.path().join("task.toml");
    std::fs::write(&task, TASK).unwrap();
    let runs = scratch.path().join("runs");
    let mut child = Command::new(agent_bin())
        .args(["run-task", "--provider", "scripted", "--policy"])
        .arg(&policy)
        .arg("--task")
        .arg(&task)
        .arg("--out-dir")
        .arg(&runs)
        .current_dir(repo.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // Wait for the progress line that says the hanging call was sent.
    let mut log = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("spin call never started:\n{}", log.join("\n")));
        log.push(line.clone());
        if line.contains("→ ws.spin") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let kill = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    // Ends near the cancel, not when the 120 s tool timeout fires.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    log.extend(rx.try_iter());
    let log = log.join("\n");
    assert_eq!(status.code(), Some(130), "{log}");
    assert!(log.contains("interrupted"), "{log}");

    // The work before Ctrl-C is one commit on the kept branch.
    let branches = git(
        repo.path(),
        &["branch", "--list", "agent/*", "--format=%(refname:short)"],
    );
    let branch = branches.trim();
    assert!(
        branch.starts_with("agent/interrupted-"),
        "{branches}\n{log}"
    );
    let notes = git(repo.path(), &["show", &format!("{branch}:NOTES.md")]);
    assert_eq!(notes, "written before Ctrl-C\n");
    let msg = git(repo.path(), &["log", "-1", "--format=%B", branch]);
    assert!(msg.contains("interrupted"), "{msg}");
    assert!(
        log.contains(&format!("work committed on branch {branch}")),
        "{log}"
    );
    // Worktree removed.
    let wts = git(repo.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(wts.matches("worktree ").count(), 1, "{wts}");
    // The trace was persisted, with the cancellation of the call in flight.
    let run_dir = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let trace = std::fs::read_to_string(run_dir.join("trace.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(events.iter().any(|e| e["kind"] == "call_cancelled"));
    let spin = events
        .iter()
        .find(|e| e["kind"] == "tool_call" && e["origin"]["remote_name"] == "spin")
        .expect("spin call recorded");
    assert_eq!(spin["state"], "unknown", "{spin}");
    assert!(
        spin["result"].as_str().unwrap().contains("cancelled"),
        "{spin}"
    );
    assert_eq!(events.last().unwrap()["kind"], "task_end");
}
