//! Real third-party MCP servers driven by the harness through a policy in the
//! desktop clients' `mcpServers` JSON shape (no `--worktree` flag: the
//! policy runs them with `cwd = {worktree}` and placeholders in `args`):
//! - a server written with the official Python MCP SDK (FastMCP);
//! - `@modelcontextprotocol/server-filesystem` (Node), rooted at the worktree.
//!
//! Set-up: `scripts/test-mcp-servers.sh` (run here when needed; `just test`
//! runs it first). The Node test is skipped, with the reason printed, only
//! when node/npm are absent.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use wasm_mcp_harness::run::keep::WorkOutcome;
use wasm_mcp_harness::{run_task, ProviderChoice, RunOptions, RunReport};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Run the set-up script once per test binary (under a lock across binaries).
fn setup() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let root = repo_root();
        std::fs::create_dir_all(root.join(".cache")).unwrap();
        let out = Command::new("flock")
            .arg(root.join(".cache/test-mcp-servers.lock"))
            .arg("bash")
            .arg(root.join("scripts/test-mcp-servers.sh"))
            .output()
            .expect("run scripts/test-mcp-servers.sh");
        assert!(
            out.status.success(),
            "scripts/test-mcp-servers.sh failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(cmd))
            .find(|p| p.is_file())
    })
}

fn git(repo: &Path, args: &[&str]) -> String {
    wasm_mcp_harness_testing::git(repo, args).trim().to_string()
}

/// A repo, the policy JSON and task TOML written next to it; runs the task.
async fn run(policy_json: &str, task_toml: &str) -> (tempfile::TempDir, RunReport) {
    let dir = tempfile::tempdir().unwrap();
    let repo = wasm_mcp_harness_testing::repo_in(dir.path(), &[("README.md", "# Demo\n")]);
    std::fs::write(dir.path().join("policy.json"), policy_json).unwrap();
    std::fs::write(dir.path().join("task.toml"), task_toml).unwrap();
    let report = run_task(
        &dir.path().join("policy.json"),
        &dir.path().join("task.toml"),
        RunOptions {
            provider: ProviderChoice::Scripted,
            repo: Some(repo),
            out_dir: Some(dir.path().join("out")),
            ..Default::default()
        },
    )
    .await
    .expect("run_task");
    (dir, report)
}

/// The run committed NOTES.md with `content` on its branch.
fn assert_notes_committed(dir: &Path, report: &RunReport, content: &str) {
    assert!(report.ok(), "run failed: {:?}", report.error);
    let WorkOutcome::Committed(c) = &report.work.work else {
        panic!("nothing committed: {:?}", report.work);
    };
    let repo = dir.join("repo");
    let notes = git(&repo, &["show", &format!("{}:NOTES.md", c.branch)]);
    assert_eq!(notes, content.trim_end());
    assert!(!report.worktree.exists());
    assert!(
        !repo.join("NOTES.md").exists(),
        "wrote into the main checkout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_fastmcp_server_from_a_desktop_style_policy() {
    setup();
    let python = repo_root().join(".venv/bin/python");
    let script = repo_root().join("harness/tests/servers/notes_server.py");
    let policy = serde_json::json!({"mcpServers": {"notes": {
        "command": python,
        "args": [script],
        "allowedTools": ["write_note", "read_note"],
        "protocolVersions": ["2025-11-25", "2025-06-18"],
        "tools": {"write_note": {"approval": "auto"}, "read_note": {"approval": "auto"}}
    }}});
    let task = r#"
id = "python"
prompt = "write a note"
[scripted]
final_message = "done"
[[scripted.steps]]
tool = "write_note"
args = { name = "NOTES.md", text = "from python\n" }
[[scripted.steps]]
tool = "read_note"
args = { name = "NOTES.md" }
expect_contains = "from python"
"#;
    let (dir, report) = run(&policy.to_string(), task).await;
    assert_notes_committed(dir.path(), &report, "from python\n");
    assert_eq!(report.result.as_ref().unwrap().tool_calls, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_server_filesystem_rooted_at_the_worktree() {
    let (Some(node), Some(_npm)) = (which("node"), which("npm")) else {
        eprintln!(
            "SKIPPED node_server_filesystem_rooted_at_the_worktree: node/npm not found on PATH"
        );
        return;
    };
    setup();
    let server = repo_root()
        .join(".cache/mcp-node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        server.is_file(),
        "{} missing after set-up",
        server.display()
    );
    let policy = serde_json::json!({"mcpServers": {"fs": {
        "command": node,
        "args": [server, "{worktree}"],
        "allowedTools": ["write_file", "read_text_file"],
        "protocolVersions": ["2025-11-25", "2025-06-18"],
        "tools": {"write_file": {"approval": "auto"}, "read_text_file": {"approval": "auto"}}
    }}});
    let task = r#"
id = "node"
prompt = "write a note"
[scripted]
final_message = "done"
[[scripted.steps]]
tool = "write_file"
args = { path = "NOTES.md", content = "from node\n" }
[[scripted.steps]]
tool = "read_text_file"
args = { path = "NOTES.md" }
expect_contains = "from node"
[[scripted.steps]]
tool = "read_text_file"
args = { path = "/etc/hostname" }
expect_error = true
"#;
    let (dir, report) = run(&policy.to_string(), task).await;
    assert_notes_committed(dir.path(), &report, "from node\n");
}
