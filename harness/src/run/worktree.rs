//! One git worktree per task: `git worktree add -b <branch> <dir> <base>`,
//! then either kept as a commit on its branch ([`crate::run::keep`]) or
//! discarded. Every git command goes through [`Git`] with explicit
//! `GIT_DIR`/`GIT_WORK_TREE`, so a tool-written `.git` in the worktree is
//! never read; the directory is deleted by [`remove_tree`] (iterative, links
//! never followed), never by `git worktree remove`.

use std::path::{Path, PathBuf};

use crate::run::cleanup::remove_tree;
use crate::run::git::{Git, GitError};
use crate::run::repo_dirs::WORKTREES_DIR;

#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("worktree path {0} already exists")]
    Exists(PathBuf),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("cannot remove {path}: {failures}")]
    Cleanup { path: PathBuf, failures: String },
    #[error("nothing could be committed: {0}")]
    NotCommittable(String),
    #[error("{0} is not the worktree of a wasm-agent task (by the repository's own record: no worktree of it there with an agent/ branch checked out)")]
    NotATask(PathBuf),
    #[error("{0} is inside a task's worktree, whose .git a tool may have written: name the run from the repository, or give the worktree's directory")]
    InsideATask(PathBuf),
    #[error("the branch {branch} of {path} is gone (deleted?); the run's work is still in that directory: make the branch again at the commit the run started from ({}), then run recover again", remake(branch, started_at.as_deref()))]
    BranchGone {
        path: PathBuf,
        branch: String,
        /// From the worktree's own reflog, when git kept one.
        started_at: Option<String>,
    },
    #[error("{name} (pid {pid}) is still working in {path}: stop it first (a run commits its work when it stops; a server of a killed run ends with its last call)")]
    InUse {
        path: PathBuf,
        pid: u32,
        name: String,
    },
}

/// How to make `branch` again at `started_at`, for [`WorktreeError::BranchGone`].
fn remake(branch: &str, started_at: Option<&str>) -> String {
    match started_at {
        Some(commit) => format!("`git branch {branch} {commit}` in the repository"),
        None => "git kept no reflog of it".to_string(),
    }
}

/// The commit a worktree's `HEAD` first pointed to, from its reflog in
/// `admin_dir` (`logs/HEAD`, first line: `<old> <new> …`), if git kept one.
fn started_at(admin_dir: &Path) -> Option<String> {
    let log = read_small(&admin_dir.join("logs/HEAD"))?;
    let commit = log.lines().next()?.split(' ').nth(1)?;
    let hex = matches!(commit.len(), 40 | 64) && commit.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then(|| commit.to_string())
}

/// What the end of a run does with its branch (recorded with
/// [`Worktree::mark_settled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchFate {
    Kept,
    Deleted,
}

impl BranchFate {
    fn mark(self) -> &'static str {
        match self {
            BranchFate::Kept => "branch kept\n",
            BranchFate::Deleted => "branch deleted\n",
        }
    }
}

/// The branch of a task's worktree is `agent/<run-id>`.
pub const BRANCH_PREFIX: &str = "agent/";

/// The file in a task worktree's metadata dir that says its work is
/// committed and what is left of the directory is being removed.
const COMMITTED_FILE: &str = "wasm-agent.committed";

/// The file in a task worktree's metadata dir that marks it as a task's:
/// the process working in it (the run, or `recover`) holds an exclusive
/// `flock` on it, released by the kernel when that process ends however
/// it ends, and writes its pid there (for the message only).
const RUN_LOCK_FILE: &str = "wasm-agent.lock";

#[derive(Debug)]
pub struct Worktree {
    pub repo: PathBuf,
    pub path: PathBuf,
    pub branch: String,
    /// The commit the branch started at.
    pub base_commit: String,
    /// The main repository (common git dir).
    pub git: Git,
    /// This worktree's metadata dir in the main repo (`<common>/worktrees/<name>`).
    pub admin_dir: PathBuf,
    removed: bool,
    /// Held while this process works in the worktree (`RUN_LOCK_FILE`).
    _run_lock: Option<std::fs::File>,
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
        Ok(Git::discover(dir)?.0)
    }

    /// Create `<root>/<run_id>` on new branch `agent/<run_id>` at `base_ref`.
    pub fn create(
        repo: &Path,
        root: &Path,
        run_id: &str,
        base_ref: &str,
    ) -> Result<Self, WorktreeError> {
        let (_, common) = Git::discover(repo)?;
        let run_id = sanitize_id(run_id);
        let path = root.join(&run_id);
        if path.exists() {
            return Err(WorktreeError::Exists(path));
        }
        std::fs::create_dir_all(root)?;
        let branch = format!("{BRANCH_PREFIX}{run_id}");
        // Resolve first so a bad ref fails with a clear message; in the
        // caller's checkout, so `HEAD` of a linked worktree is its own.
        let commit = Git::resolve_commit(repo, base_ref)?;
        // Checkout smudges with the drivers the base's attributes name.
        let git = Git::repo(&common).neutralizing_filters_of(&commit);
        let path_arg = path.display().to_string();
        git.run(&[
            "worktree", "add", "--quiet", "-b", &branch, &path_arg, &commit,
        ])?;
        let path = std::fs::canonicalize(&path)?;
        // Read now, before any tool ran: afterwards `.git` is untrusted.
        let admin_dir = admin_dir_of(&path)?;
        let run_lock = Some(lock_run(&admin_dir, &path)?);
        Ok(Self {
            repo: repo.to_path_buf(),
            path,
            branch,
            base_commit: commit,
            git,
            admin_dir,
            removed: false,
            _run_lock: run_lock,
        })
    }

    /// The task worktree at `path` that a run left behind (killed, or the
    /// machine went down). Nothing a tool could write decides what it is:
    /// its repository is the one `run-task` made it in, two levels up
    /// (`<repo>/.worktrees/<run-id>`), never found through the worktree's
    /// `.git`; that repository's own record names it (the admin dir whose
    /// `gitdir` names `path/.git`), on an `agent/` branch, with the lock
    /// file `run-task` made there. Refused while a process works in it:
    /// one holding that lock (the run, another `recover`), or one with
    /// its cwd or a file there. Its base is the branch's commit now.
    /// Dropped, it is left as it is; it holds the lock until then.
    pub fn left_behind(path: &Path) -> Result<Self, WorktreeError> {
        let path = std::fs::canonicalize(path)?;
        let not_a_task = || WorktreeError::NotATask(path.clone());
        let repo = path
            .parent()
            .filter(|p| p.file_name() == Some(WORKTREES_DIR.as_ref()))
            .and_then(Path::parent)
            .ok_or_else(not_a_task)?
            .to_path_buf();
        // A layout a tool made inside a worktree (`<wt>/.worktrees/x`,
        // reached through its link) is no task's: its "repository" would
        // be the worktree, and its `.git` the tool's.
        if in_a_task_worktree(&repo) {
            return Err(not_a_task());
        }
        let (_, common) = Git::discover(&repo)?;
        let admin_dir = admin_dir_naming(&common, &path).ok_or_else(not_a_task)?;
        let head = read_small(&admin_dir.join("HEAD")).ok_or_else(not_a_task)?;
        let branch = head
            .trim()
            .strip_prefix("ref: refs/heads/")
            .filter(|b| b.starts_with(BRANCH_PREFIX))
            .ok_or_else(not_a_task)?
            .to_string();
        if !admin_dir.join(RUN_LOCK_FILE).is_file() {
            return Err(not_a_task());
        }
        let run_lock = lock_run(&admin_dir, &path)?;
        if let Some((pid, name)) = process_in(&path) {
            return Err(WorktreeError::InUse { path, pid, name });
        }
        let commit = Git::resolve_commit(&repo, &format!("refs/heads/{branch}")).map_err(|_| {
            WorktreeError::BranchGone {
                path: path.clone(),
                branch: branch.clone(),
                started_at: started_at(&admin_dir),
            }
        })?;
        let git = Git::repo(&common).neutralizing_filters_of(&commit);
        Ok(Self {
            repo,
            path,
            branch,
            base_commit: commit,
            git,
            admin_dir,
            // Never removed on drop: only `settle` decides.
            removed: true,
            _run_lock: Some(run_lock),
        })
    }

    /// Records that the work is settled (committed, or there was none to
    /// keep) and what becomes of the branch, before the directory is
    /// removed (best effort: without it, `recover` commits what is left, and
    /// a half-removed tree of a run with no changes, or a discarded one, was
    /// committed as deletions and `.rm-N/` renames; a helper's find).
    pub fn mark_settled(&self, branch: BranchFate) {
        let _ = std::fs::write(self.admin_dir.join(COMMITTED_FILE), branch.mark());
    }

    /// What [`Worktree::mark_settled`] recorded: the directory is then the
    /// remains of a removal cut short.
    pub fn settled(&self) -> Option<BranchFate> {
        let mark = read_small(&self.admin_dir.join(COMMITTED_FILE))?;
        // Marks of earlier versions (empty) were written on a commit only.
        Some(match mark.trim() == BranchFate::Deleted.mark().trim() {
            true => BranchFate::Deleted,
            false => BranchFate::Kept,
        })
    }

    /// The directory is kept whole again (remains kept by `recover
    /// --keep-worktree`): what the user does in it next is work to commit.
    pub fn clear_settled(&self) {
        let _ = std::fs::remove_file(self.admin_dir.join(COMMITTED_FILE));
    }

    /// Git for this worktree: explicit GIT_DIR (the admin dir) and GIT_WORK_TREE.
    pub fn git(&self) -> Git {
        self.git.worktree(&self.admin_dir, &self.path)
    }

    /// The `.git` file git writes at the root of this worktree.
    fn gitfile(&self) -> String {
        format!("gitdir: {}\n", self.admin_dir.display())
    }

    /// A hook that puts git's own `.git` file back at the root when the
    /// process exits at once ([`crate::run::interrupt::before_exit_now`]):
    /// a tool's `.git` there moved aside (renamed: quick, and nothing of it
    /// is lost), git's written. Nothing when the directory is gone.
    pub fn gitfile_keeper(&self) -> impl Fn() + Send + 'static {
        let dotgit = self.path.join(".git");
        let expected = self.gitfile();
        move || {
            let Some(dir) = dotgit.parent().filter(|d| d.is_dir()) else {
                return;
            };
            if is_gitfile(&dotgit, &expected) {
                return;
            }
            let name = format!(
                "{}exit-{}",
                crate::run::stage::ASIDE_PREFIX,
                std::process::id()
            );
            let aside = dir.join(name);
            if std::fs::symlink_metadata(&dotgit).is_ok()
                && std::fs::rename(&dotgit, &aside).is_err()
            {
                return;
            }
            let _ = std::fs::write(&dotgit, &expected);
        }
    }

    /// Put back the `.git` file git wrote, whatever a tool left there.
    pub fn restore_dotgit(&self) -> Result<(), WorktreeError> {
        let dotgit = self.path.join(".git");
        let expected = self.gitfile();
        if is_gitfile(&dotgit, &expected) {
            return Ok(());
        }
        let r = remove_tree(&dotgit);
        if !r.ok() {
            return Err(self.cleanup_error(&dotgit, r.failures));
        }
        std::fs::write(&dotgit, expected)?;
        Ok(())
    }

    /// Delete the worktree directory and its metadata; keep the branch.
    pub fn remove_dir(&mut self) -> Result<(), WorktreeError> {
        let r = remove_tree(&self.path);
        // Only this worktree's metadata: `git worktree prune` also deleted
        // that of the user's own worktrees whose directories were away
        // (moved, or on an unmounted disk), with their staged changes (a
        // helper's find).
        if self.admin_dir.exists() && !self.path.exists() {
            let _ = remove_tree(&self.admin_dir);
        }
        if !r.ok() {
            return Err(self.cleanup_error(&self.path.clone(), r.failures));
        }
        Ok(())
    }

    /// Remove the worktree (even with local changes) and delete its branch.
    pub fn remove(&mut self) -> Result<(), WorktreeError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        let r1 = self.remove_dir();
        let r2 = self.delete_branch();
        r1.and(r2)
    }

    pub fn delete_branch(&self) -> Result<(), WorktreeError> {
        self.git.run(&["branch", "-D", "--quiet", &self.branch])?;
        Ok(())
    }

    /// Leave the worktree and branch in place.
    pub fn keep(&mut self) {
        self.removed = true;
    }

    /// The directory and branch were dealt with (kept or removed).
    pub fn settle(&mut self) {
        self.removed = true;
    }

    fn cleanup_error(&self, path: &Path, failures: Vec<String>) -> WorktreeError {
        WorktreeError::Cleanup {
            path: path.to_path_buf(),
            failures: failures.join("; "),
        }
    }
}

/// The admin dir named by a fresh worktree's `.git` file.
fn admin_dir_of(path: &Path) -> Result<PathBuf, WorktreeError> {
    let text = std::fs::read_to_string(path.join(".git"))?;
    let dir = text
        .strip_prefix("gitdir:")
        .map(|s| PathBuf::from(s.trim()))
        .ok_or_else(|| {
            WorktreeError::Io(std::io::Error::other(format!(
                "unexpected {}/.git: {text:?}",
                path.display()
            )))
        })?;
    Ok(std::fs::canonicalize(path.join(dir))?)
}

/// Whether `dir` (resolved) is in a task's worktree, or is the
/// `.worktrees` dir holding them: a `.git` found from there may be a
/// tool's.
pub fn in_a_task_worktree(dir: &Path) -> bool {
    dir.ancestors()
        .any(|a| a.file_name() == Some(WORKTREES_DIR.as_ref()))
}

/// The admin dir under `<common>/worktrees` whose `gitdir` names
/// `path/.git` (absolute, or relative to the admin dir as git writes it
/// with `worktree.useRelativePaths`; compared resolved, up to the
/// worktree: its `.git` itself may be a tool's link).
fn admin_dir_naming(common: &Path, path: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(common.join("worktrees")).ok()?;
    entries.flatten().map(|e| e.path()).find(|admin| {
        read_small(&admin.join("gitdir")).is_some_and(|gitdir| {
            let named = admin.join(gitdir.trim());
            named
                .parent()
                .and_then(|dir| std::fs::canonicalize(dir).ok())
                .is_some_and(|dir| dir == path)
        })
    })
}

/// The text of the regular file at `path` (no link followed), if it is
/// one of at most 4 KiB: git's records in an admin dir are a line each.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    const MAX: u64 = 4096;
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() <= MAX) {
        return None;
    }
    let mut text = String::new();
    let file = std::fs::File::open(path).ok()?;
    file.take(MAX).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Takes the exclusive lock of the worktree's `RUN_LOCK_FILE` (made if
/// missing) and writes this process's pid in it; refused while another
/// process holds it.
fn lock_run(admin_dir: &Path, path: &Path) -> Result<std::fs::File, WorktreeError> {
    use std::io::{Seek, Write};
    use std::os::fd::AsRawFd;
    let file_path = admin_dir.join(RUN_LOCK_FILE);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&file_path)?;
    // SAFETY: `flock` on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::WouldBlock {
            return Err(err.into());
        }
        let pid = std::fs::read_to_string(&file_path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let name = process_name(pid).unwrap_or_else(|| "wasm-agent".into());
        let path = path.to_path_buf();
        return Err(WorktreeError::InUse { path, pid, name });
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    Ok(file)
}

/// A process other than this one with its working directory or an open
/// file inside `path` (a server of a killed run finishing its last call
/// holds the worktree open, and may still write there). Read from
/// `/proc`: only where it exists, and only the processes this user may
/// look into.
fn process_in(path: &Path) -> Option<(u32, String)> {
    let mine = own_line();
    let inside = |link: PathBuf| std::fs::read_link(link).is_ok_and(|to| to.starts_with(path));
    let pids = std::fs::read_dir("/proc").ok()?.flatten();
    let pids = pids.filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    pids.filter(|pid| !mine.contains(pid)).find_map(|pid| {
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        let open = || {
            let fds = std::fs::read_dir(proc_dir.join("fd")).into_iter().flatten();
            fds.flatten().any(|fd| inside(fd.path()))
        };
        (inside(proc_dir.join("cwd")) || open())
            .then(|| (pid, process_name(pid).unwrap_or_default()))
    })
}

/// This process and its ancestors: the shell that started `recover` from
/// inside the worktree is not working in it.
fn own_line() -> Vec<u32> {
    let mut line = vec![std::process::id()];
    while let Some(parent) = line.last().and_then(|&pid| parent_of(pid)) {
        if parent <= 1 || line.contains(&parent) || line.len() > 64 {
            break;
        }
        line.push(parent);
    }
    line
}

/// The parent of `pid` (`/proc/PID/stat`, the field after the name's `)`).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

fn process_name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim().to_string())
}

impl Drop for Worktree {
    fn drop(&mut self) {
        // Last-resort cleanup (e.g. on panic); the normal path keeps or removes.
        if !self.removed {
            let _ = self.remove();
        }
    }
}

/// Whether `dotgit` is a regular file holding exactly `expected`.
fn is_gitfile(dotgit: &Path, expected: &str) -> bool {
    std::fs::symlink_metadata(dotgit).is_ok_and(|m| m.is_file())
        && std::fs::read_to_string(dotgit).is_ok_and(|s| s == expected)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn init_repo(dir: &Path) {
        wasm_mcp_harness_testing::init_repo(dir, &[("README.md", "# Demo\nhello world\n")]);
    }

    #[test]
    fn create_and_remove() {
        let d = tempfile::tempdir().unwrap();
        init_repo(d.path());
        let mut wt =
            Worktree::create(d.path(), &d.path().join(".worktrees"), "t/1", "HEAD").unwrap();
        assert!(wt.path.join("README.md").exists());
        assert_eq!(wt.branch, "agent/t-1");
        let git = |args: &[&str]| Git::repo(&d.path().join(".git")).run(args);
        let branches = git(&["branch", "--list", "agent/*"]).unwrap();
        assert!(branches.contains("agent/t-1"));
        std::fs::write(wt.path.join("dirty.txt"), "x").unwrap();
        wt.remove().unwrap();
        assert!(!wt.path.exists());
        assert!(git(&["branch", "--list", "agent/*"]).unwrap().is_empty());
        assert!(!git(&["worktree", "list"]).unwrap().contains("t-1"));
    }

    /// `recover` on a worktree whose branch was deleted says so, and how to
    /// make it again at the commit the run started from; made again, the
    /// work is recovered.
    #[test]
    fn a_deleted_branch_is_named_with_how_to_make_it_again() {
        let d = tempfile::tempdir().unwrap();
        init_repo(d.path());
        let mut wt =
            Worktree::create(d.path(), &d.path().join(".worktrees"), "gone", "HEAD").unwrap();
        let start = wt.base_commit.clone();
        std::fs::write(wt.path.join("NOTES.md"), "work\n").unwrap();
        let path = wt.path.clone();
        wt.keep();
        drop(wt);
        let git = |args: &[&str]| Git::repo(&d.path().join(".git")).run(args).unwrap();
        git(&["update-ref", "-d", "refs/heads/agent/gone"]);
        let e = Worktree::left_behind(&path).unwrap_err().to_string();
        let how = format!("`git branch agent/gone {start}` in the repository");
        assert!(
            e.contains("the branch agent/gone of") && e.contains(&how),
            "{e}"
        );
        assert!(path.join("NOTES.md").exists());
        git(&["branch", "agent/gone", &start]);
        let found = Worktree::left_behind(&path).unwrap();
        assert_eq!(found.base_commit, start);
    }

    #[test]
    fn head_is_the_callers_checkout_also_in_a_linked_worktree() {
        let d = tempfile::tempdir().unwrap();
        init_repo(d.path());
        let linked = d.path().join("linked");
        let git = |dir: &Path, args: &[&str]| wasm_mcp_harness_testing::git(dir, args);
        git(
            d.path(),
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "feature",
                linked.to_str().unwrap(),
            ],
        );
        std::fs::write(linked.join("f.txt"), "x").unwrap();
        git(&linked, &["add", "f.txt"]);
        git(
            &linked,
            &[
                "-c",
                "user.name=u",
                "-c",
                "user.email=u@u",
                "commit",
                "-qm",
                "f",
            ],
        );
        let head = git(&linked, &["rev-parse", "HEAD"]);
        let mut wt = Worktree::create(&linked, &d.path().join(".worktrees"), "t", "HEAD").unwrap();
        assert_eq!(
            wt.base_commit,
            head.trim(),
            "based on the linked checkout's HEAD"
        );
        assert!(wt.path.join("f.txt").exists());
        wt.remove().unwrap();
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
