//! The disk suite: a hostile plugin (`diskbomb`) tries to fill the worktree
//! with huge files, sparse files and file or directory storms. Each bomb
//! must end with `quota_exceeded`, and what is actually on disk afterwards
//! (apparent sizes, allocated blocks, entries) must stay within the budget.
//! Also: the workspace plugin's `.git` guard follows links.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::{json, Value};
mod support;
use support::{error_kind, git, is_error, plugin_dir, text_of, Server};

const MIB: u64 = 1 << 20;

/// What a directory tree holds on disk.
#[derive(Debug, Default)]
struct Usage {
    /// Sum of file sizes (a sparse file counts its apparent size).
    apparent: u64,
    /// Sum of blocks allocated to files.
    allocated: u64,
    /// Files, directories and links below the root.
    entries: u64,
}

fn usage(dir: &Path) -> Usage {
    let mut u = Usage::default();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let meta = e.path().symlink_metadata().unwrap();
        u.entries += 1;
        if meta.is_dir() {
            let sub = usage(&e.path());
            u.apparent += sub.apparent;
            u.allocated += sub.allocated;
            u.entries += sub.entries;
        } else if meta.is_file() {
            u.apparent += meta.len();
            u.allocated += meta.blocks() * 512;
        }
    }
    u
}

fn assert_quota(r: &Value, what: &str) {
    assert!(is_error(r), "{what} succeeded: {r}");
    assert_eq!(error_kind(r), "quota_exceeded", "{what}: {r}");
}

/// Small budgets so every bomb is stopped within a second.
const SMALL: &[&str] = &[
    "--max-write-bytes",
    "4194304", // 4 MiB per call
    "--max-files-created",
    "300",
    "--max-file-size",
    "16777216", // 16 MiB
];

fn start_bombs(wt: &Path, extra: &[&str]) -> (Server, tempfile::TempDir) {
    start_serving(&["test-plugins/diskbomb.wasm"], wt, extra)
}

/// A server of `plugins` (their dir is the second value).
fn start_serving(plugins: &[&str], wt: &Path, extra: &[&str]) -> (Server, tempfile::TempDir) {
    let plugins = plugin_dir(plugins);
    let (s, _) = Server::start(wt, plugins.path(), extra);
    (s, plugins)
}

/// A server of `diskbomb` and the workspace plugin (two writers).
fn start_with_workspace(wt: &Path, extra: &[&str]) -> (Server, tempfile::TempDir) {
    let both = ["plugins/workspace.wasm", "test-plugins/diskbomb.wasm"];
    start_serving(&both, wt, extra)
}

/// Runs one bomb in a fresh worktree under [`SMALL`] and returns what it left.
fn bomb(tool: &str, args: Value) -> (Value, Usage) {
    let wt = tempfile::tempdir().unwrap();
    let (mut s, _p) = start_bombs(wt.path(), SMALL);
    let r = s.call(tool, args);
    assert!(s.alive(), "server died after {tool}");
    (r, usage(wt.path()))
}

fn assert_within_call_budget(u: &Usage, what: &str) {
    assert!(
        u.apparent <= 4 * MIB,
        "{what}: apparent {} bytes: {u:?}",
        u.apparent
    );
    assert!(
        u.allocated <= 4 * MIB + 64 * 1024,
        "{what}: allocated: {u:?}"
    );
    assert!(u.entries <= 300, "{what}: {} entries: {u:?}", u.entries);
}

#[test]
fn byte_bombs_stop_at_the_call_budget() {
    for tool in ["big_file", "append_bomb"] {
        let (r, u) = bomb(tool, json!({"chunk": 65536}));
        assert_quota(&r, tool);
        assert!(text_of(&r).contains("--max-write-bytes"), "{tool}: {r}");
        assert_within_call_budget(&u, tool);
        // It really wrote up to the budget, through a clean WASI error.
        assert!(u.apparent >= 3 * MIB, "{tool}: only {u:?}");
        assert!(
            text_of(&r).contains("No space left on device"),
            "{tool}: {r}"
        );
    }
}

#[test]
fn sparse_files_cost_their_apparent_size() {
    let tib = 1u64 << 40;
    // 1 TiB: past the file-size limit.
    for (tool, args) in [
        ("sparse_set_len", json!({"size": tib})),
        ("sparse_seek", json!({"offset": tib})),
        ("sparse_pwrite", json!({"offset": tib})),
    ] {
        let (r, u) = bomb(tool, args);
        assert_quota(&r, tool);
        assert!(text_of(&r).contains("--max-file-size"), "{tool}: {r}");
        assert_within_call_budget(&u, tool);
    }
    // 12 MiB: under the file-size limit, but the hole is charged as written.
    for (tool, args) in [
        ("sparse_set_len", json!({"size": 12 * MIB})),
        ("sparse_seek", json!({"offset": 12 * MIB})),
        ("sparse_pwrite", json!({"offset": 12 * MIB})),
    ] {
        let (r, u) = bomb(tool, args);
        assert_quota(&r, tool);
        assert!(text_of(&r).contains("--max-write-bytes"), "{tool}: {r}");
        assert_within_call_budget(&u, tool);
    }
}

#[test]
fn entry_storms_stop_at_the_call_budget() {
    for tool in ["many_files", "mkdir_storm", "link_storm"] {
        let (r, u) = bomb(tool, json!({"count": 100_000}));
        assert_quota(&r, tool);
        assert!(text_of(&r).contains("--max-files-created"), "{tool}: {r}");
        assert_within_call_budget(&u, tool);
        assert!(u.entries >= 290, "{tool}: only {u:?}");
    }
}

/// An open with create is charged by what it does, not by a check before
/// it: with another call renaming `f` away and back, an open that a `stat`
/// took for "exists" created the file, uncharged, and 301–391 entries were
/// made past bounds of 50 per call and 100 per worktree (a helper's find).
/// A race: by hand, `keep` held 38 to 219 entries without the fix, but this
/// test's runs may miss the window (it holds the bound either way).
#[test]
fn a_rename_race_creates_no_uncharged_entries() {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("f"), "1").unwrap();
    std::fs::create_dir(wt.path().join("keep")).unwrap();
    let limits = [
        "--max-files-created",
        "50",
        "--worktree-files-created",
        "100",
    ];
    let (mut s, _p) = start_serving(&["test-plugins/hostile.wasm"], wt.path(), &limits);
    for (id, mode) in [(1, "flip"), (2, "create")] {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "create_race", "arguments": {"mode": mode, "ms": 4000}}});
        s.send_raw(&msg.to_string());
    }
    let mut answered = 0;
    while answered < 2 {
        let m = s.next_message(std::time::Duration::from_secs(30));
        let m = m.expect("both calls answered");
        answered += usize::from(m.get("id").is_some());
    }
    let kept = std::fs::read_dir(wt.path().join("keep")).unwrap().count();
    assert!(kept <= 50, "{kept} entries created past a bound of 50");
}

/// Writes 10 KiB files `f0`, `f1`, … with `write_small` until one is
/// refused naming `flag` (at most 20); returns how many were written.
fn small_writes_until_refused(s: &mut Server, flag: &str) -> usize {
    for i in 0..20 {
        let r = s.call(
            "write_small",
            json!({"path": format!("f{i}"), "bytes": 10240}),
        );
        if is_error(&r) {
            assert_quota(&r, "write_small");
            assert!(text_of(&r).contains(flag), "{r}");
            return i;
        }
    }
    20
}

#[test]
fn repeated_small_calls_hit_the_worktree_budget() {
    let wt = tempfile::tempdir().unwrap();
    let extra = [
        "--worktree-write-bytes",
        "65536",
        "--worktree-files-created",
        "1000",
    ];
    let (mut s, _p) = start_bombs(wt.path(), &extra);
    let ok = small_writes_until_refused(&mut s, "--worktree-write-bytes");
    assert_eq!(ok, 6, "6 x 10 KiB fit in 64 KiB, the 7th does not");
    // The budget is for the server's life: later calls are refused too.
    let r = s.call("write_small", json!({"path": "late", "bytes": 10240}));
    assert_quota(&r, "late write_small");
    assert!(usage(wt.path()).apparent <= 65536);

    let wt = tempfile::tempdir().unwrap();
    let extra = ["--worktree-files-created", "5"];
    let (mut s, _p) = start_bombs(wt.path(), &extra);
    for i in 0..5 {
        let r = s.call("write_small", json!({"path": format!("e{i}"), "bytes": 1}));
        assert!(!is_error(&r), "{r}");
        // Rewriting an existing file creates nothing.
        let r = s.call("write_small", json!({"path": format!("e{i}"), "bytes": 2}));
        assert!(!is_error(&r), "{r}");
    }
    let r = s.call("write_small", json!({"path": "e5", "bytes": 1}));
    assert_quota(&r, "6th file");
    assert!(text_of(&r).contains("--worktree-files-created"), "{r}");
    assert_eq!(usage(wt.path()).entries, 5);
}

#[test]
fn a_plugin_that_fills_its_share_leaves_the_rest_to_the_others() {
    // Two plugins may write: each may take half of the worktree's totals
    // (32 KiB and 4 entries of 64 KiB and 8), so diskbomb filling its
    // share leaves the workspace plugin the other half.
    let wt = tempfile::tempdir().unwrap();
    let extra = [
        "--worktree-write-bytes",
        "65536",
        "--worktree-files-created",
        "8",
    ];
    let (mut s, _p) = start_with_workspace(wt.path(), &extra);
    let ok = small_writes_until_refused(&mut s, "--plugin-write-bytes");
    assert_eq!(
        ok, 3,
        "3 x 10 KiB fit in a share of 32 KiB, the 4th does not"
    );
    // The 4th file was created before its bytes were refused: its 4th entry.
    let r = s.call("write_small", json!({"path": "g", "bytes": 1}));
    assert_quota(&r, "a 5th file");
    assert!(text_of(&r).contains("--plugin-files-created"), "{r}");

    let content = "z".repeat(30_000);
    let r = s.call(
        "write_file",
        json!({"path": "mine.txt", "content": content}),
    );
    assert!(!is_error(&r), "the other plugin's write was refused: {r}");
    assert_eq!(
        std::fs::read_to_string(wt.path().join("mine.txt")).unwrap(),
        content
    );
    let u = usage(wt.path());
    assert!(u.apparent <= 65536 && u.entries <= 8, "{u:?}");
}

#[test]
fn a_plugin_that_publishes_no_writing_tool_takes_no_share() {
    // diskbomb is loaded but `--allow` publishes none of its tools: the
    // workspace plugin is the only writer and keeps the whole budget.
    let wt = tempfile::tempdir().unwrap();
    let extra = [
        "--worktree-write-bytes",
        "65536",
        "--allow",
        "read_file,write_file",
    ];
    let (mut s, _p) = start_with_workspace(wt.path(), &extra);
    let content = "w".repeat(50_000);
    let r = s.call("write_file", json!({"path": "big.txt", "content": content}));
    assert!(!is_error(&r), "the only writer was held to a share: {r}");
    assert_eq!(usage(wt.path()).apparent, 50_000);
}

#[test]
fn a_plugin_granted_no_share_takes_none_from_the_others() {
    // diskbomb may still delete and rename (read-write), but its grant lets
    // it add nothing: the workspace plugin is the only writer that counts
    // and keeps the whole budget.
    let wt = tempfile::tempdir().unwrap();
    let cfg = tempfile::NamedTempFile::new().unwrap();
    let grants = "[plugins.diskbomb]\nfilesystem = \"read-write\"\n\
                  plugin_write_bytes = 0\nplugin_files_created = 0\n\
                  [plugins.workspace]\nfilesystem = \"read-write\"\n";
    std::fs::write(cfg.path(), grants).unwrap();
    let extra = [
        "--worktree-write-bytes",
        "65536",
        "--config",
        cfg.path().to_str().unwrap(),
    ];
    let (mut s, _p) = start_with_workspace(wt.path(), &extra);
    assert_eq!(
        small_writes_until_refused(&mut s, "plugin_files_created"),
        0
    );
    let content = "w".repeat(50_000);
    let r = s.call("write_file", json!({"path": "big.txt", "content": content}));
    assert!(
        !is_error(&r),
        "held to a share beside a plugin that adds nothing: {r}"
    );
    assert_eq!(usage(wt.path()).apparent, 50_000);
}

#[test]
fn a_grant_sets_a_plugins_share_even_alone() {
    let wt = tempfile::tempdir().unwrap();
    let cfg = tempfile::NamedTempFile::new().unwrap();
    let grants = "[plugins.diskbomb]\nfilesystem = \"read-write\"\nplugin_write_bytes = 25000\n";
    std::fs::write(cfg.path(), grants).unwrap();
    let extra = ["--config", cfg.path().to_str().unwrap()];
    let (mut s, _p) = start_bombs(wt.path(), &extra);
    let ok = small_writes_until_refused(&mut s, "plugin_write_bytes");
    assert_eq!(
        ok, 2,
        "2 x 10 KiB fit in its 25,000 bytes, the 3rd does not"
    );
    assert!(usage(wt.path()).apparent <= 25_000);
}

#[test]
fn defaults_stop_a_terabyte_sparse_file_and_allow_normal_writes() {
    let wt = tempfile::tempdir().unwrap();
    let (mut s, _p) = start_with_workspace(wt.path(), &[]);
    let r = s.call("sparse_set_len", json!({"size": 1u64 << 40}));
    assert_quota(&r, "1 TiB set_len");
    let u = usage(wt.path());
    assert!(u.apparent <= 64 * MIB, "{u:?}");

    let content = "line\n".repeat(200_000); // ~1 MiB
    let r = s.call(
        "write_file",
        json!({"path": "a/b/c.txt", "content": content, "create_dirs": true}),
    );
    assert!(!is_error(&r), "{r}");
    let r = s.call(
        "write_file",
        json!({"path": "a/b/c.txt", "content": "short\n"}),
    );
    assert!(!is_error(&r), "{r}");
    assert_eq!(
        std::fs::read_to_string(wt.path().join("a/b/c.txt")).unwrap(),
        "short\n"
    );
}

#[test]
fn a_read_only_worktree_refuses_writes_as_before_not_as_quota() {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("bomb.bin"), "x").unwrap();
    let tight = [
        "--read-only",
        "--max-write-bytes",
        "0",
        "--max-files-created",
        "0",
    ];
    let (mut s, _p) = start_bombs(wt.path(), &tight);
    for (tool, args) in [
        ("big_file", json!({})),
        ("append_bomb", json!({})),
        ("mkdir_storm", json!({"count": 3})),
    ] {
        let r = s.call(tool, args);
        assert!(is_error(&r), "{tool}: {r}");
        // A write through a read-only mount is the host's refusal (#12).
        assert_eq!(error_kind(&r), "permission_denied", "{tool}: {r}");
    }
    assert_eq!(usage(wt.path()).entries, 1);
}

/// Every file under `dir` with its content.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = p.symlink_metadata().unwrap();
            if meta.is_dir() {
                stack.push(p.clone());
            }
            let data = if meta.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                Vec::new()
            };
            out.push((p.display().to_string(), data));
        }
    }
    out.sort();
    out
}

#[test]
fn write_file_cannot_reach_git_through_links() {
    let wt = tempfile::tempdir().unwrap();
    let root = wt.path();
    git(root, &["init", "-q"]);
    std::fs::create_dir(root.join("src")).unwrap();
    let link =
        |name: &str, target: &str| std::os::unix::fs::symlink(target, root.join(name)).unwrap();
    link("g", ".git");
    link("d", ".");
    link("src/up", "..");
    link("head", ".git/HEAD");
    let before = snapshot(&root.join(".git"));
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let (mut s, _) = Server::start(root, plugins.path(), &[]);
    for path in [
        "g/config",
        "g/hooks/pre-commit",
        "d/.git/config",
        "d/g/HEAD",
        "src/up/.git/config",
        "head",
    ] {
        let r = s.call(
            "write_file",
            json!({"path": path, "content": "pwned", "create_dirs": true}),
        );
        assert!(is_error(&r), "write_file {path} succeeded: {r}");
        assert!(text_of(&r).starts_with("permission_denied"), "{path}: {r}");
    }
    assert_eq!(snapshot(&root.join(".git")), before, ".git changed");
    // A link that stays outside .git still works.
    let r = s.call(
        "write_file",
        json!({"path": "d/src/ok.txt", "content": "ok"}),
    );
    assert!(!is_error(&r), "{r}");
    assert_eq!(
        std::fs::read_to_string(root.join("src/ok.txt")).unwrap(),
        "ok"
    );
}

/// A plugin's `sync` and `sync-data` succeed without flushing anything:
/// one call of a plugin granted no filesystem made ~10,000 device cache
/// flushes a second (it synced its empty root), with renames between them
/// 62 MB/s reached the device from a call that wrote nothing (a helper's
/// find). Counted with `strace` on the server: no `fsync`/`fdatasync` at
/// all for 500 of each (where `strace` is missing, only the answers are
/// checked).
#[test]
fn a_plugin_cannot_flush_the_disk() {
    let wt = tempfile::tempdir().unwrap();
    std::fs::write(wt.path().join("f"), "data").unwrap();
    let (mut s, _p) = start_serving(&["test-plugins/hostile.wasm"], wt.path(), &[]);
    let trace = tempfile::tempdir().unwrap();
    let out = trace.path().join("syncs");
    let strace = std::process::Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=fsync,fdatasync,syncfs,sync", "-o"])
        .arg(&out)
        .args(["-p", &s.pid().to_string()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok();
    if strace.is_some() {
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let r = s.call("sync_loop", json!({"path": "f", "n": 500}));
    assert_eq!(r["structuredContent"]["synced"], 500, "{r}");
    let bad = s.call("sync_loop", json!({"path": "missing", "n": 1}));
    assert_eq!(bad["isError"], true, "{bad}");
    let Some(mut strace) = strace else {
        eprintln!("strace is not installed: the flushes were not counted");
        return;
    };
    let _ = std::process::Command::new("kill")
        .args(["-INT", &strace.id().to_string()])
        .status();
    let _ = strace.wait();
    let seen = std::fs::read_to_string(&out).unwrap_or_default();
    let flushes = seen.lines().filter(|l| l.contains("sync")).count();
    assert_eq!(flushes, 0, "{}", &seen[..seen.len().min(2000)]);
}
