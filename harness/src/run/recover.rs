//! `wasm-agent recover`: the work a run left in its worktree when it did
//! not finish (`kill -9`, an out-of-memory kill, the machine going down)
//! is committed on the run's `agent/<run-id>` branch as the run would
//! have committed it ([`crate::run::keep::settle`]: the same staging, the
//! same rules on what a tool wrote), then the worktree is removed.
//!
//! The worktree is found by the main repository's record of it, never by
//! its `.git` ([`Worktree::left_behind`]); one a live run still works in
//! is refused.

use std::path::{Path, PathBuf};

use crate::run::keep::{settle, Disposition, Settlement};
use crate::run::repo_dirs::WORKTREES_DIR;
use crate::run::worktree::{sanitize_id, Worktree, WorktreeError, BRANCH_PREFIX};

/// What [`recover`] did.
#[derive(Debug)]
pub struct Recovered {
    pub branch: String,
    pub worktree: PathBuf,
    pub settlement: Settlement,
}

/// Commits the work left in `which` (a worktree directory, or a run id
/// under the repository's `.worktrees`) of the repository holding `dir`;
/// keeps the directory too with `keep_worktree`.
pub fn recover(dir: &Path, which: &str, keep_worktree: bool) -> Result<Recovered, WorktreeError> {
    let repo = Worktree::repo_root(dir)?;
    let named = Path::new(which);
    let path = match named.is_dir() {
        true => named.to_path_buf(),
        false => repo.join(WORKTREES_DIR).join(sanitize_id(which)),
    };
    if !path.is_dir() {
        return Err(WorktreeError::NotATask(path));
    }
    let mut wt = Worktree::left_behind(&repo, &path)?;
    let scratch = tempfile::tempdir()?;
    let how = match keep_worktree {
        true => Disposition::CommitKeepDir,
        false => Disposition::Commit,
    };
    let message = format!(
        "wasm-agent: the work left by run {} (saved by `wasm-agent recover`: the run did not finish)",
        wt.branch.trim_start_matches(BRANCH_PREFIX)
    );
    let settlement = settle(&mut wt, how, &message, scratch.path());
    Ok(Recovered {
        branch: wt.branch.clone(),
        worktree: wt.path.clone(),
        settlement,
    })
}
