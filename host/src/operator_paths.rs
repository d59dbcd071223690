//! Paths that are the operator's (the audit log, the compile cache): never
//! inside the worktree, where a plugin with write access could change what
//! they hold. One rule for both: the path is resolved as it will be
//! written, following symlinks, also dangling ones and parts not made yet.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// `path` opened for reading without blocking: a FIFO in place of a file
/// the server reads (a plugin, its signature) opens at once instead of
/// waiting for a writer, for the caller to refuse as not a regular file.
pub fn open_without_blocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
}

/// `path` as it will be written: symlinks followed (a dangling one to
/// where it points), parts that do not exist yet taken as they are.
pub fn resolve_new(path: &Path) -> Result<PathBuf> {
    let mut path = path.to_path_buf();
    // Names below `path` not made yet, innermost first.
    let mut rest: Vec<OsString> = Vec::new();
    for _ in 0..40 {
        if let Ok(p) = path.canonicalize() {
            return Ok(rest.iter().rev().fold(p, |p, part| p.join(part)));
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        match std::fs::read_link(&path) {
            Ok(target) => path = dir.join(target),
            Err(_) => {
                // `x/..` with `x` missing: nothing to resolve it against.
                let Some(name) = path.file_name() else {
                    anyhow::bail!("its directory {} does not exist", path.display());
                };
                rest.push(name.to_owned());
                path = dir;
            }
        }
    }
    anyhow::bail!("too many levels of symbolic links")
}

/// `path` resolved ([`resolve_new`]), refused when it lies inside
/// `worktree`; `why` says what a plugin could do there.
pub fn outside_worktree(path: &Path, worktree: &Path, why: &str) -> Result<PathBuf> {
    let resolved = resolve_new(path)?;
    let tree = worktree
        .canonicalize()
        .with_context(|| format!("worktree {}", worktree.display()))?;
    anyhow::ensure!(
        !resolved.starts_with(&tree),
        "it lies inside the worktree {} (as {}), where {why}: put it outside",
        tree.display(),
        resolved.display()
    );
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_is_found_through_links_dangling_or_not_and_unmade_parts() {
        let wt = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let link = outside.path().join("link");
        std::os::unix::fs::symlink(wt.path(), &link).unwrap();
        let dangling = outside.path().join("dangling");
        std::os::unix::fs::symlink(wt.path().join("not-yet"), &dangling).unwrap();
        for inside in [
            wt.path().join(".cache/wasm-mcp"),
            link.join("not/made/yet"),
            dangling.clone(),
            dangling.join("cache"),
        ] {
            let e = outside_worktree(&inside, wt.path(), "x")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("inside the worktree"),
                "{}: {e}",
                inside.display()
            );
        }
        let fine = outside.path().join("cache/wasm-mcp");
        assert_eq!(
            outside_worktree(&fine, wt.path(), "x").unwrap(),
            outside
                .path()
                .canonicalize()
                .unwrap()
                .join("cache/wasm-mcp")
        );
    }
}
