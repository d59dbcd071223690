//! `wasm-agent run-task --policy P --task T [--provider scripted|openai] [--keep-worktree]`

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use wasm_mcp_harness::run::task::ProviderChoice;
use wasm_mcp_harness::{run_task, RunOptions};

#[derive(Parser)]
#[command(
    name = "wasm-agent",
    about = "Run agent tasks against policy-configured MCP servers"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Provider {
    Scripted,
    Openai,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create a worktree, serve it over MCP, run the agent loop, print the trace, clean up.
    RunTask {
        #[arg(long, default_value = "policy/default.toml")]
        policy: PathBuf,
        #[arg(long)]
        task: PathBuf,
        /// Default: openai if OPENAI_BASE_URL is set, else scripted.
        #[arg(long, value_enum)]
        provider: Option<Provider>,
        #[arg(long)]
        keep_worktree: bool,
        /// Runtime dir root (trace.jsonl, artifacts, server stderr). Default: <repo>/.cache/agent-runs
        #[arg(long)]
        out_dir: Option<PathBuf>,
        /// Print only the summary, not the trace.
        #[arg(long)]
        quiet: bool,
    },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::RunTask {
            policy,
            task,
            provider,
            keep_worktree,
            out_dir,
            quiet,
        } => {
            let opts = RunOptions {
                provider: match provider {
                    None => ProviderChoice::Auto,
                    Some(Provider::Scripted) => ProviderChoice::Scripted,
                    Some(Provider::Openai) => ProviderChoice::OpenAi,
                },
                keep_worktree,
                out_dir,
                ..Default::default()
            };
            match run_task(&policy, &task, opts).await {
                Ok(report) => {
                    if !quiet {
                        if let Ok(t) = std::fs::read_to_string(&report.trace_path) {
                            print!("{t}");
                        }
                    }
                    eprintln!(
                        "run {} ({}): {}",
                        report.run_id,
                        report.provider,
                        if report.ok() { "ok" } else { "FAILED" }
                    );
                    if let Some(r) = &report.result {
                        eprintln!(
                            "rounds={} tool_calls={} tool_errors={} contract_violations={}",
                            r.rounds, r.tool_calls, r.tool_errors, r.contract_violations
                        );
                        eprintln!("final: {}", r.final_message);
                    }
                    if let Some(e) = &report.error {
                        eprintln!("error: {e}");
                    }
                    eprintln!("trace: {}", report.trace_path.display());
                    if report.worktree_kept {
                        eprintln!(
                            "worktree kept: {} (branch {})",
                            report.worktree.display(),
                            report.branch
                        );
                    }
                    if report.ok() {
                        std::process::ExitCode::SUCCESS
                    } else {
                        std::process::ExitCode::FAILURE
                    }
                }
                Err(e) => {
                    eprintln!("error: {e:#}");
                    std::process::ExitCode::from(2)
                }
            }
        }
    }
}
