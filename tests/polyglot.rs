//! The Python (`py-csv`, componentize-py) and JavaScript (`js-json`,
//! componentize-js) sample plugins, end to end over MCP: listed with their
//! schemas, called on real files of a temp worktree, confined to it by the
//! sandbox, and bound by the same limits as Rust plugins.
//!
//! These components are large (12-18 MB) and compile slowly, so the first
//! test to need them compiles both into the shared cache once
//! ([`samples`]); every server then starts warm.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
mod support;
use support::{cache_dir, error_kind, is_error, plugin_dir, server_bin, text_of, Server};

const SAMPLES: [&str; 2] = ["samples/py-csv.wasm", "samples/js-json.wasm"];

/// A plugin dir with both samples, their compiled code already in the
/// test cache (compiled once per test binary, the other tests wait).
fn samples() -> tempfile::TempDir {
    static WARM: OnceLock<()> = OnceLock::new();
    let dir = plugin_dir(&SAMPLES);
    WARM.get_or_init(|| {
        let out = Command::new(server_bin())
            .args(["tools", "--worktree"])
            .arg(dir.path())
            .arg("--plugins")
            .arg(dir.path())
            .arg("--cache-dir")
            .arg(cache_dir())
            .env("WASM_MCP_LOG", "warn")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    dir
}

/// A successful call's structuredContent, checked to equal its text block.
fn structured(r: &Value) -> Value {
    assert!(!is_error(r), "{r}");
    let text: Value = serde_json::from_str(&text_of(r)).unwrap();
    assert_eq!(text, r["structuredContent"], "{r}");
    r["structuredContent"].clone()
}

/// A tool error's text (`<code>: <message>`).
fn tool_error(r: &Value) -> String {
    assert!(is_error(r), "{r}");
    assert_eq!(error_kind(r), "tool_error", "{r}");
    text_of(r)
}

fn write(dir: &Path, rel: &str, text: &str) {
    std::fs::write(dir.join(rel), text).unwrap();
}

const CSV: &str = "id,price,in_stock,name,note\n\
                   1,9.5,true,apple,\n\
                   2,12,false,pear,ripe\n\
                   3,-0.25,true,\"fig, dried\",\n\
                   4,100,false,plum,\n";

#[test]
fn python_and_javascript_tools_are_listed_with_their_schemas() {
    let (wt, plugins) = (tempfile::tempdir().unwrap(), samples());
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &[]);
    let tools = s.list_all_tools();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(
        names,
        ["csv_summary", "json_format", "json_lint", "toml_summary"]
    );
    for t in &tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert_eq!(t["inputSchema"]["required"], json!(["path"]), "{t}");
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        assert!(t["description"].as_str().is_some_and(|d| d.len() > 40));
    }
    let tool = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    let csv = tool("csv_summary");
    assert_eq!(
        csv["outputSchema"]["properties"]["columns"]["items"]["properties"]["type"]["enum"],
        json!(["integer", "number", "boolean", "string", "empty"])
    );
    assert_eq!(csv["annotations"]["readOnlyHint"], true);
    let format = tool("json_format");
    assert_eq!(format["annotations"]["readOnlyHint"], false);
    assert_eq!(format["annotations"]["destructiveHint"], true);
    assert_eq!(
        tool("json_lint")["inputSchema"]["properties"]["indent"]["maximum"],
        8
    );
    assert!(s.shutdown().success());
}

#[test]
fn csv_summary_reports_columns_types_and_ranges_of_a_worktree_file() {
    let (wt, plugins) = (tempfile::tempdir().unwrap(), samples());
    std::fs::create_dir(wt.path().join("data")).unwrap();
    write(wt.path(), "data/fruit.csv", CSV);
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &[]);
    let out = structured(&s.call("csv_summary", json!({"path": "data/fruit.csv"})));
    assert_eq!(out["row_count"], 4, "{out}");
    assert_eq!(out["delimiter"], ",");
    assert_eq!(out["ragged_rows"], 0);
    assert_eq!(
        out["columns"],
        json!([
            {"name": "id", "type": "integer", "non_empty": 4, "min": 1, "max": 4},
            {"name": "price", "type": "number", "non_empty": 4, "min": -0.25, "max": 100},
            {"name": "in_stock", "type": "boolean", "non_empty": 4},
            {"name": "name", "type": "string", "non_empty": 4},
            {"name": "note", "type": "string", "non_empty": 1},
        ])
    );
    // A tab-separated file: the delimiter is detected.
    write(wt.path(), "t.tsv", "a\tb\n1\tx\n2\ty\n3\n");
    let out = structured(&s.call("csv_summary", json!({"path": "/t.tsv"})));
    assert_eq!(
        (out["delimiter"].as_str(), out["row_count"].as_u64()),
        (Some("\t"), Some(3))
    );
    assert_eq!(out["ragged_rows"], 1);
    // The schema is enforced by the host before Python runs.
    let r = s.call("csv_summary", json!({"path": "t.tsv", "delimiter": ";;"}));
    assert_eq!(error_kind(&r), "invalid_arguments", "{r}");
    assert!(s.shutdown().success());
}

#[test]
fn toml_summary_reads_toml_and_reports_syntax_errors_with_their_line() {
    let (wt, plugins) = (tempfile::tempdir().unwrap(), samples());
    write(
        wt.path(),
        "Cargo.toml",
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\nserde = { version = \"1\", features = [\"derive\"] }\n",
    );
    write(wt.path(), "bad.toml", "a = 1\n[b]\nc = = 2\n");
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &[]);
    let out = structured(&s.call("toml_summary", json!({"path": "Cargo.toml"})));
    assert_eq!(
        out["keys"],
        json!([{"key": "package", "type": "table"}, {"key": "dependencies", "type": "table"}])
    );
    assert_eq!(out["key_count"], 7, "{out}");
    assert_eq!(out["table_count"], 3, "{out}");
    assert_eq!(out["max_depth"], 4, "{out}");
    let err = tool_error(&s.call("toml_summary", json!({"path": "bad.toml"})));
    assert!(
        err.starts_with("invalid_arguments: bad.toml: not valid TOML"),
        "{err}"
    );
    assert!(err.contains("line 3"), "{err}");
    assert!(s.shutdown().success());
}

#[test]
fn json_lint_finds_errors_with_positions_and_json_format_rewrites_the_file() {
    let (wt, plugins) = (tempfile::tempdir().unwrap(), samples());
    write(wt.path(), "bad.json", "{\n  \"a\": 1,\n  \"b\": [1 2]\n}\n");
    write(
        wt.path(),
        "ok.json",
        "{\"a\":1.0,\"a\":[],\"big\":12345678901234567890}",
    );
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &[]);

    let out = structured(&s.call("json_lint", json!({"path": "bad.json"})));
    assert_eq!(out["valid"], false);
    assert_eq!(
        out["errors"],
        json!([{"line": 3, "column": 11, "message": "expected `,` or `]`, found `2`"}])
    );
    let out = structured(&s.call("json_lint", json!({"path": "ok.json", "pretty": true})));
    assert_eq!(out["valid"], true, "{out}");
    assert_eq!(out["formatted"], false);
    assert_eq!(
        out["warnings"],
        json!([{"line": 1, "column": 10, "message": "duplicate key \"a\""}])
    );
    let pretty = "{\n  \"a\": 1.0,\n  \"a\": [],\n  \"big\": 12345678901234567890\n}\n";
    assert_eq!(out["pretty"], pretty);

    // json_format writes the file back, on the host's disk; then it is formatted.
    let out = structured(&s.call("json_format", json!({"path": "ok.json"})));
    assert_eq!(
        out,
        json!({"path": "ok.json", "changed": true, "bytes": pretty.len()})
    );
    assert_eq!(
        std::fs::read_to_string(wt.path().join("ok.json")).unwrap(),
        pretty
    );
    let out = structured(&s.call("json_lint", json!({"path": "ok.json"})));
    assert_eq!(out["formatted"], true, "{out}");
    // An invalid file is reported and left alone.
    let err = tool_error(&s.call("json_format", json!({"path": "bad.json", "indent": 4})));
    assert!(
        err.starts_with("invalid_arguments: bad.json:3:11:"),
        "{err}"
    );
    assert!(std::fs::read_to_string(wt.path().join("bad.json"))
        .unwrap()
        .contains("[1 2]"));
    assert!(s.shutdown().success());
}

#[test]
fn tool_errors_carry_the_wit_error_codes() {
    let (wt, plugins) = (tempfile::tempdir().unwrap(), samples());
    std::fs::create_dir(wt.path().join("dir")).unwrap();
    std::fs::write(wt.path().join("latin1.csv"), b"a\n\xe9\n").unwrap();
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &[]);
    for tool in ["csv_summary", "toml_summary", "json_lint", "json_format"] {
        let err = tool_error(&s.call(tool, json!({"path": "missing.file"})));
        assert!(err.starts_with("not_found: "), "{tool}: {err}");
        let err = tool_error(&s.call(tool, json!({"path": "dir"})));
        assert!(err.starts_with("invalid_arguments: "), "{tool}: {err}");
        let err = tool_error(&s.call(tool, json!({"path": "/"})));
        assert!(err.starts_with("invalid_arguments: "), "{tool}: {err}");
    }
    let err = tool_error(&s.call("csv_summary", json!({"path": "latin1.csv"})));
    assert!(err.contains("not UTF-8"), "{err}");
    let err = tool_error(&s.call("json_lint", json!({"path": "latin1.csv"})));
    assert!(err.contains("not UTF-8"), "{err}");
    assert!(s.shutdown().success());
}

/// Paths that leave the worktree: a symlink pointing out, `..`, an absolute
/// host path. The plugins pass them to WASI as they are; the sandbox refuses.
#[test]
fn the_sandbox_keeps_python_and_javascript_inside_the_worktree() {
    let (outside, plugins) = (tempfile::tempdir().unwrap(), samples());
    let wt = outside.path().join("wt");
    std::fs::create_dir(&wt).unwrap();
    let secret = outside.path().join("secret.json");
    std::fs::write(&secret, "{\"token\":\"SECRET-42\"}").unwrap();
    std::os::unix::fs::symlink(&secret, wt.join("link.json")).unwrap();
    std::os::unix::fs::symlink(&secret, wt.join("link.csv")).unwrap();
    let (mut s, _) = Server::start(&wt, plugins.path(), &[]);
    let abs = secret.display().to_string();
    for (tool, path) in [
        ("csv_summary", "link.csv"),
        ("csv_summary", "../secret.json"),
        ("csv_summary", abs.as_str()),
        ("toml_summary", "../secret.json"),
        ("json_lint", "link.json"),
        ("json_lint", "../secret.json"),
        ("json_lint", abs.as_str()),
        ("json_format", "link.json"),
        ("json_format", "../secret.json"),
    ] {
        let mut args = json!({ "path": path });
        if tool == "json_lint" {
            args["pretty"] = json!(true); // would return the text
        }
        let r = s.call(tool, args);
        let err = tool_error(&r);
        assert!(
            err.starts_with("permission_denied: ") || err.starts_with("not_found: "),
            "{tool} {path}: {err}"
        );
        assert!(!r.to_string().contains("SECRET-42"), "{tool} {path}: {r}");
    }
    // Nothing outside was rewritten.
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "{\"token\":\"SECRET-42\"}"
    );
    assert!(s.shutdown().success());
}

/// Rows enough that Python needs seconds to summarise them.
fn big_csv(rows: usize) -> String {
    let mut text = String::from("id,value,label\n");
    for i in 0..rows {
        text.push_str(&format!("{i},{}.5,row{i}\n", i % 1000));
    }
    text
}

#[test]
fn a_tight_deadline_stops_a_python_call_and_the_server_goes_on() {
    let (wt, plugins) = (tempfile::tempdir().unwrap(), samples());
    write(wt.path(), "big.csv", &big_csv(400_000));
    write(wt.path(), "small.json", "[1]");
    let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--timeout-ms", "1000"]);
    let t = Instant::now();
    let r = s.call("csv_summary", json!({"path": "big.csv"}));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(error_kind(&r), "timeout", "{r}");
    // The next call gets a fresh instance.
    assert_eq!(
        structured(&s.call("json_lint", json!({"path": "small.json"})))["valid"],
        true
    );
    assert!(s.shutdown().success());
}

/// `--memory-mb` bounds a Python or JavaScript call like any other: a small
/// call fits, reading a big file does not and ends as `memory_limit`.
/// (Measured floors for a small call: Python 65-80 MiB, JavaScript <= 12 MiB;
/// the default 256 MiB fits both.)
#[test]
fn a_tight_memory_limit_stops_python_and_javascript_calls_cleanly() {
    let (wt, plugins) = (tempfile::tempdir().unwrap(), samples());
    // 40 MiB of CSV: bytes, text and parser state need well over 96 MiB.
    write(
        wt.path(),
        "huge.csv",
        &format!("v\n{}", "1234567\n".repeat(5 << 20)),
    );
    // 12 MiB of JSON: bytes and text need well over 48 MiB.
    write(
        wt.path(),
        "big.json",
        &format!("[{}0]", "1234567,".repeat(12 << 17)),
    );
    write(wt.path(), "small.csv", "a\n1\n");
    write(wt.path(), "small.json", "[1]");
    for (limit, tool, small, big) in [
        ("96", "csv_summary", "small.csv", "huge.csv"),
        ("48", "json_lint", "small.json", "big.json"),
    ] {
        let (mut s, _) = Server::start(wt.path(), plugins.path(), &["--memory-mb", limit]);
        let r = s.call(tool, json!({"path": small}));
        assert!(!is_error(&r), "{tool} at {limit} MiB: {r}");
        let r = s.call(tool, json!({"path": big}));
        assert_eq!(error_kind(&r), "memory_limit", "{tool} at {limit} MiB: {r}");
        assert!(s.shutdown().success());
    }
}

/// The samples are projects made from templates/: their build.sh is the
/// template's with the name filled in, so `just plugins` builds them the
/// way a new author's project builds (and a fix to one reaches the other).
#[test]
fn the_samples_build_like_projects_made_from_the_templates() {
    let root = support::repo_root();
    for (lang, name) in [("python", "py-csv"), ("js", "js-json")] {
        let template =
            std::fs::read_to_string(root.join("templates").join(lang).join("build.sh")).unwrap();
        assert!(template.contains("{{name}}"), "{lang}");
        let sample =
            std::fs::read_to_string(root.join("plugins").join(name).join("build.sh")).unwrap();
        assert_eq!(
            sample,
            template.replace("{{name}}", name),
            "plugins/{name}/build.sh drifted from templates/{lang}/build.sh"
        );
    }
}
