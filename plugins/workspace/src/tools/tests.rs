use super::*;
use serde_json::{json, Value};
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

struct TempRoot(PathBuf);

impl TempRoot {
    fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "workspace-tools-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TempRoot(p)
    }
    fn put(&self, rel: &str, data: &[u8]) {
        let p = self.0.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    }
    fn call(&self, name: &str, args: Value) -> Result<Value, ToolErr> {
        call(&self.0, name, &args.to_string()).map(|s| serde_json::from_str(&s).unwrap())
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `read_file` writes its JSON itself: the same text, byte for byte, as
/// the SDK's encoder writes for the `ReadOut` it describes.
#[test]
fn read_file_writes_what_encoding_its_result_would() {
    let t = TempRoot::new();
    let text = "line \"one\"\n\ttwo\u{1}\né😀\n".repeat(50);
    t.put("d/q.txt", text.as_bytes());
    let got = call(
        &t.0,
        "read_file",
        r#"{"path": "d/q.txt", "offset": 1, "line_limit": 4}"#,
    )
    .unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let want = ReadOut {
        path: "d/q.txt".into(),
        content: lines[1..5].concat(),
        start_line: 1,
        lines_returned: 4,
        total_lines: lines.len() as u64,
        size_bytes: text.len() as u64,
        truncated: true,
    };
    assert_eq!(got, sonic_rs::to_string(&want).unwrap());
}

#[test]
fn read_file_caps_at_2_mib() {
    let t = TempRoot::new();
    let line = "x".repeat(1023) + "\n"; // 1 KiB per line
    t.put("big.txt", line.repeat(3 * 1024).as_bytes()); // 3 MiB, 3072 lines
    let r = t
        .call(
            "read_file",
            json!({"path": "/big.txt", "offset": 2040, "line_limit": 1000}),
        )
        .unwrap();
    assert_eq!(r["path"], "big.txt");
    assert_eq!(r["total_lines"], 2048);
    assert_eq!(r["lines_returned"], 8);
    assert_eq!(r["size_bytes"], 3 * 1024 * 1024);
    assert_eq!(r["truncated"], true);
    assert_eq!(r["start_line"], 2040);
    let r = t.call("read_file", json!({"path": "big.txt"})).unwrap();
    assert_eq!(r["lines_returned"], 1000);
    assert_eq!(r["content"].as_str().unwrap().len(), 1000 * 1024);
}

/// The host's default cap on a tool's output (`DEFAULT_MAX_OUTPUT_BYTES`).
const HOST_OUTPUT_CAP: usize = 5 << 20;

/// Files `write_file` accepts but whose JSON text is up to 6× their size
/// (`\u0001`; U+FFFD for each invalid byte is 3): `read_file` returns at
/// most `MAX_CONTENT_JSON_BYTES` of content, whole lines where a line fits,
/// else the first line cut at a character, and says `truncated`.
#[test]
fn read_file_output_fits_the_hosts_cap() {
    let t = TempRoot::new();
    let ctl = "\u{1}".repeat(900_000);
    t.call("write_file", json!({"path": "ctl.txt", "content": ctl}))
        .unwrap();
    t.put("nul.txt", &vec![0u8; MAX_FILE_BYTES as usize]);
    t.put("ff.txt", &vec![0xffu8; MAX_FILE_BYTES as usize]);
    for (path, each) in [
        ("ctl.txt", '\u{1}'),
        ("nul.txt", '\0'),
        ("ff.txt", '\u{fffd}'),
    ] {
        let raw = call(&t.0, "read_file", &json!({ "path": path }).to_string()).unwrap();
        assert!(raw.len() <= HOST_OUTPUT_CAP, "{path}: {} bytes", raw.len());
        let r: Value = serde_json::from_str(&raw).unwrap();
        assert_eq!(r["truncated"], true, "{path}");
        assert_eq!(
            (r["lines_returned"].as_u64(), r["total_lines"].as_u64()),
            (Some(1), Some(1))
        );
        let content = r["content"].as_str().unwrap();
        assert!(content.chars().all(|c| c == each), "{path}");
        let json_len = sonic_rs::to_string(content).unwrap().len() - 2;
        assert!(json_len <= MAX_CONTENT_JSON_BYTES, "{path}: {json_len}");
        assert!(json_len + 6 > MAX_CONTENT_JSON_BYTES, "{path}: {json_len}");
    }
}

/// Many lines that escape long: each read stops at a line end within the
/// bound, and reading on from `start_line + lines_returned` reads them all.
#[test]
fn read_file_continues_after_the_json_bound() {
    let t = TempRoot::new();
    let line = "\u{1}".repeat(1023) + "\n";
    let text = line.repeat(2000); // 2000 lines, 12 MiB of JSON text
    t.put("lines.txt", text.as_bytes());
    let (mut offset, mut all, mut calls) = (0, String::new(), 0);
    loop {
        let raw = call(
            &t.0,
            "read_file",
            &json!({"path": "lines.txt", "offset": offset}).to_string(),
        )
        .unwrap();
        assert!(raw.len() <= HOST_OUTPUT_CAP, "{} bytes", raw.len());
        let r: Value = serde_json::from_str(&raw).unwrap();
        assert_eq!(r["start_line"], offset);
        assert_eq!(r["total_lines"], 2000);
        let n = r["lines_returned"].as_u64().unwrap();
        assert!(n > 0 && n < 1000, "{n}");
        let content = r["content"].as_str().unwrap();
        assert!(content.ends_with('\n'));
        assert_eq!(content.len() as u64, n * 1024);
        all += content;
        offset += n;
        calls += 1;
        assert_eq!(r["truncated"], offset < 2000);
        if offset >= 2000 {
            break;
        }
    }
    assert_eq!(all, text);
    assert!(calls >= 3);
}

#[test]
fn read_file_small_and_errors() {
    let t = TempRoot::new();
    t.put("d/a.txt", b"one\ntwo\n");
    let r = t
        .call("read_file", json!({"path": "./d/../d/a.txt"}))
        .unwrap();
    assert_eq!(r["path"], "d/a.txt");
    assert_eq!(r["content"], "one\ntwo\n");
    assert_eq!(r["truncated"], false);
    assert_eq!(r["size_bytes"], 8);
    let e = t
        .call("read_file", json!({"path": "nope.txt"}))
        .unwrap_err();
    assert_eq!(e.code, Code::NotFound);
    let e = t
        .call("read_file", json!({"path": "../etc/passwd"}))
        .unwrap_err();
    assert_eq!(e.code, Code::PermissionDenied);
    assert!(e.message.contains("path escapes the worktree"));
    for bad in [
        json!({}),
        json!({"path": 3}),
        json!({"path": "a", "offset": -1}),
        json!({"path": "a", "line_limit": 0}),
        json!({"path": "a", "line_limit": 1001}),
        json!({"path": "a", "bogus": 1}),
        json!([1, 2]),
    ] {
        assert_eq!(
            t.call("read_file", bad.clone()).unwrap_err().code,
            Code::InvalidArguments,
            "{bad}"
        );
    }
    assert_eq!(
        t.call("read_file", json!({"path": "d"})).unwrap_err().code,
        Code::InvalidArguments
    );
}

#[test]
fn unknown_tool() {
    let t = TempRoot::new();
    assert_eq!(
        t.call("rm_rf", json!({})).unwrap_err().code,
        Code::UnknownTool
    );
}

#[test]
fn write_file_creates_and_overwrites() {
    let t = TempRoot::new();
    let r = t
        .call("write_file", json!({"path": "new.txt", "content": "hi"}))
        .unwrap();
    assert_eq!(
        r,
        json!({"path": "new.txt", "bytes_written": 2, "created": true})
    );
    let r = t
        .call(
            "write_file",
            json!({"path": "/new.txt", "content": "hello"}),
        )
        .unwrap();
    assert_eq!(r["created"], false);
    assert_eq!(fs::read_to_string(t.0.join("new.txt")).unwrap(), "hello");
    let e = t
        .call("write_file", json!({"path": "a/b/c.txt", "content": "x"}))
        .unwrap_err();
    assert_eq!(e.code, Code::NotFound);
    let r = t
        .call(
            "write_file",
            json!({"path": "a/b/c.txt", "content": "x", "create_dirs": true}),
        )
        .unwrap();
    assert_eq!(r["path"], "a/b/c.txt");
    assert_eq!(
        t.call("write_file", json!({"path": "a", "content": "x"}))
            .unwrap_err()
            .code,
        Code::InvalidArguments
    );
    assert_eq!(
        t.call("write_file", json!({"path": "/", "content": "x"}))
            .unwrap_err()
            .code,
        Code::InvalidArguments
    );
    assert_eq!(
        t.call("write_file", json!({"path": "../x", "content": "x"}))
            .unwrap_err()
            .code,
        Code::PermissionDenied
    );
    let big = "x".repeat(MAX_FILE_BYTES as usize + 1);
    assert_eq!(
        t.call("write_file", json!({"path": "big", "content": big}))
            .unwrap_err()
            .code,
        Code::TooLarge
    );
    t.put(".git", b"gitdir: /elsewhere\n");
    for p in [".git", "/.git", "./.git/config", "x/../.git"] {
        let e = t
            .call("write_file", json!({"path": p, "content": "gitdir: /evil"}))
            .unwrap_err();
        assert_eq!(e.code, Code::PermissionDenied, "{p}");
    }
    assert_eq!(
        fs::read_to_string(t.0.join(".git")).unwrap(),
        "gitdir: /elsewhere\n"
    );
}

/// A path ending in `/` (or in a `.` or `..` component) names a directory:
/// `write_file` refuses it rather than writing a file under the name
/// before the slash. Reading and listing such paths are unchanged.
#[test]
fn write_file_refuses_a_path_naming_a_directory() {
    let t = TempRoot::new();
    t.put("trail.txt", b"keep\n");
    t.put("src/a.rs", b"fn a() {}\n");
    for p in [
        "newdir/",
        "newdir//",
        "trail.txt/",
        "trail.txt/.",
        "src/a.rs/..",
        "src/",
        "new/sub/",
    ] {
        for create_dirs in [false, true] {
            let e = t
                .call(
                    "write_file",
                    json!({"path": p, "content": "x", "create_dirs": create_dirs}),
                )
                .unwrap_err();
            assert_eq!(e.code, Code::InvalidArguments, "{p}: {}", e.message);
            assert!(
                e.message.contains("names a directory"),
                "{p}: {}",
                e.message
            );
        }
    }
    assert!(!t.0.join("newdir").exists() && !t.0.join("new").exists());
    assert_eq!(fs::read_to_string(t.0.join("trail.txt")).unwrap(), "keep\n");
    assert!(t.0.join("src").is_dir());
    let r = t.call("list_dir", json!({"path": "src/"})).unwrap();
    assert_eq!(r["path"], "src");
    let r = t.call("read_file", json!({"path": "trail.txt/"})).unwrap();
    assert_eq!(r["content"], "keep\n");
    let r = t
        .call("search", json!({"pattern": "fn", "path": "src/"}))
        .unwrap();
    assert_eq!(r["matches"][0]["path"], "src/a.rs");
}

#[test]
fn write_file_through_links_never_reaches_git() {
    let t = TempRoot::new();
    t.put(".git/config", b"[core]\n");
    t.put("src/a.rs", b"old\n");
    let link =
        |name: &str, target: &str| std::os::unix::fs::symlink(target, t.0.join(name)).unwrap();
    link("g", ".git");
    link("d", ".");
    link("src/up", "..");
    link("cfg", ".git/config");
    link("fresh", ".git/new-file");
    for p in [
        "g/config",
        "g/hooks/pre-commit",
        "d/.git/config",
        "d/d/g/config",
        "src/up/.git/HEAD",
        "cfg",
        "fresh",
    ] {
        for create_dirs in [false, true] {
            let e = t
                .call(
                    "write_file",
                    json!({"path": p, "content": "pwned", "create_dirs": create_dirs}),
                )
                .unwrap_err();
            assert_eq!(e.code, Code::PermissionDenied, "{p}: {}", e.message);
        }
    }
    assert_eq!(
        fs::read_to_string(t.0.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!t.0.join(".git/hooks").exists() && !t.0.join(".git/new-file").exists());
    // Links that stay out of .git still work and land on their target.
    let r = t
        .call(
            "write_file",
            json!({"path": "d/src/up/src/a.rs", "content": "new\n"}),
        )
        .unwrap();
    assert_eq!(r["created"], false);
    assert_eq!(fs::read_to_string(t.0.join("src/a.rs")).unwrap(), "new\n");
    assert_eq!(
        t.call("write_file", json!({"path": "d", "content": "x"}))
            .unwrap_err()
            .code,
        Code::InvalidArguments
    );
}

#[test]
fn list_dir_sorted_and_typed() {
    let t = TempRoot::new();
    t.put("b.txt", b"12345");
    t.put("a/x", b"");
    #[cfg(unix)]
    std::os::unix::fs::symlink("b.txt", t.0.join("c")).unwrap();
    let r = t.call("list_dir", json!({})).unwrap();
    assert_eq!(r["path"], ".");
    assert_eq!(r["truncated"], false);
    let e = &r["entries"];
    assert_eq!(e[0], json!({"name": "a", "kind": "dir", "size": 0}));
    assert_eq!(e[1], json!({"name": "b.txt", "kind": "file", "size": 5}));
    #[cfg(unix)]
    assert_eq!(e[2]["kind"], "symlink");
    assert_eq!(
        t.call("list_dir", json!({"path": "b.txt"}))
            .unwrap_err()
            .code,
        Code::InvalidArguments
    );
    assert_eq!(
        t.call("list_dir", json!({"path": "zz"})).unwrap_err().code,
        Code::NotFound
    );
}

#[test]
fn list_dir_truncates() {
    let t = TempRoot::new();
    for i in 0..1005 {
        t.put(&format!("d/f{i:04}"), b"");
    }
    let r = t.call("list_dir", json!({"path": "d"})).unwrap();
    assert_eq!(r["truncated"], true);
    assert_eq!(r["entries"].as_array().unwrap().len(), 1000);
    assert_eq!(r["entries"][0]["name"], "f0000");
}

#[test]
fn matcher_and_caps() {
    let m = Matcher::new("Foo", false);
    let mut out = Vec::new();
    assert!(m.scan("f", "a foo\r\nnothing\nFOO!", &mut out, 10));
    assert_eq!(
        out,
        vec![
            Match {
                path: "f".into(),
                line: 1,
                text: "a foo".into()
            },
            Match {
                path: "f".into(),
                line: 3,
                text: "FOO!".into()
            },
        ]
    );
    let mut out = Vec::new();
    assert!(!Matcher::new("foo", true).scan("f", "foo\nfoo\nfoo", &mut out, 2));
    assert_eq!(out.len(), 2);
    assert_eq!(cap_chars(&"é".repeat(600), 500).chars().count(), 500);
    assert!(is_binary(b"a\0b"));
    assert!(!is_binary(b"ab"));
}

#[test]
fn search_walks_and_skips() {
    let t = TempRoot::new();
    t.put("src/a.rs", b"fn needle() {}\nlet x = 1;\n");
    t.put("src/sub/b.rs", b"// NEEDLE here\n");
    t.put(".git/config", b"needle\n");
    t.put("bin.dat", b"needle\0\n");
    let mut big = b"needle\n".to_vec();
    big.resize(MAX_FILE_BYTES as usize + 1, b'a');
    t.put("big.txt", &big);
    #[cfg(unix)]
    std::os::unix::fs::symlink(t.0.join("src"), t.0.join("link")).unwrap();

    let r = t.call("search", json!({"pattern": "needle"})).unwrap();
    assert_eq!(
        r["matches"],
        json!([{"path": "src/a.rs", "line": 1, "text": "fn needle() {}"}])
    );
    assert_eq!(r["files_scanned"], 2);
    assert_eq!(r["truncated"], false);
    // Skipped on purpose, and counted: the large file and the binary one
    // (`.git` and the symlinked directory are not counted).
    assert_eq!(
        r["skipped"],
        json!({"too_deep": 0, "unreadable": 0, "too_large": 1, "binary": 1})
    );

    let r = t
        .call(
            "search",
            json!({"pattern": "needle", "case_sensitive": false, "path": "/src"}),
        )
        .unwrap();
    assert_eq!(r["matches"].as_array().unwrap().len(), 2);
    assert_eq!(r["matches"][1]["path"], "src/sub/b.rs");

    let r = t
        .call(
            "search",
            json!({"pattern": "needle", "case_sensitive": false, "max_results": 1}),
        )
        .unwrap();
    assert_eq!(r["matches"].as_array().unwrap().len(), 1);
    assert_eq!(r["truncated"], true);

    let r = t
        .call("search", json!({"pattern": "x =", "path": "src/a.rs"}))
        .unwrap();
    assert_eq!(r["matches"][0]["line"], 2);

    assert_eq!(
        t.call("search", json!({"pattern": ""})).unwrap_err().code,
        Code::InvalidArguments
    );
    assert_eq!(
        t.call("search", json!({"pattern": "a", "max_results": 0}))
            .unwrap_err()
            .code,
        Code::InvalidArguments
    );
    assert_eq!(
        t.call("search", json!({"pattern": "a", "path": ".."}))
            .unwrap_err()
            .code,
        Code::PermissionDenied
    );
}

/// Directories deeper than `MAX_SEARCH_DEPTH` below `path` are not
/// entered, and the result says how many were left out.
#[test]
fn search_counts_directories_too_deep() {
    let t = TempRoot::new();
    let deep = |levels: usize| "d/".repeat(levels);
    t.put(&format!("{}a.txt", deep(MAX_SEARCH_DEPTH)), b"needle\n");
    t.put(&format!("{}b.txt", deep(MAX_SEARCH_DEPTH + 1)), b"needle\n");
    t.put(&format!("{}x/c.txt", deep(MAX_SEARCH_DEPTH)), b"needle\n");
    let r = t.call("search", json!({"pattern": "needle"})).unwrap();
    assert_eq!(r["matches"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["skipped"]["too_deep"], 2, "{r}");
    assert_eq!(r["skipped"]["unreadable"], 0, "{r}");
    // From one level down, one more level is reached.
    let r = t
        .call("search", json!({"pattern": "needle", "path": "d"}))
        .unwrap();
    assert_eq!(r["matches"].as_array().unwrap().len(), 3, "{r}");
    assert_eq!(r["skipped"]["too_deep"], 0, "{r}");
}

/// Whether mode 000 stops this process reading a file (it does not for
/// root, or with `CAP_DAC_OVERRIDE`): permission tests skip themselves
/// where it does not.
#[cfg(unix)]
fn permissions_bind(t: &TempRoot) -> bool {
    use std::os::unix::fs::PermissionsExt;
    t.put("probe", b"x");
    let p = t.0.join("probe");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o000)).unwrap();
    let binds = fs::read(&p).is_err();
    fs::remove_file(&p).unwrap();
    if !binds {
        eprintln!("note: skipped: mode 000 does not stop this process reading (root?)");
    }
    binds
}

#[cfg(unix)]
fn chmod(t: &TempRoot, rel: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(t.0.join(rel), fs::Permissions::from_mode(mode)).unwrap();
}

/// Entries a walk cannot read (a directory without permission, a file of
/// mode 000) are counted, not silently left out.
#[cfg(unix)]
#[test]
fn search_counts_unreadable_entries() {
    let t = TempRoot::new();
    if !permissions_bind(&t) {
        return;
    }
    t.put("a.txt", b"needle\n");
    t.put("locked/b.txt", b"needle\n");
    t.put("listonly/c.txt", b"needle\n");
    t.put("secret.txt", b"needle\n");
    chmod(&t, "locked", 0o000);
    chmod(&t, "listonly", 0o600);
    chmod(&t, "secret.txt", 0o000);
    let r = t.call("search", json!({"pattern": "needle"}));
    chmod(&t, "locked", 0o755);
    chmod(&t, "listonly", 0o755);
    let r = r.unwrap();
    assert_eq!(r["matches"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["files_scanned"], 1, "{r}");
    assert_eq!(r["skipped"]["unreadable"], 3, "{r}");
    assert_eq!(r["truncated"], false, "{r}");
}

/// A named `path` that cannot be read is an error, as `read_file` and
/// `list_dir` report it, not an empty result.
#[cfg(unix)]
#[test]
fn search_refuses_an_unreadable_named_path() {
    let t = TempRoot::new();
    if !permissions_bind(&t) {
        return;
    }
    t.put("secret.txt", b"needle\n");
    t.put("listonly/c.txt", b"needle\n");
    t.put("locked/d.txt", b"needle\n");
    chmod(&t, "secret.txt", 0o000);
    chmod(&t, "listonly", 0o600);
    chmod(&t, "locked", 0o000);
    let results: Vec<_> = ["secret.txt", "listonly", "locked"]
        .into_iter()
        .map(|p| (p, t.call("search", json!({"pattern": "needle", "path": p}))))
        .collect();
    let read = t.call("read_file", json!({"path": "secret.txt"}));
    chmod(&t, "listonly", 0o755);
    chmod(&t, "locked", 0o755);
    assert_eq!(read.unwrap_err().code, Code::PermissionDenied);
    for (p, r) in results {
        let e = r.expect_err(p);
        assert_eq!(e.code, Code::PermissionDenied, "{p}: {}", e.message);
        assert!(e.message.contains(p), "{p}: {}", e.message);
    }
}

/// A parent that is a file is named as one, with or without
/// `create_dirs` (it was "does not exist" and "File exists").
#[test]
fn write_file_names_a_parent_that_is_a_file() {
    let t = TempRoot::new();
    t.put("afile", b"x");
    for create in [false, true] {
        let e = t
            .call(
                "write_file",
                json!({"path": "afile/x.txt", "content": "y", "create_dirs": create}),
            )
            .unwrap_err();
        assert_eq!(e.code, Code::InvalidArguments, "{}", e.message);
        assert!(
            e.message.contains("afile is a file, not a directory"),
            "{}",
            e.message
        );
    }
    let e = t
        .call("write_file", json!({"path": "none/x.txt", "content": "y"}))
        .unwrap_err();
    assert_eq!(e.code, Code::NotFound);
    assert!(e.message.contains("does not exist"), "{}", e.message);
}

/// A FIFO named by `search` is refused by name (the host refuses to open
/// one at all; a walk never tries, as it reads regular files only).
#[cfg(unix)]
#[test]
fn search_refuses_a_named_fifo_and_walks_past_one() {
    let t = TempRoot::new();
    t.put("a.txt", b"needle\n");
    let made = std::process::Command::new("mkfifo")
        .arg(t.0.join("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    let e = t
        .call("search", json!({"pattern": "needle", "path": "pipe"}))
        .unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments);
    assert!(
        e.message.contains("pipe is not a regular file"),
        "{}",
        e.message
    );
    let r = t.call("search", json!({"pattern": "needle"})).unwrap();
    assert_eq!(r["files_scanned"], 1);
    assert_eq!(r["matches"][0]["path"], "a.txt");
}

#[test]
fn descriptors_are_well_formed() {
    let ds = descriptors();
    let names: Vec<_> = ds.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["read_file", "write_file", "list_dir", "search"]);
    for d in &ds {
        assert_eq!(d.input_schema["type"], "object", "{}", d.name);
        assert_eq!(d.input_schema["additionalProperties"], false, "{}", d.name);
        assert_eq!(
            d.output_schema.as_ref().unwrap()["type"],
            "object",
            "{}",
            d.name
        );
        assert!(d.description.len() < 2000);
        assert!(!(d.annotations.read_only && d.annotations.destructive));
    }
}

/// `search` reads a file asking for the size its metadata gave: a file
/// longer than that (grown since, or lying) is still read to the cap and
/// no further, one shorter whole, an empty one as empty.
#[test]
fn a_read_stops_at_its_cap_whatever_the_metadata_said() {
    let cap = MAX_FILE_BYTES + 1;
    let longer = vec![b'a'; (cap + 100) as usize];
    for hint in [0, 10, cap, u64::MAX] {
        let data = read_capped(std::io::Cursor::new(&longer), hint, cap).unwrap();
        assert_eq!(data.len() as u64, cap, "metadata said {hint}");
    }
    let shorter = b"needle\n".to_vec();
    for hint in [0, 3, 7, 1000] {
        let data = read_capped(std::io::Cursor::new(&shorter), hint, cap).unwrap();
        assert_eq!(data, shorter, "metadata said {hint}");
    }
    assert!(read_capped(std::io::empty(), 5, cap).unwrap().is_empty());
}
