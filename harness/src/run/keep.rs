//! The end of a task's worktree: commit everything on `agent/<run-id>` and
//! keep the branch, or drop the work on purpose.
//!
//! The commit is built with plumbing only (`read-tree`, `add -u`,
//! `update-index`, `write-tree`, `commit-tree`, `update-ref`) through
//! [`crate::run::git::Git`] with a private index file: no hooks can run
//! (none is invoked, and `core.hooksPath` is `/dev/null`), and no config,
//! `.git`, `.gitignore` or `.gitattributes` written in the worktree steers
//! it ([`crate::run::stage`]). Nested repositories a tool created are
//! committed as plain files, never as gitlinks (a gitlink would make a later
//! `git status` run git inside the tool's repo).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::run::stage::{
    mark_absent_in_sparse_checkout, set_aside_git_dirs, skip_worktree_entries, stage_all,
};
use crate::run::worktree::{BranchFate, Worktree, WorktreeError};

/// What happens to the work at the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Disposition {
    /// Commit on the branch, keep the branch, remove the directory.
    #[default]
    Commit,
    /// Commit, keep the branch and the directory (its `.git` restored).
    CommitKeepDir,
    /// Remove the directory and the branch.
    Discard,
    /// `wasm-agent recover`: commit, and keep the branch even with nothing
    /// new to commit (it may hold the run's commit already: a run or a
    /// `recover` killed after committing); keep the directory if asked.
    Recover { keep_dir: bool },
}

/// A commit holding the run's work.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KeptCommit {
    pub branch: String,
    pub commit: String,
    pub base: String,
    /// `git diff --stat <base> <commit>`.
    pub diffstat: String,
    /// Paths left out (nested repositories' histories, unreadable files,
    /// names git refuses, files inside submodule paths).
    pub skipped: Vec<String>,
    /// Some of the run's files are not in the commit: the worktree is kept
    /// so that nothing is lost.
    pub files_left_out: bool,
}

/// How the run's work ended.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "work", rename_all = "snake_case")]
pub enum WorkOutcome {
    Committed(KeptCommit),
    /// Nothing changed: no commit, the branch is deleted (unless the directory is kept).
    NoChanges,
    Discarded,
    /// The commit failed; the worktree directory was kept so nothing is lost.
    NotSaved {
        error: String,
    },
}

/// Everything [`settle`] did, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct Settlement {
    pub work: WorkOutcome,
    /// The directory is still there (on purpose, or because removal failed).
    pub worktree_kept: bool,
    pub branch_kept: bool,
    /// Cleanup problems (never fatal).
    pub problems: Vec<String>,
    /// In a kept worktree: the `.git`s below its root that were set aside.
    pub set_aside: Vec<String>,
}

/// Commit (or discard) the work, then remove the directory as `how` says.
/// Never panics and never aborts half-way: problems are collected.
pub fn settle(wt: &mut Worktree, how: Disposition, message: &str, scratch: &Path) -> Settlement {
    let mut problems = Vec::new();
    // The remains of a removal cut short after the work was settled
    // (`recover`): nothing to commit again (it would record the missing
    // files as deleted), and the branch as the run left it.
    let remains = wt.settled();
    let work = match how {
        Disposition::Discard => WorkOutcome::Discarded,
        _ if remains.is_some() => WorkOutcome::NoChanges,
        _ => match commit_all(wt, message, scratch) {
            Ok(Some(c)) => WorkOutcome::Committed(c),
            Ok(None) => WorkOutcome::NoChanges,
            Err(e) => WorkOutcome::NotSaved {
                error: e.to_string(),
            },
        },
    };
    let keep_dir = matches!(
        how,
        Disposition::CommitKeepDir | Disposition::Recover { keep_dir: true }
    ) || matches!(&work, WorkOutcome::NotSaved { .. })
        || matches!(&work, WorkOutcome::Committed(c) if c.files_left_out);
    let keep_branch = match remains {
        Some(fate) => keep_dir || fate == BranchFate::Kept,
        None => {
            keep_dir
                || matches!(work, WorkOutcome::Committed(_))
                || matches!(how, Disposition::Recover { .. })
        }
    };
    let mut worktree_kept = keep_dir;
    let mut set_aside = Vec::new();
    if keep_dir {
        if let Err(e) = wt.restore_dotgit() {
            problems.push(format!("restore .git: {e}"));
        }
        set_aside = set_aside_git_dirs(&wt.git(), &wt.path);
        // The kept checkout's index follows the branch to its commit.
        let commit = match &work {
            WorkOutcome::Committed(c) => Some(c.commit.clone()),
            _ if remains.is_some() => Some(format!("refs/heads/{}", wt.branch)),
            _ => None,
        };
        if let Some(commit) = commit {
            let g = wt.git();
            let marked = skip_worktree_entries(&g).and_then(|was| {
                g.run(&["read-tree", &commit])?;
                mark_absent_in_sparse_checkout(&g, &was, scratch)
            });
            if let Err(e) = marked {
                problems.push(format!("update index: {e}"));
            }
        }
        if remains.is_some() {
            // Kept, they are a worktree like any kept one: what the user
            // does there next is work a later `recover` commits (it was
            // removed unseen; a helper's find). The remover's `.rm-N`
            // directories hold files of the work committed already.
            remove_remover_dirs(wt, &mut problems);
            wt.clear_settled();
        }
    } else {
        // Removing a large tree takes a while: killed during it, the
        // worktree's half left is no work to commit (`recover`).
        wt.mark_settled(match keep_branch {
            true => BranchFate::Kept,
            false => BranchFate::Deleted,
        });
        if let Err(e) = wt.remove_dir() {
            problems.push(e.to_string());
            worktree_kept = wt.path.exists();
        }
    }
    if !keep_branch {
        if let Err(e) = wt.delete_branch() {
            problems.push(e.to_string());
        }
    }
    wt.settle();
    Settlement {
        work,
        worktree_kept,
        branch_kept: keep_branch,
        problems,
        set_aside,
    }
}

/// Removes the `.rm-<n>` directories [`crate::run::cleanup::remove_tree`]
/// made at the root of `wt` before it was cut short: those that hold
/// nothing its index (the branch's commit) tracks.
fn remove_remover_dirs(wt: &Worktree, problems: &mut Vec<String>) {
    let Ok(read) = std::fs::read_dir(&wt.path) else {
        return;
    };
    for entry in read.flatten() {
        let name = entry.file_name();
        let pathspec = format!(":(literal){}", name.to_string_lossy());
        let tracked = || {
            wt.git()
                .run(&["ls-files", "--", &pathspec])
                .map_or(true, |listed| !listed.is_empty())
        };
        if crate::run::cleanup::is_remover_dir(&name) && !tracked() {
            let report = crate::run::cleanup::remove_tree(&entry.path());
            if !report.ok() {
                problems.push(report.failures.join("; "));
            }
        }
    }
}

/// Commit every change in the worktree (modified, new, deleted; not ignored)
/// on its branch. `None` when nothing changed.
pub fn commit_all(
    wt: &Worktree,
    message: &str,
    scratch: &Path,
) -> Result<Option<KeptCommit>, WorktreeError> {
    let main = &wt.git;
    let branch_ref = format!("refs/heads/{}", wt.branch);
    let head = main.run(&["rev-parse", "--verify", &format!("{branch_ref}^{{commit}}")])?;
    std::fs::create_dir_all(scratch)?;
    let index = IndexFile(scratch.join(format!("keep-{}.index", std::process::id())));
    let _ = std::fs::remove_file(&index.0);
    let g = wt.git().with_index(&index.0);
    let left_out = stage_all(&g, &wt.path, &head, scratch)?;
    let tree = g.run(&["write-tree"])?;
    let base_tree = main.run(&["rev-parse", &format!("{head}^{{tree}}")])?;
    if tree == base_tree {
        if left_out.files {
            // Nothing to commit, and files that could not be: kept.
            return Err(WorktreeError::NotCommittable(left_out.lines.join("; ")));
        }
        return Ok(None);
    }
    let message = commit_message(message);
    let commit = main.run(&["commit-tree", &tree, "-p", &head, "-m", &message])?;
    main.run(&["update-ref", &branch_ref, &commit, &head])?;
    let diffstat = main.run(&[
        "diff",
        "--stat",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        &wt.base_commit,
        &commit,
    ])?;
    Ok(Some(KeptCommit {
        branch: wt.branch.clone(),
        commit,
        base: wt.base_commit.clone(),
        diffstat,
        skipped: left_out.lines,
        files_left_out: left_out.files,
    }))
}

/// Longest commit message, in bytes. The message holds the model's final
/// answer, which the model chooses: one of 200,000 bytes was past the 128
/// KiB a single argument may take (`E2BIG`) and one with a NUL cannot be an
/// argument at all, and either way the commit failed and the run's work
/// was not committed (a helper's find). The run's trace keeps it whole.
pub const MAX_COMMIT_MESSAGE_BYTES: usize = 32 << 10;

/// `message` as a commit can take it: NULs replaced, at most
/// [`MAX_COMMIT_MESSAGE_BYTES`].
fn commit_message(message: &str) -> String {
    let text = message.replace('\0', "\u{fffd}");
    let note = format!(
        "\n[message cut at {MAX_COMMIT_MESSAGE_BYTES} of {} bytes: the run's trace has it whole]",
        text.len()
    );
    wasm_mcp_protocol::text::truncate_marked(text, MAX_COMMIT_MESSAGE_BYTES, &note)
}

/// A temporary index file, deleted on drop.
struct IndexFile(PathBuf);

impl Drop for IndexFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_final_answer_makes_a_commit_message() {
        assert_eq!(commit_message("done"), "done");
        assert_eq!(commit_message("a\0b"), "a\u{fffd}b");
        let long = "Z".repeat(200_000);
        let m = commit_message(&long);
        assert!(m.len() <= MAX_COMMIT_MESSAGE_BYTES + 100, "{}", m.len());
        assert!(
            m.ends_with("the run's trace has it whole]"),
            "{}",
            &m[m.len() - 80..]
        );
    }
}
