//! The policy's launch spec is what the child gets: cwd, args, cleared env + HOME.

use std::sync::Arc;
use std::time::Duration;

use wasm_mcp_harness::mcp::connection::{ChildConnector, ConnectError, Connection};
use wasm_mcp_harness::run::policy::{Placeholders, Policy};

#[tokio::test]
async fn child_gets_only_policy_env_and_cwd() {
    // A variable of ours that must not leak into the child.
    std::env::set_var("HARNESS_LEAK_CHECK", "leaked");
    let d = tempfile::tempdir().unwrap();
    let wt = d.path().join("wt");
    let rt = d.path().join("rt");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::create_dir_all(&rt).unwrap();
    let policy = Policy::from_toml(r#"
[[servers]]
id = "sh"
command = "/bin/sh"
args = ["-c", "pwd > \"$HOME/pwd\"; env > \"$HOME/env\"; echo \"$@\" > \"$HOME/args\"; cat > /dev/null; true", "sh", "--worktree", "{worktree}"]
env = { GREETING = "hi", CACHE = "{runtime_dir}/c" }
allowed_tools = []
"#).unwrap();
    let ph = Placeholders {
        worktree: wt.clone(),
        runtime_dir: rt.clone(),
        repo: d.path().into(),
    };
    let spec = policy.servers[0].launch_spec(&ph).unwrap();
    let conn = ChildConnector {
        server_id: "sh".into(),
        spec,
        stderr_log: Some(rt.join("sh.stderr.log")),
    };
    // The shell never answers initialize: the handshake times out and the
    // child is killed (long enough for `sh` and `env` on a loaded machine
    // to write what is checked below).
    let r = Connection::open(
        "sh",
        Arc::new(conn),
        &["2025-11-25".into()],
        Duration::from_secs(5),
    )
    .await;
    assert!(
        matches!(r, Err(ConnectError::InitTimeout { .. })),
        "{:?}",
        r.err()
    );
    let env = std::fs::read_to_string(rt.join("env")).unwrap();
    assert!(env.contains("GREETING=hi"));
    assert!(env.contains(&format!("CACHE={}/c", rt.display())));
    assert!(env.contains(&format!("HOME={}", rt.display())));
    assert!(
        !env.contains("HARNESS_LEAK_CHECK"),
        "parent env leaked:\n{env}"
    );
    assert!(
        !env.lines().any(|l| l.starts_with("CARGO")),
        "parent env leaked:\n{env}"
    );
    assert_eq!(
        std::fs::read_to_string(rt.join("pwd")).unwrap().trim(),
        wt.display().to_string()
    );
    assert_eq!(
        std::fs::read_to_string(rt.join("args")).unwrap().trim(),
        format!("--worktree {}", wt.display())
    );
    assert!(rt.join("sh.stderr.log").exists());
}

#[tokio::test]
async fn spawn_failure_is_classified() {
    let policy = Policy::from_toml(
        r#"
[[servers]]
id = "x"
command = "/nonexistent/wasm-mcp"
args = ["--worktree", "{worktree}"]
"#,
    )
    .unwrap();
    let ph = Placeholders {
        worktree: "/tmp".into(),
        runtime_dir: "/tmp".into(),
        repo: "/tmp".into(),
    };
    let spec = policy.servers[0].launch_spec(&ph).unwrap();
    let r = Connection::open(
        "x",
        Arc::new(ChildConnector {
            server_id: "x".into(),
            spec,
            stderr_log: None,
        }),
        &["2025-11-25".into()],
        Duration::from_secs(2),
    )
    .await;
    assert!(
        matches!(r, Err(ConnectError::Spawn { .. })),
        "{:?}",
        r.err()
    );
}
