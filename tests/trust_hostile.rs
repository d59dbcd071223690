//! The trust model against hostile plugins and hostile set-ups: every
//! write path under grants that allow no writes, pins and signatures
//! attacked on disk while serving, grants that ask for too much or point
//! where they should not, and an audit log that every call reaches.
//! Each test drives the real `wasm-mcp` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
mod support;
use support::{is_error, plugin, plugin_dir, server_bin, text_of, Server};

fn cli(args: &[&str]) -> Output {
    Command::new(server_bin())
        .args(args)
        .stdin(Stdio::null())
        .env("WASM_MCP_LOG", "warn")
        .output()
        .unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn error_kind(r: &Value) -> &str {
    r["_meta"]["wasm-mcp/errorKind"].as_str().unwrap_or("")
}

fn names(tools: &[Value]) -> Vec<String> {
    let mut n: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

/// A config file in its own directory (kept alive by the returned guard).
fn config(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("grants.toml");
    std::fs::write(&p, text).unwrap();
    (dir, p)
}

/// A server on `wt` with `plugins` under the grants `cfg` (plus `extra`).
fn start_granted(wt: &Path, plugins: &[&str], cfg: &str, extra: &[&str]) -> (Server, Guards) {
    let dir = plugin_dir(plugins);
    let (cfg_dir, cfg) = config(cfg);
    let mut args = vec!["--config", s(&cfg)];
    args.extend(extra);
    let (srv, _) = Server::start(wt, dir.path(), &args);
    (srv, Guards(dir, cfg_dir))
}

/// Temp dirs a server needs alive.
struct Guards(
    #[allow(dead_code)] tempfile::TempDir,
    #[allow(dead_code)] tempfile::TempDir,
);

/// A worktree with a file, a directory and a file inside it: something to
/// change for every mutation.
fn victim_worktree() -> tempfile::TempDir {
    let wt = tempfile::tempdir().unwrap();
    let w = wt.path();
    std::fs::create_dir_all(w.join("src/dir")).unwrap();
    std::fs::write(w.join("keep.txt"), "kept\n").unwrap();
    std::fs::write(w.join("src/a.txt"), "a\n").unwrap();
    wt
}

/// Every file and directory under `root` with its content (files) and
/// modification time: what a refused change must leave as it was.
fn snapshot(root: &Path) -> Vec<(PathBuf, Option<String>, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let content = meta.is_file().then(|| std::fs::read_to_string(&p).unwrap());
            if meta.is_dir() {
                todo.push(p.clone());
            }
            out.push((p, content, meta.modified().unwrap()));
        }
    }
    out.sort();
    out
}

/// Each mutation of the hostile plugin, with paths that exist in
/// [`victim_worktree`] (`base` prefixes them: "" or "src/").
fn mutations(base: &str) -> Vec<(&'static str, String, String)> {
    let p = |rel: &str| format!("{base}{rel}");
    let file = if base.is_empty() { "keep.txt" } else { "a.txt" };
    vec![
        ("create", p("new.txt"), String::new()),
        ("write", p(file), String::new()),
        ("write_read_only_fd", p(file), String::new()),
        ("truncate", p(file), String::new()),
        ("append", p(file), String::new()),
        ("rename", p(file), p("moved.txt")),
        ("remove", p(file), String::new()),
        ("rmdir", "src/dir".into(), String::new()),
        ("mkdir", p("newdir"), String::new()),
        ("symlink", p("link"), "keep.txt".into()),
        ("hardlink", p(file), p("hard.txt")),
        ("set_times", p(file), String::new()),
    ]
}

/// Mutations that first open an existing file for reading: where the
/// plugin sees no file they end in the guest (not found) before any
/// change is attempted.
const THROUGH_A_READ_DESCRIPTOR: [&str; 3] = ["write_read_only_fd", "truncate", "set_times"];

/// Runs every mutation; each must end `permission_denied` (whatever the
/// plugin reported) and leave the worktree exactly as it was. Where the
/// grant shows no files (`sees_files` false) the mutations that need a
/// read descriptor first find nothing to change.
fn every_write_is_denied(srv: &mut Server, wt: &Path, base: &str, sees_files: bool) {
    let before = snapshot(wt);
    for (op, path, to) in mutations(base) {
        let r = srv.call("fs_mutate", json!({"op": op, "path": path, "to": to}));
        if !sees_files && THROUGH_A_READ_DESCRIPTOR.contains(&op) {
            let said = r["structuredContent"]["error"].as_str().unwrap_or("");
            assert!(said.contains("No such file"), "{op} {path}: {r}");
            continue;
        }
        assert_eq!(error_kind(&r), "permission_denied", "{op} {path}: {r}");
        assert!(text_of(&r).contains("permission denied"), "{op}: {r}");
    }
    assert_eq!(snapshot(wt), before, "the worktree changed");
}

// ---- grants that allow no writes: every write path ----

#[test]
fn every_write_path_under_a_read_only_grant_is_permission_denied() {
    let wt = victim_worktree();
    let cfg = "[plugins.hostile]\nfilesystem = \"read-only\"\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &[]);
    every_write_is_denied(&mut srv, wt.path(), "", true);
    let r = srv.call("fs_read", json!({"path": "keep.txt"}));
    assert!(text_of(&r).contains("kept"), "reads still work: {r}");
}

#[test]
fn every_write_path_under_a_none_grant_is_permission_denied() {
    let wt = victim_worktree();
    let cfg = "[plugins.hostile]\nfilesystem = \"none\"\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &[]);
    every_write_is_denied(&mut srv, wt.path(), "", false);
    // It still sees nothing: no file, no listing.
    let r = srv.call("fs_read", json!({"path": "keep.txt"}));
    assert!(is_error(&r) && !text_of(&r).contains("kept"), "{r}");
    let r = srv.call("fs_list", json!({"path": "/"}));
    assert!(is_error(&r) && error_kind(&r) == "tool_error", "{r}");
}

#[test]
fn writes_outside_a_narrowed_grant_are_permission_denied_inside_it_they_work() {
    let wt = victim_worktree();
    let cfg = "[plugins.hostile]\nfilesystem = \"read-write\"\npaths = [\"src\"]\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &[]);
    // Outside `src`: the top level of the worktree (src/dir, the one
    // rmdir target, is inside the grant: moved out of the way first).
    std::fs::rename(wt.path().join("src/dir"), wt.path().join("dir")).unwrap();
    let mutations_outside = mutations("")
        .into_iter()
        .map(|(op, p, to)| (op, p.replace("src/dir", "dir"), to));
    let before = snapshot(wt.path());
    for (op, path, to) in mutations_outside {
        let r = srv.call("fs_mutate", json!({"op": op, "path": path, "to": to}));
        if THROUGH_A_READ_DESCRIPTOR.contains(&op) {
            assert!(!wt.path().join("moved.txt").exists(), "{r}");
            continue;
        }
        assert_eq!(error_kind(&r), "permission_denied", "{op} {path}: {r}");
    }
    assert_eq!(snapshot(wt.path()), before);
    std::fs::rename(wt.path().join("dir"), wt.path().join("src/dir")).unwrap();
    // Inside it every change is allowed (and audited as ok).
    let r = srv.call("fs_mutate", json!({"op": "create", "path": "src/new.txt"}));
    assert!(
        !is_error(&r) && r["structuredContent"]["error"].is_null(),
        "{r}"
    );
    assert!(wt.path().join("src/new.txt").is_file());
    // A read-only narrowed grant refuses inside too.
    drop(srv);
    let cfg = "[plugins.hostile]\nfilesystem = \"read-only\"\npaths = [\"src\"]\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &[]);
    let before = snapshot(wt.path());
    every_write_is_denied(&mut srv, wt.path(), "src/", true);
    assert_eq!(snapshot(wt.path()), before);
}

#[test]
fn a_granted_subdirectory_that_does_not_exist_yet_grants_nothing_until_it_does() {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("top.txt"), "TOPSECRET\n").unwrap();
    let cfg = "[plugins.hostile]\nfilesystem = \"read-write\"\npaths = [\"later\"]\n";
    let (mut srv, _g) = start_granted(wt.path(), &["test-plugins/hostile.wasm"], cfg, &[]);
    // The plugin cannot make the directory it is granted.
    let r = srv.call("fs_mutate", json!({"op": "mkdir", "path": "later"}));
    assert_eq!(error_kind(&r), "permission_denied", "{r}");
    assert!(!wt.path().join("later").exists());
    // A link named like it, into the rest of the worktree, is not followed.
    std::os::unix::fs::symlink(".", wt.path().join("later")).unwrap();
    let r = srv.call("fs_read", json!({"path": "later/top.txt"}));
    assert!(is_error(&r) && !text_of(&r).contains("TOPSECRET"), "{r}");
    // Made by the operator, it is granted from the next call on.
    std::fs::remove_file(wt.path().join("later")).unwrap();
    std::fs::create_dir(wt.path().join("later")).unwrap();
    let r = srv.call("fs_write", json!({"path": "later/x.txt", "content": "ok"}));
    assert!(!is_error(&r), "{r}");
    assert_eq!(
        std::fs::read_to_string(wt.path().join("later/x.txt")).unwrap(),
        "ok"
    );
}
