//! One run's context: binaries, the temp worktree and its files, and the
//! servers under test.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use tempfile::TempDir;

use crate::cli::{Args, Counts};
use crate::fixture::FileCase;
use crate::request::{Expect, Probe};
use crate::servers::{os, ServerSpec};

pub struct Bench {
    pub args: Args,
    pub counts: Counts,
    pub root: PathBuf,
    pub server: PathBuf,
    pub plugins: PathBuf,
    /// `plugins/workspace.wasm`.
    pub plugin_path: PathBuf,
    pub tmp: TempDir,
    pub worktree: PathBuf,
    pub logs: PathBuf,
    pub small: Arc<FileCase>,
    pub large: Arc<FileCase>,
    /// ours without the run's cache or concurrency flags (start-up adds its own cache).
    pub ours_base: ServerSpec,
    /// ours with the run's compile cache and 16 calls at once.
    pub ours: ServerSpec,
    pub ours_ondemand: ServerSpec,
    pub floor: ServerSpec,
    /// The Python FastMCP baseline and its versions, unless `--no-baseline`.
    pub baseline: Option<(ServerSpec, String)>,
    pub peer: Option<(ServerSpec, Probe)>,
}

impl Bench {
    pub fn new(args: Args) -> Result<Bench> {
        let counts = args.counts();
        let root = workspace_root();
        let server = match &args.server {
            Some(s) => s.clone(),
            None => server_binary()?,
        };
        ensure!(
            server.is_file(),
            "server binary {} not found: build it with `cargo build --release --workspace --bins` (or run `just bench`), or name one with --server",
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
        let tmp = tempfile::Builder::new()
            .prefix("wasm-mcp-bench-")
            .tempdir()?;
        let worktree = tmp.path().join("worktree");
        std::fs::create_dir_all(&worktree)?;
        let small = Arc::new(FileCase::make(&worktree, "small.txt", 16, 64)?); // 1024 B
        let large = Arc::new(FileCase::make(&worktree, "large.txt", 1000, 1900)?); // 1.9 MB, exactly 1000 lines
        let logs = tmp.path().join("logs");
        std::fs::create_dir_all(&logs)?;

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
        let run_cache = tmp.path().join("cache-run");
        prime_cache(&server, &worktree, &plugins, &run_cache)?;
        let ours = ours_base.with_args(&[
            os("--cache-dir"),
            run_cache.into(),
            os("--max-concurrency"),
            os("16"),
        ]);
        let ours_ondemand = ours.with_args(&[os("--allocator"), os("on-demand")]);
        let floor = ServerSpec {
            name: "floor",
            program: std::env::current_exe().context("locating the bench binary")?,
            args: vec![os("--serve-floor")],
            log: logs.join("floor.log"),
        };
        let baseline = if args.no_baseline {
            None
        } else {
            Some(baseline(&args, &root, &worktree, &logs)?)
        };
        let peer = args
            .peer
            .as_deref()
            .map(|cmd| peer(&args, cmd, &worktree, &plugins, &logs))
            .transpose()?;
        Ok(Bench {
            args,
            counts,
            root,
            server,
            plugins,
            plugin_path,
            tmp,
            worktree,
            logs,
            small,
            large,
            ours_base,
            ours,
            ours_ondemand,
            floor,
            baseline,
            peer,
        })
    }

    pub fn baseline_spec(&self) -> Option<&ServerSpec> {
        self.baseline.as_ref().map(|(s, _)| s)
    }

    /// What was measured against what, before the tables.
    pub fn print_header(&self) {
        println!(
            "wasm-mcp benchmark{}",
            if self.args.quick {
                " (--quick: small counts, noisy numbers)"
            } else {
                ""
            }
        );
        println!("machine:  {}", machine());
        println!(
            "ours:     {} (plugin {}, read-write worktree, --watch-ms 0)",
            self.server.display(),
            self.plugin_path.display()
        );
        println!("floor:    do-nothing rmcp stdio server (this binary, --serve-floor): one tool, a fixed result of the asked size");
        if let Some((_, versions)) = &self.baseline {
            println!("baseline: {versions} FastMCP stdio, {}", BASELINE_SCRIPT);
        }
        if let Some(p) = &self.args.peer {
            println!("peer:     {p} (tool {})", self.args.peer_tool);
        }
        println!("client:   rmcp (same code for every server), one stdio connection per server");
        println!();
    }
}

const BASELINE_SCRIPT: &str = "bench/baseline/read_file_server.py";

fn baseline(
    args: &Args,
    root: &Path,
    worktree: &Path,
    logs: &Path,
) -> Result<(ServerSpec, String)> {
    let python = args
        .python
        .clone()
        .unwrap_or_else(|| root.join(".venv/bin/python"));
    let versions = python_versions(&python)?;
    let spec = ServerSpec {
        name: "baseline",
        program: python,
        args: vec![
            root.join(BASELINE_SCRIPT).into(),
            os("--worktree"),
            worktree.into(),
        ],
        log: logs.join("baseline.log"),
    };
    Ok((spec, versions))
}

/// `--peer "PROGRAM ARGS"` with `{worktree}` and `{plugins}` filled in.
fn peer(
    args: &Args,
    cmd: &str,
    worktree: &Path,
    plugins: &Path,
    logs: &Path,
) -> Result<(ServerSpec, Probe)> {
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
        absolute_in: args.peer_absolute_paths.then(|| worktree.to_owned()),
        expect: Expect::Holds,
    };
    Ok((spec, probe))
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The `wasm-mcp` built with this bench: next to its own executable (one
/// `cargo build --workspace --bins` makes both, as `just bench` does). The
/// bench never builds it itself: a build started from here could replace
/// the running bench, which spawns itself as the floor.
fn server_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the bench binary")?;
    Ok(exe.with_file_name("wasm-mcp"))
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

/// Fills `cache` with Cranelift's code for the plugins in `plugins` (the
/// one-shot `wasm-mcp tools`, which never uses the baseline tier), so that
/// a server measured in steady state runs optimized code from its first
/// call; start-up measures the cold path on its own caches.
pub fn prime_cache(server: &Path, worktree: &Path, plugins: &Path, cache: &Path) -> Result<()> {
    let status = std::process::Command::new(server)
        .arg("tools")
        .arg("--worktree")
        .arg(worktree)
        .arg("--plugins")
        .arg(plugins)
        .arg("--cache-dir")
        .arg(cache)
        .env("WASM_MCP_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("running {} tools", server.display()))?;
    ensure!(
        status.success(),
        "{} tools failed: {status}",
        server.display()
    );
    Ok(())
}
