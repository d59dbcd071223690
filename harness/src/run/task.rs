//! A whole task run: worktree → MCP session → agent loop → ordered shutdown.
//!
//! Shutdown order (also on error or interrupt): stop rounds, close MCP
//! connections (reverse order), persist the JSONL trace to the runtime dir,
//! commit the work on `agent/<run-id>` and remove the worktree directory
//! (see [`crate::run::keep`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde::Deserialize;
use serde_json::json;

use crate::mcp::adapter::ArtifactStore;
use crate::mcp::connection::{ChildConnector, Connector};
use crate::mcp::http_transport::HttpConnector;
use crate::provider::openai::OpenAiProvider;
use crate::provider::scripted::{Script, ScriptedProvider};
use crate::provider::ChatProvider;
use crate::run::agent::{run_loop_until, AgentError, LoopResult};
use crate::run::interrupt::Stop;
use crate::run::keep::{settle, Disposition, Settlement, WorkOutcome};
use crate::run::policy::{Endpoint, Placeholders, Policy};
use crate::run::session::ToolSession;
use crate::run::trace::{Trace, TraceObserver};
use crate::run::worktree::{sanitize_id, Worktree};
use crate::tools::pipeline::{Approver, NonInteractiveApprover, ToolPipeline};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskFile {
    pub id: String,
    #[serde(default = "default_base")]
    pub base_ref: String,
    pub prompt: String,
    /// Overrides the policy's `max_rounds`.
    #[serde(default)]
    pub max_rounds: Option<usize>,
    /// Used by the scripted provider.
    #[serde(default)]
    pub scripted: Option<Script>,
}

fn default_base() -> String {
    "HEAD".into()
}

impl TaskFile {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read task {}", path.display()))?;
        let task: Self =
            toml::from_str(&text).with_context(|| format!("parse task {}", path.display()))?;
        task.validate()
            .with_context(|| format!("invalid task {}", path.display()))?;
        Ok(task)
    }

    fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.id.trim().is_empty(), "`id` is empty");
        anyhow::ensure!(!self.base_ref.trim().is_empty(), "`base_ref` is empty");
        anyhow::ensure!(self.max_rounds != Some(0), "`max_rounds` must be > 0");
        Ok(())
    }
}

/// A run id unique within this process (and, through pid + time, across processes).
fn new_run_id(task_id: &str) -> String {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    format!(
        "{}-{stamp}-{}-{seq}",
        sanitize_id(task_id),
        std::process::id()
    )
}

/// Run blocking work (git, file writes) off the async worker threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .context("blocking task failed")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProviderChoice {
    /// OpenAI when `OPENAI_BASE_URL` is set, else scripted.
    #[default]
    Auto,
    Scripted,
    OpenAi,
}

#[derive(Default)]
pub struct RunOptions {
    pub provider: ProviderChoice,
    /// Keep the worktree directory too (the work is committed either way).
    pub keep_worktree: bool,
    /// Drop the work on purpose: no commit, directory and branch removed.
    pub discard: bool,
    /// Ends the run early (Ctrl-C); the work is still committed.
    pub stop: Option<Stop>,
    /// Decides `approval = "ask"` (default: the policy's `ask_default`).
    pub approver: Option<Arc<dyn Approver>>,
    /// Sees every trace event as it happens (human progress).
    pub observer: Option<TraceObserver>,
    /// Runtime dir root (trace, artifacts, HOME, server stderr). Default:
    /// `<repo>/.cache/agent-runs`.
    pub out_dir: Option<PathBuf>,
    /// Repo to branch from. Default: the git top level of the current dir.
    pub repo: Option<PathBuf>,
    /// Default: `<repo>/.worktrees`.
    pub worktrees_root: Option<PathBuf>,
    /// Replace the policy's child-process connectors (tests / embedding).
    pub connectors: Option<HashMap<String, Arc<dyn Connector>>>,
    /// Use this provider instead of choosing one.
    pub provider_override: Option<Arc<dyn ChatProvider>>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct RunReport {
    pub run_id: String,
    pub provider: String,
    pub worktree: PathBuf,
    pub branch: String,
    pub worktree_kept: bool,
    pub runtime_dir: PathBuf,
    pub trace_path: PathBuf,
    pub result: Option<LoopResult>,
    pub error: Option<String>,
    /// The run was stopped by [`RunOptions::stop`].
    pub interrupted: bool,
    /// What happened to the work (commit, no changes, discarded).
    pub work: Settlement,
}

impl RunReport {
    /// The run ended as asked and its work is kept: a run whose commit
    /// failed is not ok, whatever the model did (it exited 0).
    pub fn ok(&self) -> bool {
        self.error.is_none() && !matches!(self.work.work, WorkOutcome::NotSaved { .. })
    }
}

fn choose_provider(
    choice: ProviderChoice,
    task: &TaskFile,
) -> anyhow::Result<Arc<dyn ChatProvider>> {
    let use_openai = match choice {
        ProviderChoice::OpenAi => true,
        ProviderChoice::Scripted => false,
        ProviderChoice::Auto => std::env::var("OPENAI_BASE_URL").is_ok_and(|v| !v.is_empty()),
    };
    if use_openai {
        return Ok(Arc::new(OpenAiProvider::from_env()?));
    }
    let script = task
        .scripted
        .clone()
        .context("task has no [scripted] section (needed by the scripted provider)")?;
    Ok(Arc::new(ScriptedProvider::new(script)))
}

/// Run one task given policy and task paths. Errors before the worktree exists
/// are returned as `Err`; later failures are in `RunReport::error` (after cleanup).
pub async fn run_task(
    policy_path: &Path,
    task_path: &Path,
    opts: RunOptions,
) -> anyhow::Result<RunReport> {
    let policy = Policy::load(policy_path)?;
    let task = TaskFile::load(task_path)?;
    let repo = match &opts.repo {
        Some(r) => std::fs::canonicalize(r).with_context(|| format!("repo {}", r.display()))?,
        None => Worktree::repo_root(&std::env::current_dir().context("current dir")?)?,
    };
    crate::run::repo_dirs::check(&repo)?;
    let provider = match &opts.provider_override {
        Some(p) => p.clone(),
        None => choose_provider(opts.provider, &task)?,
    };
    let run_id = new_run_id(&task.id);
    let runtime_dir = opts
        .out_dir
        .clone()
        .unwrap_or_else(|| repo.join(".cache/agent-runs"))
        .join(&run_id);
    let runtime_dir = std::fs::create_dir_all(&runtime_dir)
        .and_then(|()| std::fs::canonicalize(&runtime_dir))
        .with_context(|| format!("runtime dir {}", runtime_dir.display()))?;
    let trace = Arc::new(Trace::new());
    if let Some(o) = &opts.observer {
        trace.observe(o.clone());
    }
    let stop = opts.stop.clone().unwrap_or_else(Stop::never);
    let wt_root = opts
        .worktrees_root
        .clone()
        .unwrap_or_else(|| repo.join(crate::run::repo_dirs::WORKTREES_DIR));
    let mut worktree = {
        let (repo, run_id, base_ref) = (repo.clone(), run_id.clone(), task.base_ref.clone());
        blocking(move || Worktree::create(&repo, &wt_root, &run_id, &base_ref)).await??
    };
    crate::run::interrupt::before_exit_now(worktree.gitfile_keeper());
    trace.record(
        "task_start",
        json!({"run_id": run_id, "task": task.id, "provider": provider.name(),
               "worktree": worktree.path, "branch": worktree.branch, "base_ref": task.base_ref,
               "runtime_dir": runtime_dir}),
    );

    let max_rounds = task.max_rounds.unwrap_or(policy.max_rounds);
    let ph = Placeholders {
        worktree: worktree.path.clone(),
        runtime_dir: runtime_dir.clone(),
        repo: repo.clone(),
    };
    let approver: Arc<dyn Approver> = match &opts.approver {
        Some(a) => a.clone(),
        None => Arc::new(NonInteractiveApprover {
            answer: policy.approver.ask_default,
        }),
    };
    let base = ToolPipeline::new(approver);

    // Session + loop; everything after this point is cleaned up in order.
    let mut session: Option<ToolSession> = None;
    let outcome: anyhow::Result<LoopResult> = async {
        let connectors = match opts.connectors {
            Some(c) => c,
            None => {
                let mut m: HashMap<String, Arc<dyn Connector>> = HashMap::new();
                for sp in &policy.servers {
                    let connector: Arc<dyn Connector> = match sp.endpoint(&ph)? {
                        Endpoint::Command(spec) => {
                            trace.record("server_spawn", json!({"server": sp.id, "program": spec.program,
                                "args": spec.args, "cwd": spec.cwd, "env_keys": spec.env.keys().collect::<Vec<_>>()}));
                            Arc::new(ChildConnector {
                                server_id: sp.id.clone(),
                                spec,
                                stderr_log: Some(runtime_dir.join(format!("{}.stderr.log", sp.id))),
                            })
                        }
                        Endpoint::Http(spec) => {
                            // The env var's name only; its value never reaches the trace.
                            trace.record("server_http", json!({"server": sp.id, "url": spec.url,
                                "bearer_token_env": spec.bearer_token_env}));
                            Arc::new(HttpConnector { server_id: sp.id.clone(), spec })
                        }
                    };
                    m.insert(sp.id.clone(), connector);
                }
                m
            }
        };
        let artifacts = Arc::new(ArtifactStore::new(runtime_dir.join("artifacts")));
        let start = ToolSession::start(policy.clone(), connectors, &base, &run_id, artifacts, trace.clone());
        let s = tokio::select! {
            s = start => s?,
            _ = stop.fired() => {
                trace.record("interrupted", json!({}));
                return Err(AgentError::Interrupted.into());
            }
        };
        let s = session.insert(s);
        Ok(run_loop_until(s, provider.as_ref(), &task.prompt, max_rounds, &trace, &stop).await?)
    }
    .await;

    // 1. rounds stopped (loop returned). 2. close MCP.
    if let Some(mut s) = session.take() {
        s.shutdown().await;
    }
    let error = outcome.as_ref().err().map(|e| format!("{e:#}"));
    trace.record("task_end", json!({"ok": error.is_none(), "error": error}));
    // 3. persist trace.
    let trace_path = runtime_dir.join("trace.jsonl");
    let persist = {
        let (trace, path) = (trace.clone(), trace_path.clone());
        blocking(move || trace.write_jsonl(&path)).await?
    };
    // 4. commit the work, 5. remove the worktree directory.
    let how = if opts.discard {
        Disposition::Discard
    } else if opts.keep_worktree {
        Disposition::CommitKeepDir
    } else {
        Disposition::Commit
    };
    let message = format!(
        "wasm-agent: task {}, run {run_id}\n\n{}",
        task.id,
        commit_body(&outcome, stop.is_set())
    );
    let (worktree, work) = {
        let scratch = runtime_dir.clone();
        blocking(move || {
            let work = settle(&mut worktree, how, &message, &scratch);
            (worktree, work)
        })
        .await?
    };
    persist.with_context(|| format!("write trace {}", trace_path.display()))?;
    for p in &work.problems {
        tracing::warn!("worktree cleanup: {p}");
    }
    let cleanup_error = (!work.problems.is_empty())
        .then(|| format!("worktree cleanup: {}", work.problems.join("; ")));
    Ok(RunReport {
        run_id,
        provider: provider.name().to_string(),
        worktree: worktree.path.clone(),
        branch: worktree.branch.clone(),
        worktree_kept: work.worktree_kept,
        runtime_dir,
        trace_path,
        interrupted: stop.is_set(),
        result: outcome.ok(),
        error: error.or(cleanup_error),
        work,
    })
}

/// The commit message body: how the run ended.
fn commit_body(outcome: &anyhow::Result<LoopResult>, interrupted: bool) -> String {
    match outcome {
        _ if interrupted => "The run was interrupted; this is the work done until then.".into(),
        Ok(r) => format!(
            "Finished after {} rounds, {} tool calls.\n\nFinal answer:\n{}",
            r.rounds, r.tool_calls, r.final_message
        ),
        Err(e) => match provider_status(e) {
            // Its answer stays out of the history: a provider or gateway
            // that echoes the request put the API key in the commit (a
            // helper's find). The run's trace has it.
            Some(status) => format!(
                "The run failed: the provider answered HTTP {status} (its answer is in the run's trace)."
            ),
            None => format!("The run failed: {e:#}"),
        },
    }
}

/// The HTTP status of a provider's refusal anywhere in `e`'s chain.
fn provider_status(e: &anyhow::Error) -> Option<u16> {
    use crate::provider::ProviderError;
    use crate::run::agent::AgentError;
    let status = |p: &ProviderError| match p {
        ProviderError::Status { status, .. } => Some(*status),
        _ => None,
    };
    e.chain()
        .find_map(|c| match c.downcast_ref::<AgentError>() {
            Some(AgentError::Provider(p)) => status(p),
            _ => c.downcast_ref::<ProviderError>().and_then(status),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A provider's refusal is named by its status in the commit message,
    /// never quoted: it may echo the request's credentials.
    #[test]
    fn a_provider_refusal_stays_out_of_the_commit_message() {
        let refusal = crate::provider::ProviderError::Status {
            status: 401,
            body: "bad key: Bearer sk-SECRET".into(),
        };
        let failed: anyhow::Result<LoopResult> =
            Err(crate::run::agent::AgentError::from(refusal).into());
        let body = commit_body(&failed, false);
        assert!(
            body.contains("HTTP 401") && !body.contains("sk-SECRET"),
            "{body}"
        );
    }

    #[test]
    fn run_ids_are_unique_within_a_process() {
        // Two runs of the same task started in the same millisecond must not
        // share a worktree, branch or runtime dir.
        let ids: std::collections::HashSet<String> = (0..50).map(|_| new_run_id("t")).collect();
        assert_eq!(ids.len(), 50);
    }

    #[test]
    fn task_file_errors_name_the_file_and_field() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("bad-task.toml");
        std::fs::write(&path, "id = \"x\"\nprompt = \"p\"\nmax_rounds = 0\n").unwrap();
        let msg = format!("{:#}", TaskFile::load(&path).unwrap_err());
        assert!(
            msg.contains("bad-task.toml") && msg.contains("max_rounds"),
            "{msg}"
        );
        std::fs::write(&path, "id = \"x\"\n").unwrap();
        let msg = format!("{:#}", TaskFile::load(&path).unwrap_err());
        assert!(
            msg.contains("bad-task.toml") && msg.contains("prompt"),
            "{msg}"
        );
    }
}
