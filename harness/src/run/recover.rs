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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::git::Git;
    use crate::run::keep::WorkOutcome;
    use crate::run::worktree::BranchFate;

    /// The remains of a removal cut short are never committed: not after a
    /// commit (the branch kept), and not after a run with nothing to keep or
    /// a discarded one (the branch deleted, as that run would have done).
    /// Those were unmarked, and `recover` committed the half-removed tree
    /// as the run's work: deletions, and every lifted directory renamed to
    /// `.rm-N/` (a helper's find).
    #[test]
    fn remains_are_never_committed() {
        for fate in [BranchFate::Kept, BranchFate::Deleted] {
            let d = tempfile::tempdir().unwrap();
            crate::run::worktree::tests::init_repo(d.path());
            let root = d.path().join(WORKTREES_DIR);
            let mut wt = Worktree::create(d.path(), &root, "cut", "HEAD").unwrap();
            let path = wt.path.clone();
            wt.mark_settled(fate);
            std::fs::remove_file(path.join("README.md")).unwrap();
            std::fs::create_dir(path.join(".rm-1")).unwrap();
            std::fs::write(path.join(".rm-1/lifted.txt"), "x").unwrap();
            wt.keep();
            drop(wt);
            let got = recover(d.path(), "cut", false).unwrap();
            assert_eq!(got.settlement.work, WorkOutcome::NoChanges, "{fate:?}");
            assert!(!path.exists(), "{fate:?}: the remains are left");
            let git = |args: &[&str]| Git::repo(&d.path().join(".git")).run(args).unwrap();
            let branches = git(&["branch", "--list", "agent/cut"]);
            assert_eq!(branches.is_empty(), fate == BranchFate::Deleted, "{fate:?}");
            assert_eq!(got.settlement.branch_kept, fate == BranchFate::Kept);
        }
    }

    /// Kept by `recover --keep-worktree`, remains are a kept worktree like
    /// any other: the remover's `.rm-N` directories are gone, and what the
    /// user does there next is work a later `recover` commits (it was
    /// removed unseen; a helper's find).
    #[test]
    fn kept_remains_are_a_worktree_like_any_kept_one() {
        let d = tempfile::tempdir().unwrap();
        crate::run::worktree::tests::init_repo(d.path());
        let root = d.path().join(WORKTREES_DIR);
        let mut wt = Worktree::create(d.path(), &root, "kept", "HEAD").unwrap();
        let path = wt.path.clone();
        wt.mark_settled(BranchFate::Kept);
        std::fs::create_dir(path.join(".rm-3")).unwrap();
        std::fs::write(path.join(".rm-3/lifted.txt"), "x").unwrap();
        wt.keep();
        drop(wt);
        let got = recover(d.path(), "kept", true).unwrap();
        assert_eq!(got.settlement.work, WorkOutcome::NoChanges);
        assert!(path.is_dir() && !path.join(".rm-3").exists());
        std::fs::write(path.join("USER_WORK.md"), "mine\n").unwrap();
        let again = recover(d.path(), "kept", false).unwrap();
        let WorkOutcome::Committed(c) = &again.settlement.work else {
            panic!("the user's work was not committed: {:?}", again.settlement)
        };
        assert!(c.diffstat.contains("USER_WORK.md"), "{}", c.diffstat);
        assert!(!path.exists());
    }
}
