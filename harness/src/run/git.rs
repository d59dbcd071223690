//! Hardened git invocation: every git command the harness runs goes through
//! [`Git`], so nothing a tool wrote in a worktree can steer it.
//!
//! - `GIT_DIR` (and `GIT_WORK_TREE` for a worktree) are explicit: a worktree's
//!   own `.git` file is never read, so a tool-written `.git` (fake git dir,
//!   poisoned config) has no effect.
//! - No system or global config (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`),
//!   no inherited `GIT_*` variables.
//! - `core.hooksPath=/dev/null`, `core.fsmonitor=false`, no external diff, no
//!   commit signing, and every filter driver the repo config defines is emptied.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, thiserror::Error)]
#[error("git {args}: {message}")]
pub struct GitError {
    pub args: String,
    pub message: String,
}

/// Settings forced on every command (`-c key=value`).
const FORCED: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "diff.external=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "core.attributesFile=/dev/null",
    "user.name=wasm-agent",
    "user.email=wasm-agent@localhost",
];

/// A git repository (its common git dir), optionally with one work tree.
#[derive(Debug, Clone)]
pub struct Git {
    git_dir: PathBuf,
    work_tree: Option<PathBuf>,
    index_file: Option<PathBuf>,
    /// Read `.gitattributes` from this tree-ish, not from the work tree.
    attr_source: Option<String>,
    /// `-c filter.<name>.*=` for every driver defined in the repo config.
    filter_overrides: Vec<String>,
}

impl Git {
    /// Discover the repository containing `dir` (the user's own checkout).
    /// Returns (top level, common git dir).
    pub fn discover(dir: &Path) -> Result<(PathBuf, PathBuf), GitError> {
        let mut cmd = base_command();
        cmd.current_dir(dir).args([
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-common-dir",
        ]);
        let out = run(cmd, "rev-parse --show-toplevel --git-common-dir")?;
        let mut lines = out.lines();
        match (lines.next(), lines.next()) {
            (Some(top), Some(common)) => Ok((PathBuf::from(top), PathBuf::from(common))),
            _ => Err(GitError {
                args: "rev-parse".into(),
                message: format!("unexpected output {out:?}"),
            }),
        }
    }

    /// The commit `rev` names in the checkout at `dir` (the user's own, found
    /// by discovery: `HEAD` is that checkout's, also in a linked worktree).
    pub fn resolve_commit(dir: &Path, rev: &str) -> Result<String, GitError> {
        let mut cmd = base_command();
        let spec = format!("{rev}^{{commit}}");
        cmd.current_dir(dir).args([
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ]);
        run(cmd, &format!("rev-parse --verify {spec}")).map_err(|e| GitError {
            message: format!("`{rev}` is not a commit here {}", e.message)
                .trim()
                .to_string(),
            ..e
        })
    }

    /// The repository whose common git dir is `git_dir` (no work tree).
    pub fn repo(git_dir: &Path) -> Self {
        let mut g = Self {
            git_dir: git_dir.to_path_buf(),
            work_tree: None,
            index_file: None,
            attr_source: None,
            filter_overrides: Vec::new(),
        };
        g.filter_overrides = g.filter_drivers();
        g
    }

    /// The same repository seen through a worktree: `admin_dir` is the
    /// worktree's metadata dir in the main repo (`<common>/worktrees/<name>`).
    pub fn worktree(&self, admin_dir: &Path, work_tree: &Path) -> Self {
        Self {
            git_dir: admin_dir.to_path_buf(),
            work_tree: Some(work_tree.to_path_buf()),
            index_file: None,
            attr_source: None,
            filter_overrides: self.filter_overrides.clone(),
        }
    }

    /// The same git dir with another work tree (and the default index).
    pub fn at_work_tree(&self, work_tree: &Path) -> Self {
        let mut g = self.clone();
        g.work_tree = Some(work_tree.to_path_buf());
        g.index_file = None;
        g
    }

    /// Use a private index file instead of the worktree's own.
    pub fn with_index(mut self, index: &Path) -> Self {
        self.index_file = Some(index.to_path_buf());
        self
    }

    /// Take attributes from `tree` (`GIT_ATTR_SOURCE`, git >= 2.40; older
    /// git ignores it), so a tool-written `.gitattributes` cannot change
    /// what is committed.
    pub fn with_attr_source(mut self, tree: &str) -> Self {
        self.attr_source = Some(tree.to_string());
        self
    }

    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// Run git with `args`; stdout (trimmed) on success.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String, GitError> {
        let mut cmd = self.command();
        cmd.args(args);
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        run(cmd, &shown.join(" "))
    }

    /// Run git with `args`, stdin read from `input` (a file) when given.
    /// Returns the exit code and raw stdout (paths may not be UTF-8); only a
    /// failure to start git or death by a signal is an error.
    pub fn run_raw<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        input: Option<&Path>,
    ) -> Result<RawOutput, GitError> {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        let error = |message: String| GitError {
            args: shown.join(" "),
            message,
        };
        let mut cmd = self.command();
        cmd.args(args);
        if let Some(f) = input {
            let file =
                std::fs::File::open(f).map_err(|e| error(format!("open {}: {e}", f.display())))?;
            cmd.stdin(file);
        }
        let out = cmd
            .output()
            .map_err(|e| error(format!("cannot run git: {e}")))?;
        let code = out
            .status
            .code()
            .ok_or_else(|| error(format!("git died: {}", out.status)))?;
        Ok(RawOutput {
            code,
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    /// The hardened command, ready for arguments.
    pub fn command(&self) -> Command {
        let mut cmd = base_command();
        for o in &self.filter_overrides {
            cmd.arg("-c").arg(o);
        }
        cmd.env("GIT_DIR", &self.git_dir);
        match &self.work_tree {
            Some(w) => {
                cmd.env("GIT_WORK_TREE", w).current_dir(w);
            }
            None => {
                cmd.current_dir(&self.git_dir);
            }
        }
        if let Some(i) = &self.index_file {
            cmd.env("GIT_INDEX_FILE", i);
        }
        if let Some(a) = &self.attr_source {
            cmd.env("GIT_ATTR_SOURCE", a);
        }
        cmd
    }

    fn filter_drivers(&self) -> Vec<String> {
        let out = self
            .run(&["config", "--name-only", "--get-regexp", r"^filter\."])
            .unwrap_or_default();
        let mut names: Vec<&str> = out
            .lines()
            .filter_map(|k| k.strip_prefix("filter.")?.rsplit_once('.').map(|(n, _)| n))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
            .iter()
            .flat_map(|n| {
                ["clean=", "smudge=", "process=", "required=false"]
                    .map(|s| format!("filter.{n}.{s}"))
            })
            .collect()
    }
}

/// What [`Git::run_raw`] got back.
#[derive(Debug)]
pub struct RawOutput {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl RawOutput {
    /// The NUL-separated records of stdout (`-z` output).
    pub fn records(&self) -> impl Iterator<Item = &[u8]> {
        self.stdout.split(|b| *b == 0).filter(|r| !r.is_empty())
    }
}

/// git with a clean environment and the forced settings.
fn base_command() -> Command {
    let mut cmd = Command::new("git");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("GIT_OPTIONAL_LOCKS", "0")
        // Messages are parsed (e.g. directories `ls-files` could not open).
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null());
    for f in FORCED {
        cmd.arg("-c").arg(f);
    }
    cmd
}

fn run(mut cmd: Command, shown: &str) -> Result<String, GitError> {
    let out = cmd.output().map_err(|e| GitError {
        args: shown.to_string(),
        message: format!("cannot run git: {e}"),
    })?;
    if !out.status.success() {
        return Err(GitError {
            args: shown.to_string(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}
