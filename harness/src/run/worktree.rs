//! One git worktree per task: `git worktree add -b <branch> <dir> <base>` and
//! removal of both the worktree and its branch.

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error("git {args}: {message}")]
    Git { args: String, message: String },
    #[error("worktree path {0} already exists")]
    Exists(PathBuf),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

#[derive(Debug)]
pub struct Worktree {
    pub repo: PathBuf,
    pub path: PathBuf,
    pub branch: String,
    removed: bool,
}

fn git(repo: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .map_err(|e| WorktreeError::Git {
            args: args.join(" "),
            message: format!("cannot run git: {e}"),
        })?;
    if !out.status.success() {
        return Err(WorktreeError::Git {
            args: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `[A-Za-z0-9_-]`, for paths and branch names.
pub fn sanitize_id(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if s.is_empty() {
        "task".into()
    } else {
        s
    }
}

impl Worktree {
    /// Repo top level of `dir`.
    pub fn repo_root(dir: &Path) -> Result<PathBuf, WorktreeError> {
        Ok(PathBuf::from(git(dir, &["rev-parse", "--show-toplevel"])?))
    }

    /// Create `<root>/<run_id>` on new branch `agent/<run_id>` at `base_ref`.
    pub fn create(
        repo: &Path,
        root: &Path,
        run_id: &str,
        base_ref: &str,
    ) -> Result<Self, WorktreeError> {
        let run_id = sanitize_id(run_id);
        let path = root.join(&run_id);
        if path.exists() {
            return Err(WorktreeError::Exists(path));
        }
        std::fs::create_dir_all(root)?;
        let branch = format!("agent/{run_id}");
        // Resolve first so a bad ref fails with a clear message.
        let commit = git(
            repo,
            &["rev-parse", "--verify", &format!("{base_ref}^{{commit}}")],
        )?;
        git(
            repo,
            &[
                "worktree",
                "add",
                "--quiet",
                "-b",
                &branch,
                &path.display().to_string(),
                &commit,
            ],
        )?;
        Ok(Self {
            repo: repo.to_path_buf(),
            path: std::fs::canonicalize(&path)?,
            branch,
            removed: false,
        })
    }

    /// Remove the worktree (even with local changes) and delete its branch.
    pub fn remove(&mut self) -> Result<(), WorktreeError> {
        if self.removed {
            return Ok(());
        }
        let r1 = git(
            &self.repo,
            &[
                "worktree",
                "remove",
                "--force",
                &self.path.display().to_string(),
            ],
        );
        if r1.is_err() && self.path.exists() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
        let _ = git(&self.repo, &["worktree", "prune"]);
        let r2 = git(&self.repo, &["branch", "-D", &self.branch]);
        self.removed = true;
        r1.and(r2).map(|_| ())
    }

    /// Leave the worktree and branch in place.
    pub fn keep(&mut self) {
        self.removed = true;
    }
}

impl Drop for Worktree {
    fn drop(&mut self) {
        // Last-resort cleanup (e.g. on panic); the normal path calls `remove`.
        if !self.removed {
            let _ = self.remove();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn init_repo(dir: &Path) {
        let run = |args: &[&str]| {
            let st = Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(args)
                .output()
                .unwrap();
            assert!(
                st.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&st.stderr)
            );
        };
        run(&["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("README.md"), "# Demo\nhello world\n").unwrap();
        run(&["add", "."]);
        run(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "init",
        ]);
    }

    #[test]
    fn create_and_remove() {
        let d = tempfile::tempdir().unwrap();
        init_repo(d.path());
        let mut wt =
            Worktree::create(d.path(), &d.path().join(".worktrees"), "t/1", "HEAD").unwrap();
        assert!(wt.path.join("README.md").exists());
        assert_eq!(wt.branch, "agent/t-1");
        let branches = git(d.path(), &["branch", "--list", "agent/*"]).unwrap();
        assert!(branches.contains("agent/t-1"));
        std::fs::write(wt.path.join("dirty.txt"), "x").unwrap();
        wt.remove().unwrap();
        assert!(!wt.path.exists());
        assert!(git(d.path(), &["branch", "--list", "agent/*"])
            .unwrap()
            .is_empty());
        assert!(!git(d.path(), &["worktree", "list"])
            .unwrap()
            .contains("t-1"));
    }

    #[test]
    fn bad_ref_fails_cleanly() {
        let d = tempfile::tempdir().unwrap();
        init_repo(d.path());
        let e = Worktree::create(d.path(), &d.path().join(".worktrees"), "x", "no-such-ref")
            .unwrap_err();
        assert!(matches!(e, WorktreeError::Git { .. }));
        assert!(!d.path().join(".worktrees/x").exists());
    }
}
