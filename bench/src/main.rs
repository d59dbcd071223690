//! `wasm-mcp-bench`: one run measures, side by side,
//!
//! 1. `read_file` over MCP (stdio) on one connection, sequential calls:
//!    wasm-mcp vs the Python FastMCP baseline (bench/baseline/), both driven
//!    by the same rmcp client code; small (1 KiB) and large (1.9 MB) files.
//! 2. start-up: spawn → first `tools/list` answer, wasm-mcp with an empty
//!    compile cache (cold) and a filled one (warm), and the baseline.
//! 3. per-call instantiation in-process (`Plugin::instantiate_only`), with the
//!    on-demand and the pooling instance allocator, plus a full `Plugin::call`.
//! 4. concurrency: N calls in flight on one connection, N in 1,2,4,8,16.
//!
//! Every number printed is measured in this run; every response is checked
//! against the file it should contain, so a broken server cannot look fast.
//! Run with `just bench` (or `just bench --quick` for a smoke run).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use clap::Parser;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use tokio::process::Command;
use wasm_mcp_host::cache::ComponentCache;
use wasm_mcp_host::plugin::Plugin;
use wasm_mcp_host::sandbox::{EngineOptions, FsAccess, Sandbox};
use wasm_mcp_host::Limits;

#[derive(Parser, Debug)]
#[command(
    name = "wasm-mcp-bench",
    about = "wasm-mcp vs a Python FastMCP baseline: latency, throughput, start-up, instantiation, concurrency"
)]
struct Args {
    /// Small counts everywhere: a smoke run of a few seconds, numbers are noisy.
    #[arg(long)]
    quick: bool,
    /// Timed sequential calls on the small file, per server [default: 1000; quick: 100].
    #[arg(long)]
    small_calls: Option<usize>,
    /// Timed sequential calls on the large file, per server [default: 100; quick: 10].
    #[arg(long)]
    large_calls: Option<usize>,
    /// Untimed warm-up calls before each timed series [default: 20; quick: 5].
    #[arg(long)]
    warmup: Option<usize>,
    /// Cold-start repetitions (empty cache each time) [default: 5; quick: 2].
    #[arg(long)]
    cold_reps: Option<usize>,
    /// Warm-start repetitions (and baseline start repetitions) [default: 10; quick: 3].
    #[arg(long)]
    warm_reps: Option<usize>,
    /// In-process iterations per measurement [default: 2000; quick: 200].
    #[arg(long)]
    inst_iters: Option<usize>,
    /// Timed calls per concurrency level (small file) [default: 800; quick: 64].
    #[arg(long)]
    conc_calls: Option<usize>,
    /// Concurrency levels (calls in flight on one connection).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    conc_levels: Vec<usize>,
    /// Skip the Python baseline entirely.
    #[arg(long)]
    no_baseline: bool,
    /// Skip the baseline's concurrency series.
    #[arg(long)]
    no_baseline_concurrency: bool,
    /// The wasm-mcp binary [default: build and use target/release/wasm-mcp].
    #[arg(long)]
    server: Option<PathBuf>,
    /// Plugin directory (must contain workspace.wasm) [default: dist/plugins].
    #[arg(long)]
    plugins: Option<PathBuf>,
    /// Python of the baseline venv [default: .venv/bin/python].
    #[arg(long)]
    python: Option<PathBuf>,
    /// Another MCP stdio server to measure side by side, as `PROGRAM ARGS…`
    /// split on whitespace; `{worktree}` and `{plugins}` are replaced by the
    /// bench's worktree and plugin dir. E.g. an older wasm-mcp build, or a
    /// peer host such as wassette.
    #[arg(long)]
    peer: Option<String>,
    /// The peer's read-a-file tool; it gets `{"path": …}`.
    #[arg(long, default_value = "read_file")]
    peer_tool: String,
    /// Give the peer absolute paths (inside the worktree) instead of relative ones.
    #[arg(long)]
    peer_absolute_paths: bool,
}

struct Counts {
    small: usize,
    large: usize,
    warmup: usize,
    cold_reps: usize,
    warm_reps: usize,
    inst_iters: usize,
    conc_calls: usize,
}

impl Args {
    fn counts(&self) -> Counts {
        let q = self.quick;
        let pick = |v: Option<usize>, full: usize, quick: usize| {
            v.unwrap_or(if q { quick } else { full }).max(1)
        };
        Counts {
            small: pick(self.small_calls, 1000, 100),
            large: pick(self.large_calls, 100, 10),
            warmup: self.warmup.unwrap_or(if q { 5 } else { 20 }),
            cold_reps: pick(self.cold_reps, 5, 2),
            warm_reps: pick(self.warm_reps, 10, 3),
            inst_iters: pick(self.inst_iters, 2000, 200),
            conc_calls: pick(self.conc_calls, 800, 64),
        }
    }
}

// ------------------------------------------------------------------ fixture

/// A file of the benchmark worktree and what `read_file` must return for it.
struct FileCase {
    label: String,
    rel: &'static str,
    content: String,
    lines: u64,
}

impl FileCase {
    /// `lines` lines of exactly `line_len` bytes (terminator included), ASCII.
    fn make(dir: &Path, rel: &'static str, lines: usize, line_len: usize) -> Result<FileCase> {
        let mut content = String::with_capacity(lines * line_len);
        for i in 0..lines {
            let head = format!("{i:06} ");
            content.push_str(&head);
            for j in 0..line_len - head.len() - 1 {
                content.push((b'a' + ((i * 7 + j) % 26) as u8) as char);
            }
            content.push('\n');
        }
        std::fs::write(dir.join(rel), &content)?;
        let label = format!("{rel} ({})", human_bytes(content.len()));
        Ok(FileCase {
            label,
            rel,
            content,
            lines: lines as u64,
        })
    }

    fn args(&self) -> serde_json::Map<String, Value> {
        json!({ "path": self.rel }).as_object().unwrap().clone()
    }

    /// The structured result must be exactly this file's preview.
    fn check_structured(&self, v: &Value) -> Result<()> {
        let got = v
            .get("content")
            .and_then(Value::as_str)
            .context("result has no string `content`")?;
        ensure!(
            got.len() == self.content.len() && got == self.content,
            "{}: content mismatch ({} bytes, expected {})",
            self.rel,
            got.len(),
            self.content.len()
        );
        let num = |k: &str| v.get(k).and_then(Value::as_u64);
        ensure!(
            v.get("path").and_then(Value::as_str) == Some(self.rel),
            "{}: wrong `path` in {v:.200}",
            self.rel
        );
        ensure!(
            num("start_line") == Some(0),
            "{}: wrong start_line",
            self.rel
        );
        ensure!(
            num("lines_returned") == Some(self.lines),
            "{}: wrong lines_returned",
            self.rel
        );
        ensure!(
            num("total_lines") == Some(self.lines),
            "{}: wrong total_lines",
            self.rel
        );
        ensure!(
            num("size_bytes") == Some(self.content.len() as u64),
            "{}: wrong size_bytes",
            self.rel
        );
        ensure!(
            v.get("truncated").and_then(Value::as_bool) == Some(false),
            "{}: wrong truncated",
            self.rel
        );
        Ok(())
    }

    /// A peer's answer: not an error, and its structured content or its
    /// text holds this whole file (exactly, somewhere). Text that is a JSON
    /// document counts when one of its strings holds the file: wassette
    /// answers with the WIT result as JSON text, `{"ok":"<file>"}`.
    fn check_contains(&self, r: &CallToolResult) -> Result<()> {
        ensure!(
            r.is_error != Some(true),
            "{}: the peer returned an error",
            self.rel
        );
        let structured = r
            .structured_content
            .as_ref()
            .is_some_and(|v| any_string_contains(v, &self.content));
        let text: String = r
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect();
        let in_json_text = || {
            serde_json::from_str::<Value>(&text)
                .is_ok_and(|v| any_string_contains(&v, &self.content))
        };
        ensure!(
            structured || text.contains(&self.content) || in_json_text(),
            "{}: the peer's answer does not hold the file ({} bytes of text)",
            self.rel,
            text.len()
        );
        Ok(())
    }

    fn check(&self, r: &CallToolResult) -> Result<()> {
        if r.is_error == Some(true) {
            bail!(
                "{}: tool returned an error: {:.300}",
                self.rel,
                serde_json::to_string(&r.content).unwrap_or_default()
            );
        }
        self.check_structured(
            r.structured_content
                .as_ref()
                .context("result has no structuredContent")?,
        )
    }
}

/// Some string inside `v` contains `needle`.
fn any_string_contains(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s.contains(needle),
        Value::Array(items) => items.iter().any(|i| any_string_contains(i, needle)),
        Value::Object(map) => map.values().any(|i| any_string_contains(i, needle)),
        _ => false,
    }
}

fn human_bytes(n: usize) -> String {
    if n >= 1_000_000 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else if n >= 1000 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

// ----------------------------------------------------------------- stats

struct Stats {
    n: usize,
    p50: Duration,
    p99: Duration,
    /// calls per second over the whole series (wall clock).
    rate: f64,
}

impl Stats {
    fn new(mut samples: Vec<Duration>, wall: Duration) -> Stats {
        samples.sort();
        let n = samples.len();
        Stats {
            n,
            p50: percentile(&samples, 50.0),
            p99: percentile(&samples, 99.0),
            rate: n as f64 / wall.as_secs_f64(),
        }
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    percentile(&v, 50.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn pass(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

// --------------------------------------------------------------- servers

/// How to spawn one MCP server under test.
#[derive(Clone)]
struct ServerSpec {
    name: &'static str,
    program: PathBuf,
    args: Vec<OsString>,
    /// The server's stderr goes here (appended), for post-mortems.
    log: PathBuf,
}

impl ServerSpec {
    fn with_args(&self, extra: &[OsString]) -> ServerSpec {
        let mut s = self.clone();
        s.args.extend(extra.iter().cloned());
        s
    }

    fn command(&self) -> Result<Command> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).env("WASM_MCP_LOG", "warn");
        Ok(cmd)
    }

    async fn connect(&self) -> Result<RunningService<RoleClient, ()>> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let (transport, _) = TokioChildProcess::builder(self.command()?)
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("spawning {}", self.program.display()))?;
        ().serve(transport).await.map_err(|e| {
            anyhow!(
                "{}: MCP initialize failed: {e} (see {})",
                self.name,
                self.log.display()
            )
        })
    }
}

/// Which tool a server reads files with, and how its answers are checked.
#[derive(Clone)]
struct Probe {
    tool: String,
    /// `Some(worktree)`: pass absolute paths under it.
    absolute_in: Option<PathBuf>,
    /// `true`: the exact `read_file` preview (ours and the baseline);
    /// `false`: any result whose text or structured content holds the whole file.
    strict: bool,
}

impl Probe {
    fn read_file() -> Probe {
        Probe {
            tool: "read_file".into(),
            absolute_in: None,
            strict: true,
        }
    }

    fn check(&self, case: &FileCase, r: &CallToolResult) -> Result<()> {
        if self.strict {
            case.check(r)
        } else {
            case.check_contains(r)
        }
    }
}

async fn call(peer: &Peer<RoleClient>, probe: &Probe, case: &FileCase) -> Result<CallToolResult> {
    let args = match &probe.absolute_in {
        None => case.args(),
        Some(dir) => json!({ "path": dir.join(case.rel) })
            .as_object()
            .unwrap()
            .clone(),
    };
    peer.call_tool(CallToolRequestParams::new(probe.tool.clone()).with_arguments(args))
        .await
        .map_err(|e| anyhow!("tools/call {} {}: {e}", probe.tool, case.rel))
}

/// Spawn → initialize → first `tools/list` answer (which must list read_file).
async fn start_once(spec: &ServerSpec) -> Result<Duration> {
    let t0 = Instant::now();
    let client = spec.connect().await?;
    let tools = client
        .list_tools(None)
        .await
        .map_err(|e| anyhow!("{}: tools/list: {e}", spec.name))?;
    let dt = t0.elapsed();
    ensure!(
        tools.tools.iter().any(|t| t.name == "read_file"),
        "{}: tools/list has no read_file",
        spec.name
    );
    client.cancel().await?;
    Ok(dt)
}

/// Sequential calls on one connection; warm-up calls are checked, not timed.
async fn sequential(
    peer: &Peer<RoleClient>,
    probe: &Probe,
    case: &FileCase,
    warmup: usize,
    n: usize,
) -> Result<Stats> {
    for _ in 0..warmup {
        probe.check(case, &call(peer, probe, case).await?)?;
    }
    let mut samples = Vec::with_capacity(n);
    let wall = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        let r = call(peer, probe, case).await?;
        samples.push(t.elapsed());
        probe.check(case, &r)?;
    }
    Ok(Stats::new(samples, wall.elapsed()))
}

/// `total` calls with `level` in flight at once on one connection; calls/s.
async fn concurrent(
    peer: &Peer<RoleClient>,
    case: &Arc<FileCase>,
    level: usize,
    total: usize,
) -> Result<f64> {
    let run = |per_task: Vec<usize>| {
        let tasks: Vec<_> = per_task
            .into_iter()
            .map(|k| {
                let (peer, case) = (peer.clone(), case.clone());
                tokio::spawn(async move {
                    for _ in 0..k {
                        case.check(&call(&peer, &Probe::read_file(), &case).await?)?;
                    }
                    anyhow::Ok(())
                })
            })
            .collect();
        async move {
            for t in tasks {
                t.await??;
            }
            anyhow::Ok(())
        }
    };
    run(vec![2; level]).await?; // warm-up at this level
    let split: Vec<usize> = (0..level)
        .map(|i| total / level + usize::from(i < total % level))
        .collect();
    let wall = Instant::now();
    run(split).await?;
    Ok(total as f64 / wall.elapsed().as_secs_f64())
}

// ------------------------------------------------------------ in-process

struct InProcess {
    instantiate: Stats,
    call: Stats,
}

async fn in_process(
    plugin_path: &Path,
    worktree: &Path,
    cache_dir: &Path,
    pooling: bool,
    case: &FileCase,
    iters: usize,
) -> Result<InProcess> {
    let sandbox = Sandbox::new(
        Some(worktree),
        FsAccess::ReadWrite,
        Limits::default(),
        &EngineOptions {
            pooling,
            ..EngineOptions::default()
        },
    )?;
    let cache = ComponentCache::new(Some(cache_dir.to_owned()));
    let plugin = Plugin::load(&sandbox, &cache, plugin_path).await?;
    ensure!(
        plugin.tools.iter().any(|t| t.name == "read_file"),
        "{} has no read_file tool",
        plugin_path.display()
    );
    let args = serde_json::to_string(&case.args())?;
    let warm = (iters / 10).clamp(10, 200);

    for _ in 0..warm {
        plugin
            .instantiate_only(&sandbox)
            .await
            .map_err(|e| anyhow!("instantiate: {e}"))?;
    }
    let mut samples = Vec::with_capacity(iters);
    let wall = Instant::now();
    for _ in 0..iters {
        let t = Instant::now();
        plugin
            .instantiate_only(&sandbox)
            .await
            .map_err(|e| anyhow!("instantiate: {e}"))?;
        samples.push(t.elapsed());
    }
    let instantiate = Stats::new(samples, wall.elapsed());

    let check = |out: &str| -> Result<()> { case.check_structured(&serde_json::from_str(out)?) };
    for _ in 0..warm {
        check(
            &plugin
                .call(&sandbox, "read_file", &args)
                .await
                .map_err(|e| anyhow!("call: {e}"))?,
        )?;
    }
    let mut samples = Vec::with_capacity(iters);
    let mut outs = Vec::with_capacity(iters);
    let wall = Instant::now();
    for _ in 0..iters {
        let t = Instant::now();
        let out = plugin
            .call(&sandbox, "read_file", &args)
            .await
            .map_err(|e| anyhow!("call: {e}"))?;
        samples.push(t.elapsed());
        outs.push(out);
    }
    let call = Stats::new(samples, wall.elapsed());
    for out in &outs {
        check(out)?;
    }
    Ok(InProcess { instantiate, call })
}

// ------------------------------------------------------------- utilities

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Build (if needed) and locate the release `wasm-mcp` binary.
fn server_binary(root: &Path) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("bench: cargo build --release -p wasm-mcp-host --bin wasm-mcp");
    let st = std::process::Command::new(cargo)
        .args([
            "build",
            "--release",
            "-q",
            "-p",
            "wasm-mcp-host",
            "--bin",
            "wasm-mcp",
        ])
        .current_dir(root)
        .status()
        .context("running cargo")?;
    ensure!(st.success(), "building wasm-mcp failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(target.join("release").join("wasm-mcp"))
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!(
        "{cpus} CPUs, {model}, {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

fn python_versions(python: &Path) -> Result<String> {
    let out = std::process::Command::new(python)
        .args(["-c", "import sys, importlib.metadata as m; print('Python', sys.version.split()[0], '+ mcp', m.version('mcp'))"])
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    ensure!(
        out.status.success(),
        "{} cannot import the mcp SDK (run scripts/bench-baseline-venv.sh): {}",
        python.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn os(s: impl Into<OsString>) -> OsString {
    s.into()
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

// ------------------------------------------------------------------ main

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run(Args::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wasm-mcp-bench: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<()> {
    let c = args.counts();
    let root = workspace_root();
    let server = match &args.server {
        Some(s) => s.clone(),
        None => server_binary(&root)?,
    };
    ensure!(
        server.is_file(),
        "server binary {} not found",
        server.display()
    );
    let plugins = args
        .plugins
        .clone()
        .unwrap_or_else(|| root.join("dist/plugins"));
    let plugin_path = plugins.join("workspace.wasm");
    ensure!(
        plugin_path.is_file(),
        "{} not found (run `just plugins`)",
        plugin_path.display()
    );
    let baseline_on = !args.no_baseline;
    let python = args
        .python
        .clone()
        .unwrap_or_else(|| root.join(".venv/bin/python"));
    let py_version = if baseline_on {
        Some(python_versions(&python)?)
    } else {
        None
    };
    let baseline_script = root.join("bench/baseline/read_file_server.py");

    let tmp = tempfile::Builder::new()
        .prefix("wasm-mcp-bench-")
        .tempdir()?;
    let worktree = tmp.path().join("worktree");
    std::fs::create_dir_all(&worktree)?;
    let small = Arc::new(FileCase::make(&worktree, "small.txt", 16, 64)?); // 1024 B
    let large = Arc::new(FileCase::make(&worktree, "large.txt", 1000, 1900)?); // 1.9 MB, exactly 1000 lines
    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(&logs)?;
    let run_cache = tmp.path().join("cache-run");

    let ours_base = ServerSpec {
        name: "wasm-mcp",
        program: server.clone(),
        args: vec![
            os("serve"),
            os("--worktree"),
            worktree.clone().into(),
            os("--plugins"),
            plugins.clone().into(),
            os("--watch-ms"),
            os("0"),
        ],
        log: logs.join("wasm-mcp.log"),
    };
    let ours = ours_base.with_args(&[
        os("--cache-dir"),
        run_cache.clone().into(),
        os("--max-concurrency"),
        os("16"),
    ]);
    let ours_ondemand = ours.with_args(&[os("--allocator"), os("on-demand")]);
    let baseline = ServerSpec {
        name: "baseline",
        program: python.clone(),
        args: vec![
            baseline_script.clone().into(),
            os("--worktree"),
            worktree.clone().into(),
        ],
        log: logs.join("baseline.log"),
    };

    let peer = match &args.peer {
        None => None,
        Some(cmd) => {
            let fill = |w: &str| {
                os(w.replace("{worktree}", &worktree.to_string_lossy())
                    .replace("{plugins}", &plugins.to_string_lossy()))
            };
            let mut words = cmd.split_whitespace();
            let program = words.next().context("--peer is empty")?;
            let spec = ServerSpec {
                name: "peer",
                program: PathBuf::from(fill(program)),
                args: words.map(fill).collect(),
                log: logs.join("peer.log"),
            };
            let probe = Probe {
                tool: args.peer_tool.clone(),
                absolute_in: args.peer_absolute_paths.then(|| worktree.clone()),
                strict: false,
            };
            Some((spec, probe))
        }
    };

    println!(
        "wasm-mcp benchmark{}",
        if args.quick {
            " (--quick: small counts, noisy numbers)"
        } else {
            ""
        }
    );
    println!("machine:  {}", machine());
    println!(
        "ours:     {} (plugin {}, read-write worktree, --watch-ms 0)",
        server.display(),
        plugin_path.display()
    );
    if let Some(v) = &py_version {
        println!(
            "baseline: {} FastMCP stdio, {}",
            v,
            baseline_script
                .strip_prefix(&root)
                .unwrap_or(&baseline_script)
                .display()
        );
    }
    if let Some(p) = &args.peer {
        println!("peer:     {p} (tool {})", args.peer_tool);
    }
    println!("client:   rmcp (same code for every server), one stdio connection per server");
    println!();

    // ---------------------------------------------------------------- 1
    eprintln!("bench: sequential read_file ...");
    let mut seq: Vec<(&str, &str, Arc<FileCase>, Stats)> = Vec::new();
    let strict = Probe::read_file();
    let mut servers: Vec<(&str, &ServerSpec, &Probe)> = vec![
        ("ours", &ours, &strict),
        ("ours on-demand", &ours_ondemand, &strict),
    ];
    if baseline_on {
        servers.push(("baseline", &baseline, &strict));
    }
    if let Some((spec, probe)) = &peer {
        servers.push(("peer", spec, probe));
    }
    for (label, spec, probe) in &servers {
        let client = spec.connect().await?;
        for (case, n) in [(&small, c.small), (&large, c.large)] {
            let warm = if Arc::ptr_eq(case, &large) {
                c.warmup.min(5)
            } else {
                c.warmup
            };
            let s = sequential(client.peer(), probe, case, warm, n)
                .await
                .with_context(|| format!("{label}: {}", case.rel))?;
            seq.push((label, case.rel, case.clone(), s));
        }
        client.cancel().await?;
    }
    println!("== read_file, sequential calls on one connection (warm-up excluded) ==");
    println!(
        "{:<22} {:<16} {:>6} {:>10} {:>10} {:>10}",
        "file", "server", "calls", "p50 ms", "p99 ms", "calls/s"
    );
    for (label, _, case, s) in &seq {
        println!(
            "{:<22} {:<16} {:>6} {:>10.3} {:>10.3} {:>10.1}",
            case.label,
            label,
            s.n,
            ms(s.p50),
            ms(s.p99),
            s.rate
        );
    }
    let find = |srv: &str, rel: &str| {
        seq.iter()
            .find(|(l, r, _, _)| *l == srv && *r == rel)
            .map(|(_, _, _, s)| s)
    };
    let mut small_ratio = None;
    if baseline_on {
        println!("ratio ours/baseline:");
        for case in [&small, &large] {
            let (o, p, b) = (
                find("ours", case.rel).unwrap(),
                find("ours on-demand", case.rel).unwrap(),
                find("baseline", case.rel).unwrap(),
            );
            println!(
                "  {:<20} calls/s {} (on-demand {}), p50 latency {} (on-demand {})",
                case.label,
                ratio(o.rate, b.rate),
                ratio(p.rate, b.rate),
                ratio(ms(o.p50), ms(b.p50)),
                ratio(ms(p.p50), ms(b.p50))
            );
            if Arc::ptr_eq(case, &small) {
                small_ratio = Some(o.rate / b.rate);
            }
        }
    }
    let mut peer_ratios = Vec::new();
    if peer.is_some() {
        println!("ratio ours/peer:");
        for case in [&small, &large] {
            let (o, p) = (
                find("ours", case.rel).unwrap(),
                find("peer", case.rel).unwrap(),
            );
            println!(
                "  {:<20} calls/s {}, p50 latency {}",
                case.label,
                ratio(o.rate, p.rate),
                ratio(ms(o.p50), ms(p.p50))
            );
            peer_ratios.push((case.label.clone(), ms(o.p50) / ms(p.p50), o.rate / p.rate));
        }
    }
    println!();

    // ---------------------------------------------------------------- 2
    eprintln!("bench: start-up ...");
    let mut cold = Vec::new();
    for i in 0..c.cold_reps {
        let dir = tmp.path().join(format!("cache-cold-{i}"));
        let spec = ours_base.with_args(&[os("--cache-dir"), dir.clone().into()]);
        cold.push(start_once(&spec).await?);
        let entries = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        ensure!(
            entries > 0,
            "cold start did not write the compile cache in {}",
            dir.display()
        );
    }
    let warm_dir = tmp.path().join("cache-warm");
    let warm_spec = ours_base.with_args(&[os("--cache-dir"), warm_dir.into()]);
    start_once(&warm_spec).await?; // fills the cache
    let mut warm = Vec::new();
    for _ in 0..c.warm_reps {
        warm.push(start_once(&warm_spec).await?);
    }
    let mut base_start = Vec::new();
    if baseline_on {
        start_once(&baseline).await?; // page cache / .pyc warm-up, like the warm run above
        for _ in 0..c.warm_reps {
            base_start.push(start_once(&baseline).await?);
        }
    }
    let (cold_m, warm_m) = (median(cold.clone()), median(warm.clone()));
    println!("== start-up: spawn -> first tools/list answer (median of reps) ==");
    println!(
        "{:<44} {:>5} {:>10} {:>10} {:>10}",
        "server", "reps", "median ms", "min ms", "max ms"
    );
    let row = |name: &str, v: &[Duration]| {
        let (mn, mx) = (
            v.iter().min().copied().unwrap_or_default(),
            v.iter().max().copied().unwrap_or_default(),
        );
        println!(
            "{:<44} {:>5} {:>10.1} {:>10.1} {:>10.1}",
            name,
            v.len(),
            ms(median(v.to_vec())),
            ms(mn),
            ms(mx)
        );
    };
    row("ours, cold (empty --cache-dir: compiles)", &cold);
    row("ours, warm (cache filled: deserializes)", &warm);
    if baseline_on {
        row("baseline (python FastMCP)", &base_start);
    }
    print!("ratio warm/cold: {}", ratio(ms(warm_m), ms(cold_m)));
    if baseline_on {
        print!(
            ", ours warm/baseline: {}",
            ratio(ms(warm_m), ms(median(base_start.clone())))
        );
    }
    println!("\n");

    // ---------------------------------------------------------------- 3
    eprintln!("bench: in-process instantiation ...");
    let inproc_cache = tmp.path().join("cache-inproc");
    let on_demand = in_process(
        &plugin_path,
        &worktree,
        &inproc_cache,
        false,
        &small,
        c.inst_iters,
    )
    .await?;
    let pooled = in_process(
        &plugin_path,
        &worktree,
        &inproc_cache,
        true,
        &small,
        c.inst_iters,
    )
    .await?;
    println!(
        "== in-process, per call (fresh store + instance each time), {} iterations ==",
        c.inst_iters
    );
    println!(
        "{:<44} {:>10} {:>10} {:>12}",
        "measurement", "p50 µs", "p99 µs", "per second"
    );
    for (name, s) in [
        (
            "instantiate_only, on-demand allocator",
            &on_demand.instantiate,
        ),
        ("instantiate_only, pooling allocator", &pooled.instantiate),
        ("call read_file small, on-demand allocator", &on_demand.call),
        ("call read_file small, pooling allocator", &pooled.call),
    ] {
        println!(
            "{:<44} {:>10.1} {:>10.1} {:>12.0}",
            name,
            us(s.p50),
            us(s.p99),
            s.rate
        );
    }
    println!(
        "ratio pooling/on-demand: instantiate p50 {}, call p50 {}",
        ratio(us(pooled.instantiate.p50), us(on_demand.instantiate.p50)),
        ratio(us(pooled.call.p50), us(on_demand.call.p50))
    );
    println!();

    // ---------------------------------------------------------------- 4
    eprintln!("bench: concurrency ...");
    let levels: Vec<usize> = args
        .conc_levels
        .iter()
        .copied()
        .filter(|&n| n > 0)
        .collect();
    let mut conc: Vec<(&str, Vec<f64>)> = Vec::new();
    let mut conc_servers: Vec<(&str, &ServerSpec)> = vec![("ours", &ours)];
    if baseline_on && !args.no_baseline_concurrency {
        conc_servers.push(("baseline", &baseline));
    }
    for (label, spec) in &conc_servers {
        let client = spec.connect().await?;
        let mut rates = Vec::new();
        for &n in &levels {
            rates.push(
                concurrent(client.peer(), &small, n, c.conc_calls)
                    .await
                    .with_context(|| format!("{label}: N={n}"))?,
            );
        }
        client.cancel().await?;
        conc.push((label, rates));
    }
    println!(
        "== concurrency: N read_file (small) calls in flight on one connection, {} calls per N ==",
        c.conc_calls
    );
    let mut header = format!("{:<10} {:>5}", "server", "N");
    header.push_str(&format!(" {:>10} {:>10}", "calls/s", "vs N=1"));
    if conc.len() > 1 {
        header.push_str(&format!(" {:>14}", "ours/baseline"));
    }
    println!("{header}");
    for (label, rates) in &conc {
        for (i, &n) in levels.iter().enumerate() {
            let mut line = format!(
                "{:<10} {:>5} {:>10.1} {:>10}",
                label,
                n,
                rates[i],
                ratio(rates[i], rates[0])
            );
            if conc.len() > 1 {
                let other = if *label == "ours" {
                    ratio(rates[i], conc[1].1[i])
                } else {
                    String::new()
                };
                line.push_str(&format!(" {other:>14}"));
            }
            println!("{line}");
        }
    }
    println!();

    // ---------------------------------------------------------------- targets
    println!("== targets ==");
    println!("{:<48} {:>24} {:>6}", "target", "measured", "result");
    match small_ratio {
        Some(r) => println!(
            "{:<48} {:>24} {:>6}",
            ">= 5x the baseline's calls/s, small file",
            format!("{r:.2}x"),
            pass(r >= 5.0)
        ),
        None => println!(
            "{:<48} {:>24} {:>6}",
            ">= 5x the baseline's calls/s, small file", "baseline skipped", "-"
        ),
    }
    for (label, p50, rate) in &peer_ratios {
        println!(
            "{:<48} {:>24} {:>6}",
            format!("vs peer, {label}: p50 / calls/s"),
            format!("{p50:.2}x / {rate:.2}x"),
            "-"
        );
    }
    println!(
        "{:<48} {:>24} {:>6}",
        "warm start < 50 ms (median)",
        format!("{:.1} ms", ms(warm_m)),
        pass(ms(warm_m) < 50.0)
    );
    for (name, s) in [
        ("on-demand", &on_demand.instantiate),
        ("pooling", &pooled.instantiate),
    ] {
        let v = us(s.p50);
        println!(
            "{:<48} {:>24} {:>6}",
            format!("instantiation in the tens of µs ({name}, p50)"),
            format!("{v:.1} µs"),
            pass(v < 100.0)
        );
    }
    eprintln!(
        "bench: done (server logs were in {}, now removed)",
        logs.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    fn case(content: &str) -> FileCase {
        FileCase {
            label: "t".into(),
            rel: "t.txt",
            content: content.into(),
            lines: 2,
        }
    }

    fn text(t: String) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(t)])
    }

    /// wassette's shape: the WIT `result<string, string>` as JSON text. The
    /// file has a newline and quotes, so its JSON form differs from the file.
    #[test]
    fn a_peer_answer_must_hold_the_whole_file() {
        let c = case("line \"one\"\nline two\n");
        let ok = |s: &str| json!({ "ok": s }).to_string();
        assert!(c.check_contains(&text(c.content.clone())).is_ok());
        assert!(c.check_contains(&text(ok(&c.content))).is_ok());
        // A file cut short, an `err` naming something else, an error result,
        // escaped text that is not a JSON document: all refused.
        assert!(c
            .check_contains(&text(ok(&c.content[..c.content.len() - 1])))
            .is_err());
        assert!(c
            .check_contains(&text(json!({ "err": "denied" }).to_string()))
            .is_err());
        let mut failed = text(c.content.clone());
        failed.is_error = Some(true);
        assert!(c.check_contains(&failed).is_err());
        let escaped_not_json = c.content.replace('\n', "\\n");
        assert!(c.check_contains(&text(escaped_not_json)).is_err());
    }
}
