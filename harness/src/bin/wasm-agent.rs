//! `wasm-agent run-task --policy P --task T [--provider scripted|openai]
//! [--keep-worktree | --discard] [--out-dir DIR] [--json] [--quiet]`
//! `wasm-agent recover WORKTREE-OR-RUN-ID [--keep-worktree]`

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use wasm_mcp_harness::run::approve_tty::PromptApprover;
use wasm_mcp_harness::run::interrupt::{on_signals, stop_pair, EXIT_INTERRUPTED};
use wasm_mcp_harness::run::keep::{Settlement, WorkOutcome};
use wasm_mcp_harness::run::progress;
use wasm_mcp_harness::run::recover::recover;
use wasm_mcp_harness::run::task::ProviderChoice;
use wasm_mcp_harness::{run_task, RunOptions, RunReport};

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
    /// Create a worktree, run the agent loop on it, commit the work on
    /// `agent/<run-id>` and remove the worktree directory.
    RunTask {
        #[arg(long, default_value = "policy/default.toml")]
        policy: PathBuf,
        #[arg(long)]
        task: PathBuf,
        /// Default: openai if OPENAI_BASE_URL is set, else scripted.
        #[arg(long, value_enum)]
        provider: Option<Provider>,
        /// Keep the worktree directory as well as the branch.
        #[arg(long, conflicts_with = "discard")]
        keep_worktree: bool,
        /// Drop the agent's work: no commit, branch and worktree removed.
        #[arg(long)]
        discard: bool,
        /// Runtime dir root (trace.jsonl, artifacts, server stderr). Default: <repo>/.cache/agent-runs
        #[arg(long)]
        out_dir: Option<PathBuf>,
        /// Print the trace as JSON lines on stdout at the end of the run.
        #[arg(long)]
        json: bool,
        /// No progress lines on stderr, only the summary.
        #[arg(long)]
        quiet: bool,
    },
    /// Save the work a run left in its worktree when it did not finish
    /// (killed with `kill -9`, out of memory, the machine went down):
    /// commit it on the run's `agent/<run-id>` branch as the run would
    /// have, then remove the worktree directory. Run it in the repository.
    Recover {
        /// The worktree directory, or the run id (`.worktrees/<run-id>`).
        worktree: String,
        /// Keep the worktree directory as well as the branch.
        #[arg(long)]
        keep_worktree: bool,
    },
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::RunTask {
            policy,
            task,
            provider,
            keep_worktree,
            discard,
            out_dir,
            json,
            quiet,
        } => {
            let (trigger, stop) = stop_pair();
            if let Err(e) = on_signals(trigger, || {
                eprintln!(
                    "interrupted: stopping the run and saving its work (Ctrl-C again to exit now)"
                )
            }) {
                eprintln!("warning: cannot listen for Ctrl-C: {e}");
            }
            // A person at a terminal answers `approval = "ask"`; otherwise ask_default.
            let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
            let opts = RunOptions {
                provider: match provider {
                    None => ProviderChoice::Auto,
                    Some(Provider::Scripted) => ProviderChoice::Scripted,
                    Some(Provider::Openai) => ProviderChoice::OpenAi,
                },
                keep_worktree,
                discard,
                out_dir,
                approver: interactive
                    .then(|| Arc::new(PromptApprover::stdio().with_stop(stop.clone())) as _),
                stop: Some(stop),
                observer: (!quiet).then(|| progress::printer(Box::new(std::io::stderr()))),
                ..Default::default()
            };
            match run_task(&policy, &task, opts).await {
                Ok(report) => {
                    if json {
                        if let Ok(t) = std::fs::read_to_string(&report.trace_path) {
                            print!("{t}");
                        }
                    }
                    summarize(&report, !quiet);
                    if report.interrupted {
                        EXIT_INTERRUPTED.into()
                    } else if report.ok() {
                        0
                    } else {
                        1
                    }
                }
                Err(e) => {
                    eprintln!("error: {}", safe_lines(&format!("{e:#}")));
                    2
                }
            }
        }
        Cmd::Recover {
            worktree,
            keep_worktree,
        } => {
            let here = std::env::current_dir().unwrap_or_else(|_| ".".into());
            match recover(&here, &worktree, keep_worktree) {
                Ok(r) => {
                    summarize_work(&r.settlement, &r.branch, &r.worktree);
                    match r.settlement.work {
                        WorkOutcome::NotSaved { .. } => 1,
                        _ => 0,
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    2
                }
            }
        }
    };
    // Exit now: a prompt may still be blocked reading the terminal.
    std::process::exit(code)
}

/// The closing summary on stderr; the error is left out when the progress
/// lines (`progress_shown`) already ended with it.
fn summarize(report: &RunReport, progress_shown: bool) {
    let status = match (report.interrupted, report.ok()) {
        (true, _) => "INTERRUPTED",
        (false, true) => "ok",
        (false, false) => "FAILED",
    };
    eprintln!("run {} ({}): {status}", report.run_id, report.provider);
    if let Some(r) = &report.result {
        eprintln!(
            "rounds={} tool_calls={} tool_errors={} contract_violations={}",
            r.rounds, r.tool_calls, r.tool_errors, r.contract_violations
        );
        eprintln!("final: {}", safe_lines(&r.final_message));
    }
    if let Some(e) = report.error.as_ref().filter(|_| !progress_shown) {
        eprintln!("error: {}", safe_lines(e));
    }
    eprintln!("trace: {}", report.trace_path.display());
    summarize_work(&report.work, &report.branch, &report.worktree);
}

/// What became of a run's work: its commit, or why there is none, and
/// the worktree when it is kept.
fn summarize_work(work: &Settlement, branch: &str, worktree: &Path) {
    match &work.work {
        WorkOutcome::Committed(c) => {
            eprintln!(
                "work committed on branch {} (commit {})",
                c.branch, c.commit
            );
            if !c.diffstat.is_empty() {
                eprintln!("{}", c.diffstat);
            }
            for s in &c.skipped {
                eprintln!("not committed: {}", safe_lines(s));
            }
            if c.files_left_out {
                eprintln!("some of the run's files are not in the commit: its worktree is kept, so nothing is lost");
            }
            eprintln!(
                "look at it with: git diff {}...{}",
                short(&c.base),
                c.branch
            );
        }
        WorkOutcome::NoChanges if work.branch_kept => {
            eprintln!("no changes: nothing new to commit, branch {branch} kept as it was")
        }
        WorkOutcome::NoChanges => {
            eprintln!("no changes: nothing committed, branch {branch} deleted")
        }
        WorkOutcome::Discarded => {
            eprintln!("work discarded (--discard): branch and worktree removed")
        }
        WorkOutcome::NotSaved { error } => eprintln!("work NOT committed: {}", safe_lines(error)),
    }
    if work.worktree_kept {
        eprintln!("worktree kept: {} (branch {branch})", worktree.display());
        for s in &work.set_aside {
            eprintln!("set aside in it: {s}");
        }
    }
}

/// Text from the model, a server or a tool, line by line made safe for the
/// terminal (no escape sequences act).
fn safe_lines(s: &str) -> String {
    s.lines()
        .map(progress::terminal_safe)
        .collect::<Vec<_>>()
        .join("\n")
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
