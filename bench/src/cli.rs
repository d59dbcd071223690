//! Command line: what to measure, how often, against which binaries.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "wasm-mcp-bench",
    about = "wasm-mcp vs a do-nothing floor, a Python FastMCP baseline and a peer: latency, throughput, start-up, instantiation, concurrency, result sizes, servers at once, memory"
)]
pub struct Args {
    /// Small counts everywhere: a smoke run of a few seconds, numbers are noisy.
    #[arg(long)]
    pub quick: bool,
    /// Run only these sections (comma-separated); the targets table is always printed.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Section>,
    /// Timed sequential calls on the small file, per server [default: 1000; quick: 100].
    #[arg(long)]
    pub small_calls: Option<usize>,
    /// Timed sequential calls on the large file, per server [default: 100; quick: 10].
    #[arg(long)]
    pub large_calls: Option<usize>,
    /// Untimed warm-up calls before each timed series [default: 20; quick: 5].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Cold-start repetitions (empty cache each time) [default: 5; quick: 2].
    #[arg(long)]
    pub cold_reps: Option<usize>,
    /// Warm-start repetitions (and baseline start repetitions) [default: 10; quick: 3].
    #[arg(long)]
    pub warm_reps: Option<usize>,
    /// In-process iterations per measurement [default: 2000; quick: 200].
    #[arg(long)]
    pub inst_iters: Option<usize>,
    /// Timed calls per concurrency level (small file) [default: 800; quick: 64].
    #[arg(long)]
    pub conc_calls: Option<usize>,
    /// Concurrency levels (calls in flight on one connection).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    pub conc_levels: Vec<usize>,
    /// Timed calls per result size [default: 256 MiB worth, 20..=1000; quick: 5].
    #[arg(long)]
    pub size_calls: Option<usize>,
    /// Timed small-file calls per server in the servers-at-once series [default: 300; quick: 10].
    #[arg(long)]
    pub scaling_calls: Option<usize>,
    /// Numbers of servers run at once (one connection each).
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    pub scaling_servers: Vec<usize>,
    /// How long the memory section samples a server with 16 calls in flight, ms [default: 2000; quick: 300].
    #[arg(long)]
    pub memory_load_ms: Option<u64>,
    /// Skip the Python baseline entirely.
    #[arg(long)]
    pub no_baseline: bool,
    /// Skip the baseline's concurrency series.
    #[arg(long)]
    pub no_baseline_concurrency: bool,
    /// The wasm-mcp binary [default: the one next to this bench's executable].
    #[arg(long)]
    pub server: Option<PathBuf>,
    /// Plugin directory (must contain workspace.wasm) [default: dist/plugins].
    #[arg(long)]
    pub plugins: Option<PathBuf>,
    /// The Python and JavaScript sample plugins whose memory is measured [default: dist/samples].
    #[arg(long)]
    pub samples: Option<PathBuf>,
    /// Compile cache kept between runs for the memory section's servers (the
    /// samples compile slowly) [default: a fresh temp dir].
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Python of the baseline venv [default: .venv/bin/python].
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Another MCP stdio server to measure side by side, as `PROGRAM ARGS…`
    /// split on whitespace; `{worktree}` and `{plugins}` are replaced by the
    /// bench's worktree and plugin dir. E.g. an older wasm-mcp build, or a
    /// peer host such as wassette.
    #[arg(long)]
    pub peer: Option<String>,
    /// The peer's read-a-file tool; it gets `{"path": …}`.
    #[arg(long, default_value = "read_file")]
    pub peer_tool: String,
    /// Give the peer absolute paths (inside the worktree) instead of relative ones.
    #[arg(long)]
    pub peer_absolute_paths: bool,
    /// Internal: serve the do-nothing floor MCP server on stdio (the bench spawns itself with it).
    #[arg(long, hide = true)]
    pub serve_floor: bool,
}

/// One part of the run; `--only` picks some.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Section {
    /// read_file sequential calls: ours, on-demand, floor, baseline, peer.
    Sequential,
    /// spawn -> first tools/list answer, cold and warm.
    Startup,
    /// instantiation and a whole call in process.
    InProcess,
    /// the output check of a result, as served and all inline.
    OutputCheck,
    /// N calls in flight on one connection.
    Concurrency,
    /// per-call cost by result size.
    Sizes,
    /// several servers at once.
    Scaling,
    /// RSS and PSS from /proc/PID/smaps_rollup.
    Memory,
}

/// How many times each thing is measured.
pub struct Counts {
    pub small: usize,
    pub large: usize,
    pub warmup: usize,
    pub cold_reps: usize,
    pub warm_reps: usize,
    pub inst_iters: usize,
    pub conc_calls: usize,
    /// `None`: derived from each result's size.
    pub size_calls: Option<usize>,
    pub scaling_calls: usize,
    pub memory_load_ms: u64,
}

impl Args {
    pub fn counts(&self) -> Counts {
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
            size_calls: self.size_calls.or(q.then_some(5)).map(|n| n.max(1)),
            scaling_calls: pick(self.scaling_calls, 300, 10),
            memory_load_ms: self
                .memory_load_ms
                .unwrap_or(if q { 300 } else { 2000 })
                .max(1),
        }
    }

    /// Whether `section` runs (all of them without `--only`).
    pub fn runs(&self, section: Section) -> bool {
        self.only.is_empty() || self.only.contains(&section)
    }
}
