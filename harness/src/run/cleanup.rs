//! Removing a directory tree that a tool may have built to be hostile:
//! arbitrarily deep, with symlinks and unreadable entries.
//!
//! Iterative, never recursive, and never follows a link. Paths never grow:
//! each subdirectory found is first *moved up* to a fresh name directly under
//! the root (`<root>/.rm-<n>`), so every path used is at most two levels below
//! the root however deep the tree was (no `ENAMETOOLONG`, no stack growth).
//! Permission problems are fixed (`chmod u+rwx` on the directory) and the
//! step retried once. Nothing aborts: what could not be removed is reported.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What could not be removed (empty on success).
#[derive(Debug, Default)]
pub struct CleanupReport {
    pub failures: Vec<String>,
}

impl CleanupReport {
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }

    fn fail(&mut self, what: &str, path: &Path, e: &io::Error) {
        if self.failures.len() < 20 {
            self.failures
                .push(format!("{what} {}: {e}", path.display()));
        }
    }
}

/// Whether `name` is one [`remove_tree`] gives the directories it lifts
/// to its root (`.rm-<n>`).
pub fn is_remover_dir(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .and_then(|n| n.strip_prefix(".rm-"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Remove `root` and everything below it. A symlink `root` is unlinked, not followed.
pub fn remove_tree(root: &Path) -> CleanupReport {
    let mut report = CleanupReport::default();
    let meta = match fs::symlink_metadata(root) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return report,
        Err(e) => {
            report.fail("stat", root, &e);
            return report;
        }
    };
    if !meta.is_dir() {
        if let Err(e) = fs::remove_file(root) {
            report.fail("unlink", root, &e);
        }
        return report;
    }
    let mut mover = Mover {
        root: root.to_path_buf(),
        next: 0,
    };
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        empty_one_level(&dir, &mut mover, &mut pending, &mut report);
        if dir != root {
            remove_dir_retry(&dir, &mut report);
        }
    }
    remove_dir_retry(root, &mut report);
    report
}

/// Fresh names directly under the root.
struct Mover {
    root: PathBuf,
    next: u64,
}

impl Mover {
    /// Move directory `dir` to `<root>/.rm-<n>`; the new path, or `dir` itself
    /// when it cannot be moved (e.g. another file system).
    fn lift(&mut self, dir: &Path) -> PathBuf {
        make_writable(dir);
        for _ in 0..1000 {
            self.next += 1;
            let to = self.root.join(format!(".rm-{}", self.next));
            if fs::symlink_metadata(&to).is_ok() {
                continue;
            }
            match fs::rename(dir, &to) {
                Ok(()) => return to,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(_) => return dir.to_path_buf(),
            }
        }
        dir.to_path_buf()
    }
}

/// Unlink the non-directories in `dir`; queue its subdirectories (lifted).
fn empty_one_level(
    dir: &Path,
    mover: &mut Mover,
    pending: &mut Vec<PathBuf>,
    report: &mut CleanupReport,
) {
    let entries = match fs::read_dir(dir) {
        Ok(d) => d,
        Err(_) => {
            make_writable(dir);
            match fs::read_dir(dir) {
                Ok(d) => d,
                Err(e) => return report.fail("read", dir, &e),
            }
        }
    };
    // Collect first: moving entries while iterating may skip some.
    let mut subdirs = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                report.fail("read", dir, &e);
                continue;
            }
        };
        let path = entry.path();
        // `file_type` comes from the directory entry: links are not followed.
        let is_dir = entry
            .file_type()
            .map(|t| t.is_dir())
            .or_else(|_| fs::symlink_metadata(&path).map(|m| m.is_dir()))
            .unwrap_or(false);
        if is_dir {
            subdirs.push(path);
        } else if fs::remove_file(&path).is_err() {
            make_writable(dir);
            if let Err(e) = fs::remove_file(&path) {
                report.fail("unlink", &path, &e);
            }
        }
    }
    for sub in subdirs {
        make_writable(dir);
        pending.push(mover.lift(&sub));
    }
}

fn remove_dir_retry(dir: &Path, report: &mut CleanupReport) {
    if fs::remove_dir(dir).is_ok() {
        return;
    }
    if let Some(parent) = dir.parent() {
        make_writable(parent);
    }
    match fs::remove_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => report.fail("rmdir", dir, &e),
    }
}

/// `chmod u+rwx` on a real directory (never through a link).
fn make_writable(dir: &Path) {
    if let Ok(m) = fs::symlink_metadata(dir) {
        if m.is_dir() {
            let mode = m.permissions().mode() | 0o700;
            let _ = fs::set_permissions(dir, fs::Permissions::from_mode(mode));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use wasm_mcp_harness_testing::{build_deep_chain, fast_tempdir};

    #[test]
    fn removes_a_30000_level_tree_without_recursion() {
        let d = fast_tempdir();
        let root = d.path().join("wt");
        fs::create_dir(&root).unwrap();
        build_deep_chain(&root, "deep", 30_000).unwrap();
        // std's recursive remove would need ~30k stack frames; run on a small stack.
        let r = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || remove_tree(&root))
            .unwrap()
            .join()
            .unwrap();
        assert!(r.ok(), "{:?}", r.failures);
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn never_follows_links_and_fixes_permissions() {
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("keep.txt"), "x").unwrap();
        let root = d.path().join("wt");
        fs::create_dir_all(root.join("a/locked/inner")).unwrap();
        fs::write(root.join("a/locked/inner/f"), "x").unwrap();
        symlink(&outside, root.join("link-dir")).unwrap();
        symlink(&outside, root.join("a/locked/link")).unwrap();
        symlink(d.path().join("nowhere"), root.join("dangling")).unwrap();
        fs::set_permissions(root.join("a/locked"), fs::Permissions::from_mode(0o000)).unwrap();
        let r = remove_tree(&root);
        assert!(r.ok(), "{:?}", r.failures);
        assert!(!root.exists());
        assert!(outside.join("keep.txt").exists(), "a link was followed");
    }

    #[test]
    fn a_symlink_root_is_unlinked_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("t");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("f"), "x").unwrap();
        symlink(&target, d.path().join("l")).unwrap();
        assert!(remove_tree(&d.path().join("l")).ok());
        assert!(target.join("f").exists());
        assert!(remove_tree(&d.path().join("missing")).ok());
    }
}
