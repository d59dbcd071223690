//! `wasm-mcp-bench --quick` as a correctness check (never a timing
//! assertion): every section runs against the debug `wasm-mcp` that `cargo
//! test --workspace` builds, with the smallest counts, and every response is
//! verified by the bench itself. Plus the reason that verification exists:
//! a server whose answers do not hold the file makes the run fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bench() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasm-mcp-bench"));
    cmd.current_dir(root());
    cmd
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .into()
}

/// The `wasm-mcp` of the same build (profile dir) as this bench binary.
fn server() -> PathBuf {
    let exe = Path::new(env!("CARGO_BIN_EXE_wasm-mcp-bench"));
    let server = exe.with_file_name("wasm-mcp");
    assert!(
        server.is_file(),
        "{} missing: `cargo build -p wasm-mcp-host` (cargo test --workspace builds it)",
        server.display()
    );
    server
}

fn run(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().expect("running wasm-mcp-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

/// The smoke run's counts, smaller still than `--quick` (debug binaries).
const TINY: &[&str] = &[
    "--quick",
    "--small-calls",
    "10",
    "--large-calls",
    "1",
    "--warmup",
    "0",
    "--cold-reps",
    "1",
    "--warm-reps",
    "1",
    "--inst-iters",
    "10",
    "--conc-calls",
    "8",
    "--conc-levels",
    "1,4",
    "--size-calls",
    "1",
    "--scaling-calls",
    "2",
    "--scaling-servers",
    "1,2",
    "--memory-load-ms",
    "50",
];

#[test]
fn quick_run_measures_every_section_and_fills_the_targets_table() {
    let server = server();
    let peer = format!(
        "{} serve --worktree {{worktree}} --plugins {{plugins}} --watch-ms 0",
        server.display()
    );
    let mut cmd = bench();
    cmd.args(TINY)
        .arg("--server")
        .arg(&server)
        .arg("--cache-dir")
        .arg(root().join("target/test-component-cache"))
        .args(["--peer", &peer]);
    let with_baseline = root().join(".venv/bin/python").is_file();
    if !with_baseline {
        eprintln!("no .venv (scripts/bench-baseline-venv.sh): the baseline is skipped");
        cmd.arg("--no-baseline");
    }
    let (out, stdout, stderr) = run(&mut cmd);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for header in [
        "== read_file, sequential calls",
        "per-call overhead over the floor",
        "ratio ours/peer:",
        "== start-up:",
        "== in-process,",
        "== concurrency:",
        "== result size:",
        "== servers at once:",
        "== memory:",
        "16 read_file small.txt in flight",
        "== targets ==",
    ] {
        assert!(stdout.contains(header), "no `{header}` in:\n{stdout}");
    }
    let targets = &stdout[stdout.find("== targets ==").unwrap()..];
    for line in targets.lines().skip(2) {
        let needs_baseline = line.contains("baseline");
        if with_baseline || !needs_baseline {
            assert!(
                line.ends_with("PASS") || line.ends_with("MISS"),
                "not measured: {line}"
            );
        }
    }
}

#[test]
fn a_server_whose_answers_do_not_hold_the_file_fails_the_run() {
    // The floor answers with as many `x` as asked for, never the file.
    let floor = format!("{} --serve-floor", env!("CARGO_BIN_EXE_wasm-mcp-bench"));
    let (out, stdout, stderr) = run(bench()
        .args(["--only", "sequential", "--no-baseline"])
        .args(["--small-calls", "1", "--large-calls", "1", "--warmup", "0"])
        .arg("--server")
        .arg(server())
        .args(["--peer", &floor, "--peer-tool", "floor"]));
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stderr.contains("does not hold the file"),
        "wrong failure:\n{stderr}"
    );
    assert!(!stdout.contains("== targets =="), "{stdout}");
}
