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
use crate::run::worktree::{
    in_a_task_worktree, sanitize_id, Worktree, WorktreeError, BRANCH_PREFIX,
};

/// What [`recover`] did.
#[derive(Debug)]
pub struct Recovered {
    pub branch: String,
    pub worktree: PathBuf,
    pub settlement: Settlement,
}

/// Commits the work left in `which` (a worktree directory, or a run id
/// under the `.worktrees` of the repository holding `dir`); keeps the
/// directory too with `keep_worktree`.
pub fn recover(dir: &Path, which: &str, keep_worktree: bool) -> Result<Recovered, WorktreeError> {
    let mut wt = Worktree::left_behind(&worktree_named(dir, which)?)?;
    let scratch = tempfile::tempdir()?;
    let how = Disposition::Recover {
        keep_dir: keep_worktree,
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

/// The directory `which` names: a directory as it is (relative to
/// `dir`), or a run id's under the repository holding `dir`, found from
/// `dir` only when `dir` is in no task's worktree: in one, a tool's
/// `.git` would be taken for the repository (a helper's find: `recover .`
/// in a worktree committed the work into a repository the tool made).
fn worktree_named(dir: &Path, which: &str) -> Result<PathBuf, WorktreeError> {
    let dir = std::fs::canonicalize(dir)?;
    // A bare run id is a run's, never a name in the current directory: in
    // a worktree, a tool's link by that name led to a tree it made.
    let run_id = sanitize_id(which) == which;
    if run_id && in_a_task_worktree(&dir) {
        return Err(WorktreeError::InsideATask(dir));
    }
    let named = dir.join(which);
    if !run_id && named.is_dir() {
        return Ok(named);
    }
    let repo = Worktree::repo_root(&dir)?;
    let path = repo.join(WORKTREES_DIR).join(sanitize_id(which));
    match path.is_dir() {
        true => Ok(path),
        false => Err(WorktreeError::NotATask(path)),
    }
}
