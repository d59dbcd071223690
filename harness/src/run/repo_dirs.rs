//! The repository's `.cache` and `.worktrees`: where a run writes by
//! default (its runtime dir and trace under `.cache/agent-runs`, the task's
//! worktree under `.worktrees`, and, in the default policy, the server's
//! compile cache under `.cache/wasm-mcp`). They are the harness's, not the
//! repository's: a repository that commits a symlink there chose where the
//! harness writes (a committed `.worktrees -> /elsewhere` put the task's
//! worktree outside the repository, and its trace went where `.cache`
//! pointed), and one that commits files there chose what the server loads
//! (a committed `.cache/wasm-mcp/<digest>-<engine>.cwasm` is native code
//! the server maps in place of the pinned plugin's). Either is refused
//! before anything is written.

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::run::git::Git;

/// Where `run-task` makes its worktrees (`<repo>/.worktrees/<run-id>`).
pub const WORKTREES_DIR: &str = ".worktrees";

/// The repository-relative directories the harness writes under.
pub const HARNESS_DIRS: [&str; 2] = [".cache", WORKTREES_DIR];

/// Refuses a repository whose `.cache` or `.worktrees` is not a plain
/// directory (a symlink, a file) or holds tracked files.
pub fn check(repo: &Path) -> Result<()> {
    for name in HARNESS_DIRS {
        let path = repo.join(name);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let what = if meta.file_type().is_symlink() {
            "a symlink"
        } else if !meta.is_dir() {
            "not a directory"
        } else {
            continue;
        };
        bail!(
            "{} is {what}: the harness writes its runs, worktrees and compile cache under the \
             repository's .cache and .worktrees, and a repository must not choose where; \
             remove it (or give --out-dir elsewhere for the runs)",
            path.display()
        );
    }
    let (_, common) = Git::discover(repo)?;
    let mut args = vec!["ls-files", "--"];
    args.extend(HARNESS_DIRS);
    let tracked = Git::repo(&common)
        .at_work_tree(repo)
        .run(&args)
        .context("listing tracked files under .cache and .worktrees")?;
    if let Some(first) = tracked.lines().next() {
        bail!(
            "the repository tracks files under .cache or .worktrees ({first}): those are the \
             harness's (its runs, worktrees and the server's compile cache, whose files are \
             native code); remove them from the repository"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(d.path())
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(d.path().join("a.txt"), "a").unwrap();
        git(&["add", "a.txt"]);
        git(&["commit", "-qm", "a"]);
        d
    }

    #[test]
    fn a_plain_repository_passes_and_untracked_dirs_are_fine() {
        let d = repo();
        check(d.path()).unwrap();
        std::fs::create_dir_all(d.path().join(".cache/wasm-mcp")).unwrap();
        std::fs::write(d.path().join(".cache/wasm-mcp/x.cwasm"), "x").unwrap();
        check(d.path()).unwrap();
    }

    #[test]
    fn symlinks_and_tracked_files_are_refused() {
        for name in HARNESS_DIRS {
            let d = repo();
            std::os::unix::fs::symlink("/tmp", d.path().join(name)).unwrap();
            let e = check(d.path()).unwrap_err().to_string();
            assert!(e.contains("is a symlink"), "{e}");
        }
        let d = repo();
        std::fs::create_dir_all(d.path().join(".cache/wasm-mcp")).unwrap();
        std::fs::write(d.path().join(".cache/wasm-mcp/x.cwasm"), "x").unwrap();
        let ok = Command::new("git")
            .args(["add", "-f", ".cache/wasm-mcp/x.cwasm"])
            .current_dir(d.path())
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let e = check(d.path()).unwrap_err().to_string();
        assert!(e.contains(".cache/wasm-mcp/x.cwasm"), "{e}");
        let d = repo();
        std::fs::write(d.path().join(".worktrees"), "a file").unwrap();
        let e = check(d.path()).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
    }
}
