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

    #[test]
    fn resolves() {
        assert_eq!(resolve(Path::new("/"), "."), PathBuf::from("/"));
        assert_eq!(resolve(Path::new("/"), "a/b"), PathBuf::from("/a/b"));
        assert_eq!(join_rel(".", "x"), "x");
        assert_eq!(join_rel("a", "x"), "a/x");
    }
}
