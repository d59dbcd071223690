//! The whole product end to end: the harness creates a git worktree for a
//! task, starts the real `wasm-mcp` server on it, runs the scripted agent
//! loop through the real MCP client, and shuts down in reverse order,
//! keeping the work as one commit on `agent/<run-id>`.

use wasm_mcp_harness::{run_task, ProviderChoice, RunOptions};

mod support;
use support::{git, sample_repo};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_task_runs_against_the_real_server_and_keeps_its_work() {
    let repo = sample_repo();
    let scratch = tempfile::tempdir().unwrap();
    let plugins = support::plugin("plugins/workspace.wasm")
        .parent()
        .unwrap()
        .to_path_buf();
    let tools = ["read_file", "list_dir", "search", "write_file"];
    let policy = support::write_policy(
        scratch.path(),
        &plugins,
        &[],
        &tools,
        &["read_file"],
        30_000,
    );
    let task = support::repo_root().join("tasks/sample.toml");
    let report = run_task(
        &policy,
        &task,
        RunOptions {
            provider: ProviderChoice::Scripted,
            repo: Some(repo.path().to_path_buf()),
            out_dir: Some(scratch.path().join("runs")),
            ..RunOptions::default()
        },
    )
    .await
    .expect("run_task");
    assert!(report.ok(), "run failed: {:?}", report.error);
    let result = report.result.as_ref().unwrap();
    assert_eq!(result.tool_calls, 6, "{result:?}");
    assert_eq!(
        result.tool_errors, 1,
        "only the escape attempt fails: {result:?}"
    );
    assert_eq!(result.contract_violations, 0);
    assert!(
        result.final_message.contains("Wrote NOTES.md"),
        "{}",
        result.final_message
    );

    // The trace shows what the real server did, step by step.
    let trace = std::fs::read_to_string(&report.trace_path).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["kind"] == "tool_call").collect();
    let write = calls
        .iter()
        .find(|c| c["origin"]["remote_name"] == "write_file")
        .expect("write_file call");
    assert_eq!(write["state"], "completed");
    let check = calls
        .iter()
        .filter(|c| c["origin"]["remote_name"] == "read_file")
        .nth(1)
        .expect("read back");
    assert!(
        check["result"].as_str().unwrap().contains("# Notes"),
        "{check}"
    );
    let escape = calls.last().unwrap();
    assert!(
        escape["result"]
            .as_str()
            .unwrap()
            .contains("escapes the worktree"),
        "{escape}"
    );
    assert!(events.iter().any(|e| e["kind"] == "server_closed"));

    // Reverse-order shutdown: the work is one commit on the kept branch, the
    // worktree directory is gone, the main checkout untouched.
    assert!(!report.worktree.exists(), "worktree not removed");
    let worktrees = git(repo.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(worktrees.matches("worktree ").count(), 1, "{worktrees}");
    let branches = git(repo.path(), &["branch", "--list", &report.branch]);
    assert!(
        branches.contains(&report.branch),
        "branch {} not kept: {branches}",
        report.branch
    );
    let count = git(
        repo.path(),
        &["rev-list", "--count", &format!("main..{}", report.branch)],
    );
    assert_eq!(count.trim(), "1", "one commit on the branch");
    let changed = git(
        repo.path(),
        &["diff", "--name-only", &format!("main...{}", report.branch)],
    );
    assert_eq!(changed.trim(), "NOTES.md");
    let notes = git(
        repo.path(),
        &["show", &format!("{}:NOTES.md", report.branch)],
    );
    assert!(notes.starts_with("# Notes"), "{notes}");
    match &report.work.work {
        wasm_mcp_harness::run::keep::WorkOutcome::Committed(c) => {
            assert!(c.diffstat.contains("NOTES.md"), "{}", c.diffstat)
        }
        other => panic!("work not committed: {other:?}"),
    }
    assert!(
        !repo.path().join("NOTES.md").exists(),
        "the task wrote into the main checkout"
    );
}

/// A run whose server cannot be used (the policy requires a tool the server
/// does not have) fails with one clear message, printed once.
#[test]
fn a_refused_server_is_reported_once() {
    let repo = sample_repo();
    let scratch = tempfile::tempdir().unwrap();
    let plugins = support::plugin("plugins/workspace.wasm")
        .parent()
        .unwrap()
        .to_path_buf();
    let policy = support::write_policy(
        scratch.path(),
        &plugins,
        &[],
        &["read_file", "no_such_tool"],
        &[],
        30_000,
    );
    let task = support::repo_root().join("tasks/sample.toml");
    let out = std::process::Command::new(support::agent_bin())
        .args(["run-task", "--provider", "scripted", "--policy"])
        .arg(&policy)
        .arg("--task")
        .arg(&task)
        .arg("--out-dir")
        .arg(scratch.path().join("runs"))
        .current_dir(repo.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(
        stderr.matches("no_such_tool").count(),
        1,
        "the refusal is printed once: {stderr}"
    );
    assert!(
        stderr.contains("allowed tools missing on server"),
        "{stderr}"
    );
}

/// The binary as a user runs it: progress and the summary (branch, commit,
/// diffstat, the `git diff` hint) on stderr, nothing on stdout; `--json`
/// puts the trace as JSON lines on stdout; `--discard` leaves no branch.
#[test]
fn the_binary_prints_where_the_work_is_and_json_goes_to_stdout() {
    let repo = sample_repo();
    let scratch = tempfile::tempdir().unwrap();
    let plugins = support::plugin("plugins/workspace.wasm")
        .parent()
        .unwrap()
        .to_path_buf();
    let tools = ["read_file", "list_dir", "search", "write_file"];
    let policy = support::write_policy(scratch.path(), &plugins, &[], &tools, &[], 30_000);
    let task = support::repo_root().join("tasks/sample.toml");
    let run = |extra: &[&str]| {
        std::process::Command::new(support::agent_bin())
            .args(["run-task", "--provider", "scripted", "--policy"])
            .arg(&policy)
            .arg("--task")
            .arg(&task)
            .arg("--out-dir")
            .arg(scratch.path().join("runs"))
            .args(extra)
            .current_dir(repo.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(out.stdout.is_empty(), "stdout is for --json only");
    let branch = git(
        repo.path(),
        &["branch", "--list", "agent/*", "--format=%(refname:short)"],
    );
    let branch = branch.trim();
    let commit = git(repo.path(), &["rev-parse", branch]);
    let base = git(repo.path(), &["rev-parse", "main"]);
    assert!(err.contains("round 1"), "{err}");
    assert!(err.contains("→ ws.write_file (mcp_ws_write_file_"), "{err}");
    assert!(
        err.contains(&format!(
            "work committed on branch {branch} (commit {}",
            commit.trim()
        )),
        "{err}"
    );
    assert!(err.contains(" NOTES.md | "), "diffstat: {err}");
    assert!(
        err.contains(&format!("git diff {}...{branch}", &base.trim()[..12])),
        "{err}"
    );
    git(repo.path(), &["branch", "-D", branch]);

    let out = run(&["--json", "--discard"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let kinds: Vec<String> = stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            v["kind"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("task_start"));
    assert_eq!(kinds.last().map(String::as_str), Some("task_end"));
    assert!(kinds.iter().any(|k| k == "tool_call"));
    assert!(err.contains("work discarded"), "{err}");
    assert_eq!(
        git(repo.path(), &["branch", "--list", "agent/*"]).trim(),
        ""
    );
}
