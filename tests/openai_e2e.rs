//! The OpenAI-compatible provider driving the real server: a chat-completions
//! stand-in on 127.0.0.1 plays the model, the harness turns its tool calls
//! into MCP calls on `wasm-mcp`, and the real results go back to the model.

use std::sync::Arc;

use serde_json::json;
use wasm_mcp_harness::provider::openai::OpenAiProvider;
use wasm_mcp_harness::tools::naming::local_name;
use wasm_mcp_harness::{run_task, RunOptions};
use wasm_mcp_harness_testing::openai_standin;

mod support;
use support::{plugin, sample_repo, write_policy};

const TASK: &str = r#"
id = "openai"
base_ref = "HEAD"
prompt = "Read README.md and write its first line to FIRST.txt."
max_rounds = 4
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_completions_model_drives_the_real_server() {
    let repo = sample_repo();
    let scratch = tempfile::tempdir().unwrap();
    let plugins = plugin("plugins/workspace.wasm")
        .parent()
        .unwrap()
        .to_path_buf();
    let policy = write_policy(
        scratch.path(),
        &plugins,
        &[],
        &["read_file", "write_file"],
        &["read_file"],
        30_000,
    );
    let task = scratch.path().join("task.toml");
    std::fs::write(&task, TASK).unwrap();

    let (read, write) = (
        local_name("ws", "read_file"),
        local_name("ws", "write_file"),
    );
    let replies = vec![
        json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": read, "arguments": "{\"path\":\"README.md\",\"line_limit\":1}"}},
            {"id": "c2", "type": "function", "function": {"name": write, "arguments": "{\"path\":\"FIRST.txt\",\"content\":\"# sample\\n\"}"}},
            {"id": "c3", "type": "function", "function": {"name": read, "arguments": "{\"path\":\"../outside\"}"}}
        ]}}]}),
        json!({"choices": [{"message": {"role": "assistant", "content": "Copied the title."}}]}),
    ];
    let (base, seen) = openai_standin(replies).await;
    let report = run_task(
        &policy,
        &task,
        RunOptions {
            repo: Some(repo.path().to_path_buf()),
            out_dir: Some(scratch.path().join("runs")),
            keep_worktree: true,
            provider_override: Some(Arc::new(
                OpenAiProvider::new(&base, Some("sk-local".into()), "stand-in").unwrap(),
            )),
            ..RunOptions::default()
        },
    )
    .await
    .expect("run_task");
    assert!(report.ok(), "{:?}", report.error);
    let result = report.result.as_ref().unwrap();
    assert_eq!(result.final_message, "Copied the title.");
    assert_eq!(
        (result.tool_calls, result.tool_errors),
        (3, 1),
        "{result:?}"
    );
    assert_eq!(
        std::fs::read_to_string(report.worktree.join("FIRST.txt")).unwrap(),
        "# sample\n"
    );

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let (line, auth, first) = &seen[0];
    assert!(line.starts_with("POST /v1/chat/completions"), "{line}");
    assert_eq!(auth.to_lowercase(), "authorization: bearer sk-local");
    // The model was offered exactly the policy's tools, under local names.
    let mut offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    offered.sort();
    let mut want = vec![read.as_str(), write.as_str()];
    want.sort();
    assert_eq!(offered, want);
    // The real server's results went back as `tool` messages, in order.
    let msgs = seen[1].2["messages"].as_array().unwrap();
    let tool_msgs: Vec<_> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_msgs.len(), 3);
    assert_eq!(tool_msgs[0]["tool_call_id"], "c1");
    let read_back: serde_json::Value =
        serde_json::from_str(tool_msgs[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(read_back["content"], "# sample\n");
    assert_eq!(
        read_back["truncated"], true,
        "line_limit 1 of a 2-line file"
    );
    assert!(tool_msgs[1]["content"]
        .as_str()
        .unwrap()
        .contains("bytes_written"));
    let refused = tool_msgs[2]["content"].as_str().unwrap();
    assert!(
        refused.starts_with("error:") && refused.contains("escapes the worktree"),
        "{refused}"
    );
}
