//! Lexical path normalization: model paths are relative to the worktree root.

use std::path::{Path, PathBuf};

use crate::api::{Code, ToolErr};

/// Normalizes a model-supplied path to a worktree-relative one: leading `/`
/// stripped, empty and `.` components dropped, `..` resolved lexically.
/// A `..` that would climb above the root is refused (permission-denied).
/// Returns `"."` for the root itself.
pub fn normalize(raw: &str) -> Result<String, ToolErr> {
    if raw.contains('\0') {
        return Err(ToolErr::invalid("path must not contain NUL bytes"));
    }
    let mut parts: Vec<&str> = Vec::new();
    for c in raw.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(ToolErr::new(
                        Code::PermissionDenied,
                        format!("path escapes the worktree: {raw}"),
                    ));
                }
            }
            c => parts.push(c),
        }
    }
    Ok(if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    })
}

/// True for the worktree's git metadata (`.git`, a file in a linked
/// worktree, or anything under it). Tools may read it but never write it:
/// the harness relies on it to remove the worktree.
pub fn is_git_metadata(rel: &str) -> bool {
    rel.split('/').next() == Some(".git")
}

/// Most symlinks followed while resolving one path (as Linux's MAXSYMLINKS).
const MAX_LINK_HOPS: usize = 40;

/// The worktree-relative path `rel` (normalized) really names: every
/// symlink along it followed, component by component, with `read_link`
/// (WASI has no `canonicalize`). Components that do not exist yet are kept
/// as they are. A link that leads out of the worktree (absolute, or `..`
/// above the root) is refused (permission-denied), as is a link loop.
pub fn resolve_links(root: &Path, rel: &str) -> Result<String, ToolErr> {
    let denied = |why: &str| ToolErr::new(Code::PermissionDenied, format!("{rel}: {why}"));
    let mut done: Vec<String> = Vec::new();
    let mut todo: Vec<String> = rel.rsplit('/').map(str::to_string).collect();
    let mut hops = 0;
    while let Some(c) = todo.pop() {
        match c.as_str() {
            "" | "." => continue,
            ".." => {
                done.pop()
                    .ok_or_else(|| denied("a link leads out of the worktree"))?;
                continue;
            }
            _ => done.push(c),
        }
        let Ok(target) = wasm_mcp_guest::fs::read_link(resolve(root, &done.join("/"))) else {
            continue;
        };
        hops += 1;
        if hops > MAX_LINK_HOPS {
            return Err(denied("too many levels of symbolic links"));
        }
        let target = target
            .to_str()
            .ok_or_else(|| denied("a link target is not UTF-8"))?
            .to_string();
        if target.starts_with('/') {
            return Err(denied("a link leads out of the worktree"));
        }
        done.pop();
        todo.extend(target.rsplit('/').map(str::to_string));
    }
    Ok(if done.is_empty() {
        ".".to_string()
    } else {
        done.join("/")
    })
}

/// The path to open for a normalized relative path under `root`.
pub fn resolve(root: &Path, rel: &str) -> PathBuf {
    if rel == "." {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}

/// Joins a normalized relative directory and an entry name.
pub fn join_rel(dir: &str, name: &str) -> String {
    if dir == "." {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        assert_eq!(normalize("").unwrap(), ".");
        assert_eq!(normalize(".").unwrap(), ".");
        assert_eq!(normalize("/").unwrap(), ".");
        assert_eq!(normalize("a/b").unwrap(), "a/b");
        assert_eq!(normalize("/a//./b/").unwrap(), "a/b");
        assert_eq!(normalize("a/../b").unwrap(), "b");
        assert_eq!(normalize("a/b/../..").unwrap(), ".");
        assert_eq!(normalize("/etc/passwd").unwrap(), "etc/passwd");
    }

    #[test]
    fn refuses_escape() {
        for p in ["..", "../x", "/..", "a/../../b", "./../.."] {
            let e = normalize(p).unwrap_err();
            assert_eq!(e.code, Code::PermissionDenied, "{p}");
            assert!(e.message.contains("path escapes the worktree"), "{p}");
        }
        assert_eq!(normalize("a\0b").unwrap_err().code, Code::InvalidArguments);
    }

    #[test]
    fn spots_git_metadata() {
        assert!(is_git_metadata(".git"));
        assert!(is_git_metadata(".git/config"));
        assert!(!is_git_metadata(".github/workflows/ci.yml"));
        assert!(!is_git_metadata("src/.git"));
        assert!(!is_git_metadata("."));
    }

    struct Tmp(std::path::PathBuf);

    impl Tmp {
        fn new(tag: &str) -> Self {
            let p = std::env::temp_dir().join(format!("paths-test-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(p.join(".git/hooks")).unwrap();
            std::fs::create_dir_all(p.join("src")).unwrap();
            Tmp(p)
        }
        fn link(&self, name: &str, target: &str) {
            std::os::unix::fs::symlink(target, self.0.join(name)).unwrap();
        }
    }

    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn resolve_links_follows_every_component() {
        let t = Tmp::new("follow");
        t.link("g", ".git");
        t.link("here", ".");
        t.link("src/up", "..");
        t.link("hook", ".git/hooks/pre-commit");
        t.link("src/chain", "../g");
        let r = |p: &str| resolve_links(&t.0, p).unwrap();
        assert_eq!(r("src/a.rs"), "src/a.rs");
        assert_eq!(r("new/dir/file"), "new/dir/file");
        assert_eq!(r("g/config"), ".git/config");
        assert_eq!(r("here/.git/config"), ".git/config");
        assert_eq!(r("here/here/src/up/g"), ".git");
        assert_eq!(r("src/up/.git/hooks/x"), ".git/hooks/x");
        assert_eq!(r("hook"), ".git/hooks/pre-commit");
        assert_eq!(r("src/chain/HEAD"), ".git/HEAD");
        assert_eq!(r("here"), ".");
        assert!(is_git_metadata(&r("src/chain/HEAD")));
    }

    #[test]
    fn resolve_links_refuses_escapes_and_loops() {
        let t = Tmp::new("refuse");
        t.link("abs", "/etc");
        t.link("out", "../..");
        t.link("loop", "loop");
        for p in ["abs/passwd", "out/x", "loop", "src/../loop/x"] {
            let e = resolve_links(&t.0, p).unwrap_err();
            assert_eq!(e.code, Code::PermissionDenied, "{p}");
        }
    }

    #[test]
    fn resolves() {
        assert_eq!(resolve(Path::new("/"), "."), PathBuf::from("/"));
        assert_eq!(resolve(Path::new("/"), "a/b"), PathBuf::from("/a/b"));
        assert_eq!(join_rel(".", "x"), "x");
        assert_eq!(join_rel("a", "x"), "a/x");
    }
}
