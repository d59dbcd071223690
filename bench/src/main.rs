//! `wasm-mcp-bench`: one run measures, side by side (each section in its
//! module under `sections/`):
//!
//! 1. `sequential`: `read_file` over MCP (stdio) on one connection: wasm-mcp
//!    vs the do-nothing floor (`floor`), the Python FastMCP baseline
//!    (bench/baseline/) and an optional `--peer`, all driven by the same rmcp
//!    client code; small (1 KiB) and large (1.9 MB) files.
//! 2. `startup`: spawn → first `tools/list` answer, cold and warm cache.
//! 3. `in_process`: instantiation and a whole call, pooling vs on-demand.
//!    `output_check`: a result checked against its output schema as served
//!    (priced, long strings off the executor) and all inline.
//! 4. `concurrency`: N calls in flight on one connection.
//! 5. `sizes`: per-call cost for results of 1 KiB .. 4 MiB, ours and the floor.
//! 6. `scaling`: 1, 4, 16 servers at once, one connection each.
//! 7. `memory`: RSS/PSS of servers idle, loaded, 16 at once, per sample plugin.
//!
//! and ends with the targets table (`targets`). Every response is checked
//! against what it should contain (`request`), so a broken server cannot
//! look fast. Run with `just bench` (or `just bench --quick`; `--only
//! sizes,memory` runs some sections).

mod cli;
mod drive;
mod fixture;
mod floor;
mod request;
mod sections;
mod servers;
mod setup;
mod smaps;
mod stats;
mod targets;

use anyhow::Result;
use clap::{Parser, ValueEnum};

use cli::{Args, Section};
use sections::{
    concurrency, in_process, memory, output_check, scaling, sequential, sizes, startup,
};
use setup::Bench;
use targets::Results;

/// The same allocator as the server (the client's share of every call is
/// the same for every server measured).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // The in-process section runs wasmtime here: started like the server.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    wasm_mcp_host::block_on_workers(cores, run_main())
}

async fn run_main() -> std::process::ExitCode {
    let args = Args::parse();
    let outcome = if args.serve_floor {
        floor::serve().await
    } else {
        run(args).await
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wasm-mcp-bench: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<()> {
    let b = Bench::new(args)?;
    b.print_header();
    let mut r = Results::default();
    for section in Section::value_variants() {
        if !b.args.runs(*section) {
            continue;
        }
        let t0 = std::time::Instant::now();
        match section {
            Section::Sequential => sequential::run(&b, &mut r).await?,
            Section::Startup => startup::run(&b, &mut r).await?,
            Section::InProcess => in_process::run(&b, &mut r).await?,
            Section::OutputCheck => output_check::run(&b).await?,
            Section::Concurrency => concurrency::run(&b).await?,
            Section::Sizes => sizes::run(&b).await?,
            Section::Scaling => scaling::run(&b).await?,
            Section::Memory => memory::run(&b, &mut r).await?,
        }
        eprintln!(
            "bench: {section:?} took {:.1} s",
            t0.elapsed().as_secs_f64()
        );
    }
    r.print();
    eprintln!(
        "bench: done (server logs were in {}, now removed)",
        b.logs.display()
    );
    Ok(())
}
