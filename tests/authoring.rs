//! Authoring tools: `wasm-mcp inspect` (digest, imports, missing imports,
//! tools; hostile files) and the fuzz target's schema file kept in step with
//! the published schemas of the workspace plugin.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};
use support::*;
use wasm_mcp_host::inspect::MAX_MISSING_IMPORTS;

fn wasm_mcp(args: &[&str]) -> Output {
    Command::new(server_bin())
        .args(args)
        .env("WASM_MCP_LOG", "warn")
        .output()
        .unwrap()
}

fn inspect(path: &Path, extra: &[&str]) -> Output {
    let cache = cache_dir();
    let mut args = vec![
        "inspect",
        path.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    wasm_mcp(&args)
}

fn inspect_json(path: &Path) -> (bool, Value) {
    let out = inspect(path, &["--json"]);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.success(), report)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What the fuzz target uses of a tools listing: names, descriptions and
/// schemas (not the digest or the grant-derived hints, which depend on the
/// build and the server's flags).
fn contract(tools: &Value) -> Value {
    let keep = ["name", "description", "inputSchema", "outputSchema"];
    let project = |t: &Value| {
        let fields = keep
            .iter()
            .filter_map(|k| Some((k.to_string(), t.get(*k)?.clone())));
        Value::Object(fields.collect())
    };
    Value::Array(
        tools
            .as_array()
            .into_iter()
            .flatten()
            .map(project)
            .collect(),
    )
}

#[test]
fn fuzz_schemas_are_the_published_ones() {
    let wt = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let cache = cache_dir();
    let out = wasm_mcp(&[
        "tools",
        "--worktree",
        wt.path().to_str().unwrap(),
        "--plugins",
        plugins.path().to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let published = contract(&serde_json::from_slice(&out.stdout).unwrap());
    let file = repo_root().join("fuzz/workspace-tools.json");
    let copy: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(copy.as_array().map(Vec::len), Some(4));
    assert!(
        contract(&copy) == published,
        "fuzz/workspace-tools.json is stale: run `just fuzz-schemas` (scripts/fuzz-schemas.sh)"
    );
}

#[test]
fn inspect_reports_digest_imports_and_tools() {
    let path = plugin("plugins/workspace.wasm");
    let (ok, r) = inspect_json(&path);
    assert!(ok, "{r}");
    let digest = hex::encode(Sha256::digest(std::fs::read(&path).unwrap()));
    assert_eq!(r["sha256"], digest);
    assert_eq!(r["cannot_run"], Value::Null);
    assert_eq!(r["missing_imports"], serde_json::json!([]));
    let imports: Vec<&str> = r["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        imports
            .iter()
            .any(|i| i.starts_with("wasi:filesystem/preopens@0.2")),
        "{imports:?}"
    );
    assert_eq!(
        r["exports"],
        serde_json::json!(["wasm-mcp:tool/tool@0.1.0"])
    );
    let tools = r["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["list_dir", "read_file", "search", "write_file"]);
    let read = &tools[1];
    assert_eq!(read["annotations"]["readOnlyHint"], true);
    assert_eq!(read["inputSchema"]["required"], serde_json::json!(["path"]));
    // The text form says the same.
    let text = String::from_utf8(inspect(&path, &[]).stdout).unwrap();
    assert!(text.contains(&format!("sha256     {digest}")), "{text}");
    assert!(text.contains("runnable   yes"), "{text}");
}

#[test]
fn inspect_lists_the_tools_the_host_would_refuse() {
    let (ok, r) = inspect_json(&plugin("test-plugins/badmeta.wasm"));
    assert!(ok, "the plugin runs; some of its tools are refused: {r}");
    let refused = r["refused_tools"].as_array().unwrap();
    assert!(refused.len() >= 5, "{r}");
    assert!(
        refused
            .iter()
            .any(|t| t["reason"].as_str().unwrap().contains("$ref")),
        "{r}"
    );
}

/// A component in `dir` importing `n` functions `f0`… that no host has.
fn importing_functions(dir: &Path, n: usize) -> std::path::PathBuf {
    let imports: String = (0..n)
        .map(|i| format!("(import \"f{i}\" (func))\n"))
        .collect();
    let path = dir.join(format!("needs-{n}.wasm"));
    let wasm = wat::parse_str(format!("(component\n{imports})")).unwrap();
    std::fs::write(&path, wasm).unwrap();
    path
}

/// A component with thousands of imports the host lacks: `inspect` names
/// the first [`MAX_MISSING_IMPORTS`] and says that there are more, where
/// it used to type-check the whole component once per missing import (work
/// growing with the square of the count: 3,000 took 0.5 s, a hostile
/// file's tens of thousands would hold an operator's vetting run minutes).
#[test]
fn inspect_stops_naming_missing_imports_at_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, r) = inspect_json(&importing_functions(dir.path(), 3000));
    assert!(!ok, "{r}");
    let missing = r["missing_imports"].as_array().unwrap();
    assert_eq!(missing.len(), MAX_MISSING_IMPORTS, "{r}");
    assert_eq!(missing[0]["name"], "f0");
    assert_eq!(r["missing_imports_cut"], true);
    let why = r["cannot_run"].as_str().unwrap();
    assert!(why.ends_with("f63, and more (not checked)"), "{why}");
    // Exactly as many as are named: all of them, nothing cut.
    let (_, r) = inspect_json(&importing_functions(dir.path(), MAX_MISSING_IMPORTS));
    assert_eq!(
        r["missing_imports"].as_array().unwrap().len(),
        MAX_MISSING_IMPORTS
    );
    assert_eq!(r["missing_imports_cut"], false, "{r}");
}

/// A component importing one interface the host links (monotonic clock),
/// one it does not know and one it links with another type.
const MISSING_IMPORTS: &str = r#"(component
  (import "wasi:clocks/monotonic-clock@0.2.0" (instance (export "now" (func (result u64)))))
  (import "example:missing/api@1.0.0" (instance (export "ping" (func))))
  (import "wasi:cli/environment@0.2.0" (instance (export "get-environment" (func (result u32)))))
)"#;

#[test]
fn inspect_names_every_missing_import() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("needs-more.wasm");
    std::fs::write(&path, wat::parse_str(MISSING_IMPORTS).unwrap()).unwrap();
    let (ok, r) = inspect_json(&path);
    assert!(!ok, "a component with missing imports must not pass: {r}");
    let missing: Vec<&str> = r["missing_imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        missing,
        ["example:missing/api@1.0.0", "wasi:cli/environment@0.2.0"],
        "{r}"
    );
    let why = r["cannot_run"].as_str().unwrap();
    assert!(
        why.contains("example:missing/api@1.0.0") && why.contains("wasi:cli/environment"),
        "{why}"
    );
    let why_of = |name: &str| {
        let m = r["missing_imports"].as_array().unwrap().iter();
        m.clone().find(|m| m["name"] == name).unwrap()["why"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let api = why_of("example:missing/api@1.0.0");
    assert!(api.starts_with("not provided by this host: "), "{api}");
    let env = why_of("wasi:cli/environment@0.2.0");
    assert!(env.starts_with("provided with another type: "), "{env}");
    let out = inspect(&path, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("runnable   NO"), "{text}");
    assert!(
        text.contains("example:missing/api@1.0.0  MISSING"),
        "{text}"
    );
    assert!(!text.contains("monotonic-clock@0.2.0  MISSING"), "{text}");
    assert!(
        stderr(&out).contains("the host cannot run it"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn inspect_refuses_hostile_files_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = std::fs::read(plugin("plugins/workspace.wasm")).unwrap();
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "text.wasm",
            b"hello, not wasm".to_vec(),
            "is not a WebAssembly component",
        ),
        ("empty.wasm", Vec::new(), "is not a WebAssembly component"),
        (
            "core.wasm",
            wat::parse_str("(module)").unwrap(),
            "is a core wasm module, not a component",
        ),
        (
            "truncated.wasm",
            workspace[..workspace.len() / 2].to_vec(),
            "failed to compile",
        ),
        (
            "no-export.wasm",
            wat::parse_str("(component)").unwrap(),
            "does not export wasm-mcp:tool/tool@0.1.0",
        ),
    ];
    for (name, bytes, expect) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let out = inspect(&path, &[]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{name}");
        assert!(err.contains(expect), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    let out = inspect(&dir.path().join("absent.wasm"), &[]);
    assert!(
        !out.status.success() && stderr(&out).contains("reading"),
        "{}",
        stderr(&out)
    );
}

/// A component that imports the sockets the host links (every address is
/// denied at run time) and wasi:http, which it does not link.
const NETWORK_IMPORTS: &str = r#"(component
  (import "wasi:sockets/network@0.2.0" (instance $net
    (export "network" (type (sub resource)))))
  (alias export $net "network" (type $network))
  (import "wasi:sockets/instance-network@0.2.0" (instance
    (alias outer 1 $network (type $outer))
    (export "network" (type $n (eq $outer)))
    (export "instance-network" (func (result (own $n))))))
  (import "wasi:http/outgoing-handler@0.2.0" (instance (export "handle" (func))))
)"#;

#[test]
fn inspect_names_wasi_http_missing_and_sockets_provided() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("net.wasm");
    std::fs::write(&path, wat::parse_str(NETWORK_IMPORTS).unwrap()).unwrap();
    let (ok, r) = inspect_json(&path);
    assert!(!ok, "{r}");
    let missing = r["missing_imports"].as_array().unwrap();
    assert_eq!(
        missing.len(),
        1,
        "sockets are linked, only wasi:http is missing: {r}"
    );
    assert_eq!(missing[0]["name"], "wasi:http/outgoing-handler@0.2.0");
    let why = missing[0]["why"].as_str().unwrap();
    assert!(why.starts_with("not provided by this host: "), "{why}");
}

/// A file over the component limit is refused from its size, before it is
/// read (a 3 GiB sparse file: reading it would take 3 GiB of memory), by
/// `inspect` and by the plugin loader, which keeps serving the others.
#[test]
fn a_huge_file_is_refused_without_being_read() {
    let plugins = plugin_dir(&["plugins/workspace.wasm"]);
    let huge = plugins.path().join("huge.wasm");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let out = inspect(&huge, &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("over 256 MiB"), "{}", stderr(&out));
    let wt = tempfile::tempdir().unwrap();
    let cache = cache_dir();
    let out = Command::new(server_bin())
        .args(["tools", "--worktree"])
        .arg(wt.path())
        .arg("--plugins")
        .arg(plugins.path())
        .arg("--cache-dir")
        .arg(&cache)
        .env("WASM_MCP_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tools.as_array().map(Vec::len), Some(4), "{tools}");
    assert!(stderr(&out).contains("over 256 MiB"), "{}", stderr(&out));
}
