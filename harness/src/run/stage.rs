//! Staging every change in a worktree into a private index, by rules no
//! tool could have written.
//!
//! - Tracked files: `git add -u` (modified and deleted), with attributes
//!   from the base commit (`GIT_ATTR_SOURCE`), not from a tool-written
//!   `.gitattributes`.
//! - New files: `git ls-files -o` with no ignore rules, then filtered by the
//!   **base commit's** `.gitignore` files (checked out into a scratch dir and
//!   asked with `git check-ignore --no-index`, plus the repository's
//!   `info/exclude`) and by the rules as the run left them: a file is left
//!   out only when both ignore it. The rest is added with
//!   `git update-index --add`. A `.gitignore` a tool wrote or changed is
//!   committed; it can un-ignore files but never hide the run's work.
//! - Nested repositories a tool created (a directory with its own `.git`)
//!   are committed as plain files: their `.git` is moved aside while staging
//!   (excluded by pathspec) and put back afterwards. Their history is not
//!   committed (git cannot hold a `.git` path); they never become gitlinks.
//! - A `.git` in a submodule path of the base (its directory is left empty
//!   by `worktree add`, so a tool wrote it) is moved aside too, before
//!   anything is staged, and never put back: `git add -u` runs `git status`
//!   inside a populated submodule, as that repository, with its config, and
//!   so would the user's own `git status` in a kept worktree. Other files
//!   written in a submodule path are not committed (git does not look
//!   inside a gitlink); they are reported.
//! - Whatever is left out is reported ([`LeftOut`]); when that includes
//!   the run's files (unreadable ones, names git refuses, files in a
//!   submodule path), the worktree is kept so that nothing is lost.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::run::cleanup::remove_tree;
use crate::run::git::{Git, GitError};

/// Rounds of nested-repository discovery (a repo inside a repo inside ...).
const MAX_NESTING_ROUNDS: usize = 16;
/// Per-file failures listed before they are only counted.
const MAX_LISTED: usize = 20;
/// The start of the names `.git`s are set aside under.
pub(crate) const ASIDE_PREFIX: &str = ".git-aside-wasm-agent-";
/// Entries counted in a submodule path before the count stops.
const MAX_COUNTED: usize = 10_000;

/// A worktree path as git prints it (bytes: names need not be UTF-8).
type GitPath = Vec<u8>;

/// A path for the report (printed on a terminal).
fn shown(p: &[u8]) -> String {
    crate::run::progress::terminal_safe(&String::from_utf8_lossy(p))
}

/// What staging left out of the commit, for the report.
#[derive(Debug, Default)]
pub struct LeftOut {
    /// One line per path, or group of paths.
    pub lines: Vec<String>,
    /// Some of the run's files are not in the commit (not only nested
    /// repositories' histories, which git cannot hold): the worktree is to
    /// be kept so that they are not lost.
    pub files: bool,
}

impl LeftOut {
    /// Files of the run that are not committed.
    fn push(&mut self, line: String) {
        self.lines.push(line);
        self.files = true;
    }

    /// Something left out that is not the run's files.
    fn note(&mut self, line: String) {
        self.lines.push(line);
    }
}

/// Stage the worktree of `g` (GIT_WORK_TREE `work_tree`, a private index)
/// onto `head`. Returns what was left out, for the report.
pub fn stage_all(
    g: &Git,
    work_tree: &Path,
    head: &str,
    scratch: &Path,
) -> Result<LeftOut, GitError> {
    let g = g.clone().with_attr_source(head);
    let mut skipped = LeftOut::default();
    g.run(&["read-tree", head])?;
    let mut nested = NestedRepos::new(work_tree);
    nested.hide_in_submodules(&g, head, &mut skipped)?;
    // `--ignore-errors`: an unreadable file is skipped, not the whole
    // commit; a fatal error is the commit's (the worktree is kept).
    if let Err(e) = g.run(&["add", "-u", "--ignore-errors"]) {
        if e.message.contains("fatal:") {
            return Err(e);
        }
        skipped.push(format!("some files could not be added: {}", first_line(&e)));
    }
    let outside = edits_outside_sparse_patterns(&g, work_tree, scratch)?;
    add_files(&g, work_tree, &outside, scratch, &mut skipped)?;
    let sparse = mark_never_checked_out(&g, scratch)?;
    let untracked = nested.untracked_files(&g, &mut skipped)?;
    // Ignored = ignored by the base's rules AND by the rules as the run left
    // them: a tool's rules can un-ignore (commit more), never hide work.
    let by_base = BaseIgnores::checkout(&g, head, scratch)?.ignored(&g, &untracked, scratch)?;
    let by_base: Vec<GitPath> = by_base.into_iter().collect();
    // In a sparse checkout the rules as the run left them include the
    // `.gitignore`s outside the patterns, never checked out: git reads a
    // skip-worktree one from the index (read from the worktree only, they
    // were missing, and a tool's `.env` under one was committed; a
    // helper's find).
    let ignored = match sparse {
        true => check_ignore_with_index(&g, &by_base, scratch)?,
        false => check_ignore(&g, &by_base, scratch)?,
    };
    let new: Vec<GitPath> = untracked
        .into_iter()
        .filter(|p| !ignored.contains(p))
        .filter(|p| !head_of_a_git_dir(work_tree, p, &mut skipped))
        .collect();
    add_files(&g, work_tree, &new, scratch, &mut skipped)?;
    refused_by_git(&g, &nested, &new, &mut skipped)?;
    keep_repo_settings_as_in_base(&g, work_tree, head, scratch, &mut skipped)?;
    for (dir, _) in &nested.hidden {
        skipped.note(format!(
            "{}/.git (a nested repository's history; its files are committed)",
            shown(dir)
        ));
    }
    nested.report_submodule_paths(&mut skipped);
    nested.restore();
    Ok(skipped)
}

/// In a sparse checkout, the tracked files outside its patterns that are
/// in the worktree and differ from the base: `add -u` passes over paths
/// outside the patterns, so a tool's edit of one was neither committed nor
/// listed, and went with the worktree (a helper's find). Those absent are
/// not checked out, not deleted: they stay as in the base. A directory is
/// taken out of the index and left to [`NestedRepos`].
fn edits_outside_sparse_patterns(
    g: &Git,
    work_tree: &Path,
    scratch: &Path,
) -> Result<Vec<GitPath>, GitError> {
    if !sparse_checkout(g) {
        return Ok(Vec::new());
    }
    let dir = |p: &[u8]| real_dir_beneath(work_tree, Path::new(OsStr::from_bytes(p)));
    let file = |p: &[u8]| {
        std::fs::symlink_metadata(work_tree.join(OsStr::from_bytes(p))).is_ok_and(|m| !m.is_dir())
    };
    let changes = index_changes(g, "MTD")?;
    let files: Vec<GitPath> = changes
        .iter()
        .filter(|(status, p)| *status != b'D' && file(p))
        .map(|(_, p)| p.clone())
        .collect();
    // A directory where a file was reads as deleted or as a type change.
    let dirs: Vec<GitPath> = changes
        .into_iter()
        .filter(|(_, p)| dir(p))
        .map(|(_, p)| p)
        .collect();
    // A tracked file the run made a directory (a nested repository, to
    // git): out of the index, as `add -u` does inside the patterns, so the
    // listing of new files finds what is in it. It stayed, and its files
    // were in no list (a helper's find).
    let dirs = without_gitlinks(g, dirs)?;
    update_index(g, scratch, "--force-remove", &dirs)?;
    Ok(files)
}

/// In a sparse checkout: the private index's entries not in the worktree
/// (outside the patterns, never checked out: `add -u` has staged the
/// deletions inside them) are marked skip-worktree, as git's own index has
/// them. Whether the checkout is sparse.
fn mark_never_checked_out(g: &Git, scratch: &Path) -> Result<bool, GitError> {
    if !sparse_checkout(g) {
        return Ok(false);
    }
    let absent = index_differs(g, "D")?;
    update_index(g, scratch, "--skip-worktree", &absent)?;
    Ok(true)
}

/// `git update-index <flag>` on `paths` (none: nothing run).
fn update_index(g: &Git, scratch: &Path, flag: &str, paths: &[GitPath]) -> Result<(), GitError> {
    if paths.is_empty() {
        return Ok(());
    }
    let list = write_list(scratch, "update-index", paths)?;
    g.run_raw_ok(&["update-index", flag, "-z", "--stdin"], Some(&list.0))?;
    Ok(())
}

/// `paths` less the index's gitlinks (submodules, whose directory is
/// theirs to have).
fn without_gitlinks(g: &Git, mut paths: Vec<GitPath>) -> Result<Vec<GitPath>, GitError> {
    if paths.is_empty() {
        return Ok(paths);
    }
    let out = g.run_raw_ok(&["ls-files", "-s", "-z"], None)?;
    // `<mode> <object> <stage>\t<path>`
    let gitlinks: HashSet<&[u8]> = out
        .records()
        .filter(|r| r.starts_with(b"160000 "))
        .filter_map(|r| r.splitn(2, |b| *b == b'\t').nth(1))
        .collect();
    paths.retain(|p| !gitlinks.contains(p.as_slice()));
    Ok(paths)
}

/// The entries of `g`'s index marked skip-worktree (in a sparse checkout:
/// the files outside its patterns, never checked out); none elsewhere.
pub fn skip_worktree_entries(g: &Git) -> Result<HashSet<GitPath>, GitError> {
    if !sparse_checkout(g) {
        return Ok(HashSet::new());
    }
    let out = g.run_raw_ok(&["ls-files", "-t", "-z"], None)?;
    Ok(out
        .records()
        .filter_map(|r| r.strip_prefix(b"S "))
        .map(<[u8]>::to_vec)
        .collect())
}

/// In a kept sparse checkout whose index was just read from a commit: the
/// entries that were skip-worktree before (`was`, from
/// [`skip_worktree_entries`]) and are still not in the worktree are marked
/// so again, as git's checkout left them. `read-tree` clears the mark, and
/// `git status` there then showed every file outside the patterns as
/// deleted, which a plain `git commit -a` would have committed. Nothing
/// else is marked: a file inside the patterns that is missing (set aside,
/// or taken by a removal cut short) shows as deleted.
pub fn mark_absent_in_sparse_checkout(
    g: &Git,
    was: &HashSet<GitPath>,
    scratch: &Path,
) -> Result<(), GitError> {
    if was.is_empty() {
        return Ok(());
    }
    let mut absent = index_differs(g, "D")?;
    absent.retain(|p| was.contains(p));
    update_index(g, scratch, "--skip-worktree", &absent)
}

fn sparse_checkout(g: &Git) -> bool {
    g.run(&["config", "--bool", "core.sparseCheckout"])
        .is_ok_and(|v| v == "true")
}

/// The tracked paths whose worktree side differs from the index as
/// `filter` (`git diff-files --diff-filter`) says.
fn index_differs(g: &Git, filter: &str) -> Result<Vec<GitPath>, GitError> {
    Ok(index_changes(g, filter)?
        .into_iter()
        .map(|(_, p)| p)
        .collect())
}

/// [`index_differs`], each path with its status letter (`M`, `T`, `D`).
fn index_changes(g: &Git, filter: &str) -> Result<Vec<(u8, GitPath)>, GitError> {
    let filter = format!("--diff-filter={filter}");
    let out = g.run_raw_ok(&["diff-files", "-z", "--name-status", &filter], None)?;
    // `<status>\0<path>\0`, one pair per path.
    let records: Vec<&[u8]> = out.records().collect();
    Ok(records
        .chunks_exact(2)
        .filter_map(|pair| Some((*pair[0].first()?, pair[1].to_vec())))
        .collect())
}

/// Whether the new file `p` is the `HEAD` of a directory git would take
/// for a repository (with `objects/` and `refs/` beside it): left out of
/// the commit, and said so. Git looks for a repository at each directory,
/// `DIR/.git` first and then `DIR` itself, so a tool-written bare layout
/// in `src/` (with `core.worktree = ..` in its config) made the user's
/// `git status` in `src/` run its `core.fsmonitor`, in a kept worktree and
/// on the branch once checked out (a helper's find). Without its `HEAD`
/// the directory is not a repository to git.
fn head_of_a_git_dir(work_tree: &Path, p: &[u8], skipped: &mut LeftOut) -> bool {
    let (dir, name) = match p.iter().rposition(|b| *b == b'/') {
        Some(i) => (&p[..=i], &p[i + 1..]),
        None => (&b""[..], p),
    };
    if !name.eq_ignore_ascii_case(b"HEAD") {
        return false;
    }
    let at = work_tree.join(OsStr::from_bytes(dir));
    if git_dir_heads(&at).is_empty() {
        return false;
    }
    skipped.note(format!(
        "{} (a git directory's HEAD: left out, so git never takes {} for a repository)",
        shown(p),
        if dir.is_empty() {
            "the root".to_string()
        } else {
            shown(dir)
        }
    ));
    true
}

/// The files git takes a repository's identity and settings from (and,
/// below it, `hooks/`, which git runs).
const REPO_SETTINGS: [&[u8]; 4] = [b"head", b"config", b"config.worktree", b"commondir"];

/// Whether `rel` (a path below a repository's directory, lower case) is one
/// of its settings.
fn is_repo_setting(rel: &[u8]) -> bool {
    REPO_SETTINGS.contains(&rel) || rel.starts_with(b"hooks/")
}

/// In every directory the commit would hold as a repository to git (a
/// `HEAD` with `objects` and `refs`, or with `commondir`; in the index or
/// in the worktree; names compared in any letter case, directories too, as
/// a case-insensitive checkout of the branch on macOS or Windows sees
/// them), its settings ([`is_repo_setting`]) are committed as in the base:
/// what the run changed or added of them is left out, and listed, and the
/// worktree kept so it is not lost. A tool's edit of a tracked `docs/HEAD`,
/// or of a tracked test fixture's `config`, was committed, and the user's
/// `git status` in that directory of a checkout of the branch ran its
/// `core.fsmonitor` (helpers' finds). Only new files were checked before.
fn keep_repo_settings_as_in_base(
    g: &Git,
    work_tree: &Path,
    head: &str,
    scratch: &Path,
    skipped: &mut LeftOut,
) -> Result<(), GitError> {
    let index = g.run_raw_ok(&["ls-files", "-z", "-s"], None)?;
    // `<mode> <object> <stage>\t<path>`
    let entries: Vec<(&[u8], &[u8])> = index
        .records()
        .filter_map(|r| {
            let tab = r.iter().position(|b| *b == b'\t')?;
            Some((&r[..tab], &r[tab + 1..]))
        })
        .collect();
    let holds = repository_parts(&entries);
    let shaped = |dir: &[u8]| {
        let key = dir.to_ascii_lowercase();
        let in_index = holds
            .get(&key)
            .is_some_and(|f| f[0] && (f[3] || (f[1] && f[2])));
        in_index || !git_dir_heads(&work_tree.join(OsStr::from_bytes(dir))).is_empty()
    };
    let guarded: Vec<&(&[u8], &[u8])> = entries
        .iter()
        .filter(|(_, path)| {
            let lower = path.to_ascii_lowercase();
            (0..path.len()).filter(|i| path[*i] == b'/').any(|i| {
                is_repo_setting(&lower[i + 1..])
                    && holds.get(&lower[..i]).is_some_and(|f| f[0])
                    && shaped(&path[..i])
            })
        })
        .collect();
    if guarded.is_empty() {
        return Ok(());
    }
    let base = base_entries(g, head)?;
    let mut reset = Vec::new();
    let mut removed = Vec::new();
    for (stage, path) in guarded {
        match base.get(*path).cloned() {
            Some((mode, object)) if stage.starts_with(&[&mode[..], b" ", &object[..]].concat()) => {
                continue
            }
            // A blob or a link as it was; a directory or a submodule there
            // in the base is not one entry to put back (`--cacheinfo` of a
            // tree glued its files' names onto the entry's; a helper's find).
            Some((mode, object)) if mode != b"040000" && mode != b"160000" => {
                reset.push((mode, object, path.to_vec()))
            }
            _ => removed.push(path.to_vec()),
        }
        skipped.push(format!(
            "{} (a repository's settings in a directory git would take for one: kept as in the base)",
            shown(path)
        ));
    }
    update_index(g, scratch, "--force-remove", &removed)?;
    if !reset.is_empty() {
        // `<mode> <object>\t<path>` records, all in one `update-index`.
        let infos: Vec<GitPath> = reset
            .iter()
            .map(|(mode, object, path)| [&mode[..], b" ", &object[..], b"\t", &path[..]].concat())
            .collect();
        let list = write_list(scratch, "index-info", &infos)?;
        g.run_raw_ok(&["update-index", "-z", "--index-info"], Some(&list.0))?;
    }
    Ok(())
}

/// By directory (lower case): whether it holds a `HEAD` file, `objects`,
/// `refs`, a `commondir` file.
type RepositoryParts = HashMap<Vec<u8>, [bool; 4]>;

/// For each directory of the index (lower case), whether it holds, by the
/// name directly below it in any case: a `HEAD` file, `objects`, `refs`, a
/// `commondir` file.
fn repository_parts(entries: &[(&[u8], &[u8])]) -> RepositoryParts {
    let mut holds = RepositoryParts::default();
    for (_, path) in entries {
        let lower = path.to_ascii_lowercase();
        let parts: Vec<&[u8]> = lower.split(|b| *b == b'/').collect();
        for i in 0..parts.len() {
            let flags = holds.entry(parts[..i].join(&b'/')).or_default();
            let (n, last) = (parts[i], i + 1 == parts.len());
            flags[0] |= last && n == b"head";
            flags[1] |= n == b"objects";
            flags[2] |= n == b"refs";
            flags[3] |= last && n == b"commondir";
        }
    }
    // The root holds `.git` in every checkout: git never takes it for a
    // bare repository.
    holds.remove(&Vec::new());
    holds
}

/// A tree entry's mode and object name, as git prints them.
type ModeAndObject = (Vec<u8>, Vec<u8>);

/// Every entry of the tree `head`, trees too, by path (one `ls-tree`, not
/// one for each path looked up).
fn base_entries(g: &Git, head: &str) -> Result<HashMap<GitPath, ModeAndObject>, GitError> {
    let out = g.run_raw_ok(&["ls-tree", "-r", "-t", "-z", "--full-tree", head], None)?;
    // `<mode> <type> <object>\t<path>`
    Ok(out
        .records()
        .filter_map(|r| {
            let tab = r.iter().position(|b| *b == b'\t')?;
            let f: Vec<&[u8]> = r[..tab].split(|b| *b == b' ').collect();
            let entry = (f.first()?.to_vec(), f.get(2)?.to_vec());
            Some((r[tab + 1..].to_vec(), entry))
        })
        .collect())
}

/// The `HEAD` files of `dir` when git could take it for a repository: a
/// `HEAD` file with `objects/` and `refs/` beside it, or with a
/// `commondir` file (git then looks for `objects/` and `refs/` in the
/// directory it names: a tool's `src/HEAD` + `src/commondir` naming
/// `../lib/fake` was taken for a repository whose `config.worktree` set
/// `core.worktree = ..`, and the user's `git status` in `src/` ran its
/// `core.fsmonitor`; a helper's find). `objects` and `refs` of any kind:
/// git asks only that it may search them, so a link to an executable, or
/// one that dangles here and resolves in the user's checkout
/// (`src/refs -> ../.git/refs`), counts (a helper's find). Names in any case: on a
/// case-insensitive file system (a checkout of the branch on macOS or
/// Windows) `src/Head` with `Objects/` and `Refs/` is a repository too.
/// Empty when it is not one.
fn git_dir_heads(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let (mut heads, mut common, mut objects, mut refs) = (Vec::new(), false, false, false);
    for entry in read.flatten() {
        let name = entry.file_name();
        let n = name.as_bytes();
        if n.eq_ignore_ascii_case(b"HEAD") {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                heads.push(entry.path());
            }
        } else if n.eq_ignore_ascii_case(b"commondir") {
            common = true;
        } else if n.eq_ignore_ascii_case(b"objects") {
            objects = true;
        } else if n.eq_ignore_ascii_case(b"refs") {
            refs = true;
        }
    }
    match common || (objects && refs) {
        true => heads,
        false => Vec::new(),
    }
}

/// Report the new files that `update-index --add` passed over with a
/// warning and a zero status: names git refuses (`.GIT/…` or `.Git/…`,
/// `.git.`, `git~1`, a `.git` file naming no repository). They were not
/// in any list, and were deleted with the worktree (a helper's find).
fn refused_by_git(
    g: &Git,
    nested: &NestedRepos,
    new: &[GitPath],
    skipped: &mut LeftOut,
) -> Result<(), GitError> {
    if new.is_empty() {
        return Ok(());
    }
    let out = g.run_raw(
        &["ls-files", "-o", "-z", "--", ".", &nested.exclude()],
        None,
    )?;
    let still: HashSet<&[u8]> = out.records().collect();
    let refused: Vec<&GitPath> = new
        .iter()
        .filter(|p| still.contains(p.as_slice()))
        .collect();
    for p in refused.iter().take(MAX_LISTED) {
        skipped.push(format!("{} (git refuses this name)", shown(p)));
    }
    if refused.len() > MAX_LISTED {
        skipped.push(format!(
            "... and {} more files whose names git refuses",
            refused.len() - MAX_LISTED
        ));
    }
    Ok(())
}

/// Report the directories `git ls-files` warned it could not open
/// (unreadable, or a path too long to open): their files are not committed.
fn unreadable_dirs(stderr: &str, skipped: &mut LeftOut) {
    const PREFIX: &str = "warning: could not open directory '";
    let dirs: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix(PREFIX))
        .collect();
    for d in dirs.iter().take(MAX_LISTED) {
        let (path, why) = d.rsplit_once("': ").unwrap_or((d, "unreadable"));
        skipped.push(format!(
            "{} (directory could not be read: {why})",
            crate::run::progress::shorten(&crate::run::progress::terminal_safe(path), 160)
        ));
    }
    if dirs.len() > MAX_LISTED {
        skipped.push(format!(
            "... and {} more directories that could not be read",
            dirs.len() - MAX_LISTED
        ));
    }
}

/// `.git` entries of nested repositories, moved aside while staging.
struct NestedRepos {
    work_tree: PathBuf,
    /// The name each nested `.git` is moved to (same directory).
    aside: String,
    /// (repository dir, relative to the work tree; its moved `.git`).
    hidden: Vec<(GitPath, PathBuf)>,
    /// The submodule paths of the base (gitlinks), and the `.git` a tool
    /// wrote into one, moved aside for good: put back, it made the user's
    /// own `git status` in a kept worktree run that repository's
    /// `core.fsmonitor` (a helper's find).
    gitlinks: Vec<(GitPath, Option<PathBuf>)>,
}

impl NestedRepos {
    fn new(work_tree: &Path) -> Self {
        Self {
            work_tree: work_tree.to_path_buf(),
            aside: aside_name().to_string(),
            hidden: Vec::new(),
            gitlinks: Vec::new(),
        }
    }

    /// The pathspec that keeps moved `.git` dirs out of every listing.
    fn exclude(&self) -> String {
        format!(":(exclude,glob)**/{}/**", self.aside)
    }

    /// Every untracked file (no ignore rules), after moving aside the `.git`
    /// of each nested repository found (git lists such a repo as `dir/`).
    fn untracked_files(
        &mut self,
        g: &Git,
        skipped: &mut LeftOut,
    ) -> Result<Vec<GitPath>, GitError> {
        for _ in 0..MAX_NESTING_ROUNDS {
            let out = g.run_raw_ok(&["ls-files", "-o", "-z", "--", ".", &self.exclude()], None)?;
            unreadable_dirs(&out.stderr, skipped);
            let (dirs, files): (Vec<&[u8]>, Vec<&[u8]>) =
                out.records().partition(|r| r.ends_with(b"/"));
            let mut moved = false;
            for d in &dirs {
                let dir = &d[..d.len() - 1];
                if let Some(to) = self.move_aside(dir, skipped) {
                    self.hidden.push((dir.to_vec(), to));
                    moved = true;
                }
            }
            if !moved {
                for d in dirs {
                    skipped.push(format!("{} (could not be read)", shown(d)));
                }
                return Ok(files.into_iter().map(<[u8]>::to_vec).collect());
            }
        }
        skipped.push("nested repositories more than 16 levels deep".into());
        let out = g.run_raw(&["ls-files", "-o", "-z", "--", ".", &self.exclude()], None)?;
        Ok(out
            .records()
            .filter(|r| !r.ends_with(b"/"))
            .map(<[u8]>::to_vec)
            .collect())
    }

    /// Move aside the `.git` of every submodule path of `head` (a gitlink:
    /// `worktree add` leaves its directory empty, so a `.git` there is a
    /// tool's). With one there, `git add -u` ran `git status` inside it as
    /// that repository, with its config: a promisor remote's
    /// `core.sshCommand` ran on the host (a helper's find).
    fn hide_in_submodules(
        &mut self,
        g: &Git,
        head: &str,
        skipped: &mut LeftOut,
    ) -> Result<(), GitError> {
        let listed = g.run_raw_ok(&["ls-tree", "-r", "-z", "--full-tree", head], None)?;
        // `<mode> <type> <object>\t<path>`
        let gitlinks: Vec<&[u8]> = listed
            .records()
            .filter(|r| r.starts_with(b"160000 "))
            .filter_map(|r| r.splitn(2, |b| *b == b'\t').nth(1))
            .collect();
        for path in gitlinks {
            let moved = self.move_aside(path, skipped);
            self.gitlinks.push((path.to_vec(), moved));
        }
        Ok(())
    }

    /// Report what a tool wrote into the submodule paths of the base: its
    /// `.git` there (left aside) and any other entry, which git does not
    /// list under a gitlink (`ls-files -o` does not look inside), so files
    /// written there were dropped without a word (a helper's find).
    fn report_submodule_paths(&self, skipped: &mut LeftOut) {
        for (dir, moved) in &self.gitlinks {
            if let Some(to) = moved {
                let name = to.file_name().map(|n| n.to_string_lossy().into_owned());
                skipped.note(format!(
                    "{}/.git (written by a tool in a submodule path; left aside as {}, never used)",
                    shown(dir),
                    name.unwrap_or_default()
                ));
            }
            if !real_dir_beneath(&self.work_tree, Path::new(OsStr::from_bytes(dir))) {
                continue;
            }
            let at = self.work_tree.join(OsStr::from_bytes(dir));
            let entries = count_entries(&at, &self.aside, MAX_COUNTED);
            if entries > 0 {
                let more = if entries >= MAX_COUNTED {
                    "or more "
                } else {
                    ""
                };
                skipped.push(format!(
                    "{}/ ({entries} {more}entries written inside a submodule path, which git does not commit)",
                    shown(dir)
                ));
            }
        }
    }

    /// Move `<dir>/.git` aside: where it went, or `None` when there is
    /// none or it cannot move.
    fn move_aside(&self, dir: &[u8], skipped: &mut LeftOut) -> Option<PathBuf> {
        if !real_dir_beneath(&self.work_tree, Path::new(OsStr::from_bytes(dir))) {
            // A tool made the path (or a directory on it) a symlink: the
            // rename would follow it out of the worktree and move another
            // repository's `.git` (a helper's find). Nothing git reads
            // is there: git does not follow links.
            return None;
        }
        let base = self.work_tree.join(OsStr::from_bytes(dir));
        let (from, to) = (base.join(".git"), base.join(&self.aside));
        if std::fs::symlink_metadata(&from).is_err() || std::fs::symlink_metadata(&to).is_ok() {
            return None;
        }
        match std::fs::rename(&from, &to) {
            Ok(()) => Some(to),
            Err(e) => {
                skipped.push(format!("{}/.git: cannot move aside: {e}", shown(dir)));
                None
            }
        }
    }

    /// Put every moved `.git` of a nested repository back (innermost
    /// first); those of submodule paths stay aside.
    fn restore(&mut self) {
        while let Some((_, moved)) = self.hidden.pop() {
            if let Some(dir) = moved.parent() {
                let _ = std::fs::rename(&moved, dir.join(".git"));
            }
        }
    }
}

impl Drop for NestedRepos {
    fn drop(&mut self) {
        self.restore();
    }
}

/// The name this process sets a `.git` aside under: [`ASIDE_PREFIX`], the
/// process and the clock's nanoseconds at its first use (one name for the
/// process, which no tool can guess: a walk skips exactly the entries this
/// process set aside, never a tool's directory named like them).
fn aside_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        format!("{ASIDE_PREFIX}{}-{nanos}", std::process::id())
    })
}

/// The name a kept worktree's `.git`s and git directories' `HEAD`s are set
/// aside under: this process's, marked apart from staging's (a `HEAD`
/// renamed in a directory staging set a `.git` aside in).
fn kept_aside_name() -> String {
    format!("{}-kept", aside_name())
}

/// Entries walked when a kept worktree is searched for `.git`s.
const MAX_WALKED: usize = 1_000_000;

/// Before a worktree is left to the user: every `.git` below its root (a
/// directory, file or link a tool wrote), and the `HEAD` of every directory
/// git would take for a repository ([`git_dir_heads`]), is renamed aside,
/// so that no git
/// the user runs in it, at the root or in a subdirectory, takes that
/// repository and its config (`core.fsmonitor` ran for a plain `git
/// status` in `src/` under a tool's `src/.git`, which staging never saw
/// since `src/` holds tracked files; a helper's find). Returns one line
/// per `.git` set aside, and one if the walk stopped early.
///
/// A git directory the base tracks, which the run left as checked out
/// (`g`: git on the worktree's own index, the base's), is the user's (a
/// project's test fixture): left in place. Its `HEAD` was set aside as a
/// tool's, and a later `git commit -a` deleted it (a helper's find).
pub fn set_aside_git_dirs(g: &Git, work_tree: &Path) -> Vec<String> {
    let aside = kept_aside_name();
    let mut lines = Vec::new();
    let mut walked = 0usize;
    let mut dirs = vec![work_tree.to_path_buf()];
    // Directories holding tracked files: only those can be the user's
    // (asked of git once, not three times for each of a tool's thousands).
    let mut tracked_dirs: Option<HashSet<GitPath>> = None;
    while let Some(d) = dirs.pop() {
        let heads = match d == work_tree {
            true => Vec::new(),
            false => git_dir_heads(&d),
        };
        let users = |tracked: &mut Option<HashSet<GitPath>>| {
            let rel = d
                .strip_prefix(work_tree)
                .unwrap_or(&d)
                .as_os_str()
                .as_bytes();
            tracked
                .get_or_insert_with(|| dirs_of_tracked_files(g))
                .contains(rel)
                && as_checked_out(g, work_tree, &d)
        };
        if !heads.is_empty() && !users(&mut tracked_dirs) {
            // `HEAD` and `Head` both: each under a name of its own.
            for (i, head) in heads.iter().enumerate() {
                let name = match i {
                    0 => aside.clone(),
                    _ => format!("{aside}-{i}"),
                };
                lines.push(set_aside(work_tree, head, &name));
            }
        }
        let Ok(read) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in read.flatten() {
            walked += 1;
            if walked > MAX_WALKED {
                lines.push(format!(
                    "the search for .git entries stopped after {MAX_WALKED} entries"
                ));
                return lines;
            }
            let name = entry.file_name();
            if name == ".git" {
                if d != work_tree {
                    lines.push(set_aside(work_tree, &entry.path(), &aside));
                }
            } else if name == aside_name() || name.as_bytes() == aside.as_bytes() {
                // Set aside by this process (a submodule path's `.git`, or
                // one just renamed here): left as it is. A tool's directory
                // named like one is searched like any other (a `.git` in a
                // `.git-aside-wasm-agent-app/` was left in place; a helper's
                // find).
            } else if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(entry.path());
            }
        }
    }
    if lines.len() > MAX_LISTED {
        let more = lines.len() - MAX_LISTED;
        lines.truncate(MAX_LISTED);
        lines.push(format!("... and {more} more set aside the same way"));
    }
    lines
}

/// Every directory holding a file `g`'s index tracks, at any depth
/// (relative to the work tree, `/`-separated); empty if git fails.
fn dirs_of_tracked_files(g: &Git) -> HashSet<GitPath> {
    let Ok(out) = g.run_raw(&["ls-files", "-z"], None) else {
        return HashSet::new();
    };
    let mut dirs = HashSet::new();
    for path in out.records() {
        let mut at = path;
        while let Some(i) = at.iter().rposition(|b| *b == b'/') {
            at = &at[..i];
            if !dirs.insert(at.to_vec()) {
                break;
            }
        }
    }
    dirs
}

/// Whether the directory `dir` holds files `g`'s index tracks, and nothing
/// else, all as checked out (no file new, changed or touched).
fn as_checked_out(g: &Git, work_tree: &Path, dir: &Path) -> bool {
    let Ok(rel) = dir.strip_prefix(work_tree) else {
        return false;
    };
    let spec = format!(":(literal){}/", rel.to_string_lossy());
    let listed = |args: &[&str]| {
        g.run_raw(&[args, &["--", spec.as_str()]].concat(), None)
            .ok()
            .filter(|out| out.code == 0)
            .map(|out| out.stdout)
    };
    // With stages: a submodule's entry (mode 160000) makes a directory look
    // tracked while git lists nothing inside it, and a tool's repository
    // written at a submodule path passed as the project's (a helper's find).
    let tracked = listed(&["ls-files", "-z", "-s"]);
    let gitlink = |t: &[u8]| t.split(|b| *b == 0).any(|r| r.starts_with(b"160000 "));
    let untracked = listed(&["ls-files", "-z", "-o"]);
    let changed = listed(&["diff-files", "-z", "--name-only"]);
    matches!(
        (tracked, untracked, changed),
        (Some(t), Some(u), Some(c)) if !t.is_empty() && !gitlink(&t) && u.is_empty() && c.is_empty()
    )
}

/// Renames the `.git` at `path` to `aside` beside it; the line to report.
fn set_aside(work_tree: &Path, path: &Path, aside: &str) -> String {
    let rel = path.strip_prefix(work_tree).unwrap_or(path);
    let shown_rel = crate::run::progress::terminal_safe(&rel.to_string_lossy());
    let to = path.with_file_name(aside);
    match std::fs::rename(path, &to) {
        Ok(()) => format!(
            "{shown_rel} (a tool's; left aside as {aside}: rename it back to use that repository)"
        ),
        Err(e) => format!("{shown_rel} (a tool's; could not be set aside: {e})"),
    }
}

/// Whether `rel` is a directory under `root` with no symlink on the way
/// (each component checked without following it). Nothing changes the
/// worktree meanwhile: its servers are closed before the work is kept.
fn real_dir_beneath(root: &Path, rel: &Path) -> bool {
    let mut at = root.to_path_buf();
    for part in rel.components() {
        let std::path::Component::Normal(name) = part else {
            return false;
        };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_dir() => {}
            _ => return false,
        }
    }
    true
}

/// Entries under `dir` (recursively, links not followed, `skip` left out),
/// counted up to `max`.
fn count_entries(dir: &Path, skip: &str, max: usize) -> usize {
    let mut count = 0;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(read) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in read.flatten() {
            if d == dir && entry.file_name() == skip {
                continue;
            }
            count += 1;
            if count >= max {
                return count;
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(entry.path());
            }
        }
    }
    count
}

/// The base commit's `.gitignore` files, checked out into a scratch dir.
struct BaseIgnores {
    dir: PathBuf,
}

impl BaseIgnores {
    fn checkout(g: &Git, head: &str, scratch: &Path) -> Result<Self, GitError> {
        let dir = scratch.join(format!("ignore-rules-{}", std::process::id()));
        let _ = remove_tree(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| io_error("scratch dir", &e))?;
        let index = scratch.join(format!("ignore-rules-{}.index", std::process::id()));
        let rules = Self { dir };
        let at = g.at_work_tree(&rules.dir).with_index(&index);
        let listed = at.run_raw(&["ls-tree", "-r", "-z", "--name-only", head], None)?;
        let gitignores: Vec<&[u8]> = listed
            .records()
            .filter(|p| p.rsplit(|b| *b == b'/').next() == Some(b".gitignore"))
            .collect();
        if !gitignores.is_empty() {
            at.run(&["read-tree", head])?;
            let list = write_list(scratch, "gitignores", &gitignores)?;
            at.run_raw_ok(&["checkout-index", "-f", "-z", "--stdin"], Some(&list.0))?;
        }
        let _ = std::fs::remove_file(&index);
        Ok(rules)
    }

    /// The `paths` the base rules (and `info/exclude`) ignore.
    fn ignored(
        &self,
        g: &Git,
        paths: &[GitPath],
        scratch: &Path,
    ) -> Result<HashSet<GitPath>, GitError> {
        check_ignore(&g.at_work_tree(&self.dir), paths, scratch)
    }
}

/// The `paths` that `git check-ignore` (work tree of `g`) says are ignored.
fn check_ignore(g: &Git, paths: &[GitPath], scratch: &Path) -> Result<HashSet<GitPath>, GitError> {
    check_ignore_as(
        g,
        paths,
        scratch,
        &["check-ignore", "--no-index", "-z", "--stdin"],
    )
}

/// [`check_ignore`] with `g`'s index: a skip-worktree `.gitignore` is read
/// from it, as git does in a sparse checkout (`paths` are untracked).
fn check_ignore_with_index(
    g: &Git,
    paths: &[GitPath],
    scratch: &Path,
) -> Result<HashSet<GitPath>, GitError> {
    check_ignore_as(g, paths, scratch, &["check-ignore", "-z", "--stdin"])
}

fn check_ignore_as(
    g: &Git,
    paths: &[GitPath],
    scratch: &Path,
    args: &[&str],
) -> Result<HashSet<GitPath>, GitError> {
    if paths.is_empty() {
        return Ok(HashSet::new());
    }
    // Each path as `./path`: `check-ignore` reads its input as pathspecs
    // (and has no literal mode), and a file a tool named `:!notes` or
    // `:(glob)*` made it fail, the commit with it (a helper's find).
    let dotted: Vec<GitPath> = paths.iter().map(|p| [b"./", &p[..]].concat()).collect();
    let list = write_list(scratch, "check-ignore", &dotted)?;
    let out = g.run_raw(args, Some(&list.0))?;
    // 0: some ignored, 1: none.
    if out.code > 1 {
        return Err(GitError {
            args: "check-ignore".into(),
            message: out.stderr,
        });
    }
    Ok(out
        .records()
        .map(|r| r.strip_prefix(b"./").unwrap_or(r).to_vec())
        .collect())
}

impl Drop for BaseIgnores {
    fn drop(&mut self) {
        let _ = remove_tree(&self.dir);
    }
}

/// `update-index --add` the new files; when a batch fails, its halves are
/// added apart, down to the files that fail alone (an unreadable file is
/// then skipped, not the whole commit). One by one, one bad file among
/// 10,000 new ones took 67 s of git processes, each reading and writing
/// the growing index (a helper's find).
fn add_files(
    g: &Git,
    work_tree: &Path,
    files: &[GitPath],
    scratch: &Path,
    skipped: &mut LeftOut,
) -> Result<(), GitError> {
    let mut failed = Vec::new();
    add_halving(g, files, scratch, &mut failed)?;
    for (f, stderr) in failed.iter().take(MAX_LISTED) {
        let why = unreadable(work_tree, f).unwrap_or_else(|| stderr.clone());
        skipped.push(format!(
            "{}: {}",
            shown(f),
            crate::run::progress::shorten(&why, 200)
        ));
    }
    if failed.len() > MAX_LISTED {
        skipped.push(format!(
            "... and {} more files that could not be added",
            failed.len() - MAX_LISTED
        ));
    }
    Ok(())
}

/// Adds `files` in one `update-index` (which adds all or none), else each
/// half apart; the files that fail alone go to `failed` with git's error.
fn add_halving(
    g: &Git,
    files: &[GitPath],
    scratch: &Path,
    failed: &mut Vec<(GitPath, String)>,
) -> Result<(), GitError> {
    if files.is_empty() {
        return Ok(());
    }
    let list = write_list(scratch, "new", files)?;
    let args = ["update-index", "--add", "--replace", "-z", "--stdin"];
    let out = g.run_raw(&args, Some(&list.0))?;
    if out.code == 0 {
        return Ok(());
    }
    if let [one] = files {
        failed.push((one.clone(), out.stderr));
        return Ok(());
    }
    let (a, b) = files.split_at(files.len() / 2);
    add_halving(g, a, scratch, failed)?;
    add_halving(g, b, scratch, failed)
}

fn unreadable(work_tree: &Path, f: &[u8]) -> Option<String> {
    let p = work_tree.join(OsStr::from_bytes(f));
    let meta = std::fs::symlink_metadata(&p).ok()?;
    if meta.is_file() {
        std::fs::File::open(&p).err().map(|e| e.to_string())
    } else {
        None
    }
}

/// A NUL-separated list in a scratch file, deleted on drop.
struct ListFile(PathBuf);

impl Drop for ListFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn write_list<P: AsRef<[u8]>>(
    scratch: &Path,
    what: &str,
    items: &[P],
) -> Result<ListFile, GitError> {
    let path = scratch.join(format!("{what}-{}.list", std::process::id()));
    let mut bytes = Vec::new();
    for i in items {
        bytes.extend_from_slice(i.as_ref());
        bytes.push(0);
    }
    std::fs::write(&path, bytes).map_err(|e| io_error("list file", &e))?;
    Ok(ListFile(path))
}

fn io_error(what: &str, e: &std::io::Error) -> GitError {
    GitError {
        args: what.into(),
        message: e.to_string(),
    }
}

fn first_line(e: &GitError) -> String {
    let line = e.message.lines().next().unwrap_or("").to_string();
    crate::run::progress::shorten(&line, 200)
}
