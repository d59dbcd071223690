//! Hardened git invocation: every git command the harness runs goes through
//! [`Git`], so nothing a tool wrote in a worktree can steer it.
//!
//! - `GIT_DIR` (and `GIT_WORK_TREE` for a worktree) are explicit: a worktree's
//!   own `.git` file is never read, so a tool-written `.git` (fake git dir,
//!   poisoned config) has no effect.
//! - No system or global config (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`),
//!   no inherited `GIT_*` variables.
//! - `core.hooksPath=/dev/null`, `core.fsmonitor=false`, no external diff, no
//!   commit signing, and every filter driver is emptied: each one the repo
//!   config lists, and each one an attribute source of the base commit names
//!   (a driver defined under a conditional include, `includeIf
//!   "onbranch:agent/**"`, is not listed from the main branch's config).
//!   The overrides go in `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n`, which
//!   have no `key=value` split to confuse with a name holding `=`.

use std::ffi::{OsStr, OsString};
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
    // Names as the filesystem has them: with `core.ignorecase=true` in the
    // repository's config (on a case-sensitive filesystem), `ls-files -o`
    // matched new files against tracked ones without case, and a tool's
    // `readme.md` beside a tracked `README.md` was dropped (a helper's find).
    "core.ignorecase=false",
    "user.name=wasm-agent",
    "user.email=wasm-agent@localhost",
    // No transport of any kind: the harness never fetches, and a tool-written
    // repository's promisor remote must not run `core.sshCommand`.
    "protocol.allow=never",
];

/// A git repository (its common git dir), optionally with one work tree.
#[derive(Debug, Clone)]
pub struct Git {
    git_dir: PathBuf,
    work_tree: Option<PathBuf>,
    index_file: Option<PathBuf>,
    /// Read `.gitattributes` from this tree-ish, not from the work tree.
    attr_source: Option<String>,
    /// Filter drivers emptied on every command (see the module docs).
    neutral_filters: Vec<OsString>,
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
            neutral_filters: Vec::new(),
        };
        let listed = g.filter_drivers();
        g.neutralize_filters(listed);
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
            neutral_filters: self.neutral_filters.clone(),
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
    /// what is committed. Every filter driver they name is emptied.
    pub fn with_attr_source(mut self, tree: &str) -> Self {
        self.attr_source = Some(tree.to_string());
        self.neutralizing_filters_of(tree)
    }

    /// Also empty every filter driver named by an attribute source of
    /// `tree`: its `.gitattributes` files (macros included) and the
    /// repository's `info/attributes`. Over-matching (`xfilter=a`) only
    /// empties a driver nothing uses.
    pub fn neutralizing_filters_of(mut self, tree: &str) -> Self {
        let mut text = std::fs::read(self.common_dir().join("info/attributes")).unwrap_or_default();
        let grep = self.run_raw(
            &[
                "grep",
                "--no-color",
                "-h",
                "-o",
                "-I",
                "-E",
                r"filter=[^[:space:]]+",
                tree,
                "--",
                ":(glob)**/.gitattributes",
            ],
            None,
        );
        if let Ok(out) = grep {
            text.extend_from_slice(b"\n");
            text.extend_from_slice(&out.stdout);
        }
        self.neutralize_filters(filter_names_in(&text));
        self
    }

    fn neutralize_filters(&mut self, names: impl IntoIterator<Item = OsString>) {
        self.neutral_filters.extend(names);
        self.neutral_filters.sort_unstable();
        self.neutral_filters.dedup();
    }

    /// The common git dir (a worktree's admin dir has a `commondir` file).
    fn common_dir(&self) -> PathBuf {
        match std::fs::read_to_string(self.git_dir.join("commondir")) {
            Ok(rel) => self.git_dir.join(rel.trim()),
            Err(_) => self.git_dir.clone(),
        }
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

    /// [`Git::run_raw`], a non-zero exit an error (git's stderr its message).
    pub fn run_raw_ok<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        input: Option<&Path>,
    ) -> Result<RawOutput, GitError> {
        let out = self.run_raw(args, input)?;
        match out.code {
            0 => Ok(out),
            _ => Err(GitError {
                args: args
                    .iter()
                    .map(|a| a.as_ref().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(" "),
                message: out.stderr,
            }),
        }
    }

    /// The hardened command, ready for arguments.
    pub fn command(&self) -> Command {
        let mut cmd = base_command();
        let settings = self.neutral_filters.iter().flat_map(|name| {
            [
                ("clean", ""),
                ("smudge", ""),
                ("process", ""),
                ("required", "false"),
            ]
            .map(|(k, v)| {
                let mut key = OsString::from("filter.");
                key.push(name);
                key.push(format!(".{k}"));
                (key, v)
            })
        });
        let mut count = 0;
        for (i, (key, value)) in settings.enumerate() {
            cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
            count = i + 1;
        }
        cmd.env("GIT_CONFIG_COUNT", count.to_string());
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

    /// The filter drivers the repo config lists (as the main branch sees it).
    fn filter_drivers(&self) -> Vec<OsString> {
        let out = self
            .run(&["config", "--name-only", "--get-regexp", r"^filter\."])
            .unwrap_or_default();
        out.lines()
            .filter_map(|k| k.strip_prefix("filter.")?.rsplit_once('.'))
            .map(|(n, _)| n.into())
            .collect()
    }
}

/// The driver names of the `filter=NAME` tokens in attribute text.
fn filter_names_in(text: &[u8]) -> Vec<OsString> {
    use std::os::unix::ffi::OsStrExt;
    text.split(|b| b.is_ascii_whitespace())
        .filter_map(|t| t.strip_prefix(b"filter="))
        .filter(|n| !n.is_empty())
        .map(|n| OsStr::from_bytes(n).to_owned())
        .collect()
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
        .env("GIT_NO_LAZY_FETCH", "1")
        // Messages are parsed (e.g. directories `ls-files` could not open).
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null());
    // A process group of its own, and SIGINT/SIGTERM ignored: the
    // terminal's Ctrl-C, which the run answers by committing its work,
    // killed the git staging that work ("git died: signal 2", not
    // committed), also when it came between the fork and the new group
    // (helpers' finds). The harness never signals its git.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    // SAFETY: `signal` is async-signal-safe, as a pre-exec hook must be.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
            Ok(())
        });
    }
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
