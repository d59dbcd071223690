//! `wasm-mcp new`: scaffold each language's template into a temp dir
//! outside the repository, build it with its one documented command
//! (`./build.sh`), check it with `wasm-mcp inspect`, call its tool with
//! its own `./test.sh` (which goes through `wasm-mcp call`), then serve it
//! with `wasm-mcp serve` and call it over MCP, as plugins/README.md tells
//! a new author to.
//!
//! Rust guests share `plugins/target` (CARGO_TARGET_DIR) so the std built
//! by `just plugins` is reused: a build takes seconds, not minutes.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};
use support::*;

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn wasm_mcp(args: &[&str]) -> Command {
    let mut c = Command::new(server_bin());
    c.args(args).env("WASM_MCP_LOG", "warn");
    c
}

/// Scaffold `name` in `lang`, build, inspect, test; returns the project dir.
/// The template's tool is named after the project.
fn scaffold_build_and_call(lang: &str, name: &str) -> tempfile::TempDir {
    let tool = name;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    run(&mut wasm_mcp(&[
        "new",
        name,
        "--lang",
        lang,
        "--dir",
        dir.to_str().unwrap(),
    ]));
    let script = |s: &str| {
        let mut c = Command::new(dir.join(s));
        c.current_dir(&dir)
            .env("WASM_MCP", server_bin())
            .env("WASM_MCP_LOG", "warn")
            .env("CARGO_TARGET_DIR", repo_root().join("plugins/target"))
            .env("CARGO_INCREMENTAL", "0")
            // The Python/JS toolchains `just plugins` installed (offline after that).
            .env("WASM_MCP_TOOLCHAINS", repo_root().join(".cache/polyglot"));
        c
    };
    run(&mut script("build.sh"));
    let wasm = dir.join(format!("{name}.wasm"));
    assert!(
        wasm.is_file(),
        "build.sh did not produce {}",
        wasm.display()
    );
    let cache = cache_dir();
    let inspect = run(&mut wasm_mcp(&[
        "inspect",
        wasm.to_str().unwrap(),
        "--json",
        "--cache-dir",
        cache.to_str().unwrap(),
    ]));
    let report: serde_json::Value = serde_json::from_slice(&inspect.stdout).unwrap();
    assert_eq!(report["cannot_run"], serde_json::Value::Null, "{report}");
    let tools = report["tools"].as_array().unwrap();
    assert!(
        tools.iter().any(|t| t["name"] == tool),
        "the template's tool `{tool}` is listed: {report}"
    );
    run(&mut script("test.sh"));
    tmp
}

#[test]
fn rust_template_builds_answers_and_is_served_over_mcp() {
    let tmp = scaffold_build_and_call("rust", "wc-tool");
    let dir = tmp.path().join("wc-tool");
    // Self-contained: the SDK and the contract were copied, not referenced.
    assert!(dir.join("vendor/wasm-mcp-guest/wit/tool.wit").is_file());
    // The shared target dir still holds the SDK built from plugins/ only:
    // the project's copy must not take over its build outputs (same crate
    // name and version; cargo tells path crates apart by their path
    // relative to the workspace root, hence the copy under vendor/).
    sdk_outputs_come_from_plugins(&dir);
    // Its README's `cargo test`: the logic and the SDK natively.
    let native = run(Command::new("cargo")
        .args(["test", "--quiet"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", repo_root().join("plugins/target"))
        .env("CARGO_INCREMENTAL", "0"));
    let summary = String::from_utf8_lossy(&native.stdout);
    assert!(summary.contains("1 passed"), "{summary}");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(manifest.contains(r#"name = "wc-tool""#) && !manifest.contains("{{name}}"));
    // The tool's description is its argument type's doc comment.
    let wasm = dir.join("wc-tool.wasm");
    let out = run(&mut wasm_mcp(&[
        "inspect",
        wasm.to_str().unwrap(),
        "--json",
        "--no-cache",
    ]));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tool = &report["tools"][0];
    assert_eq!(
        tool["description"],
        "Counts the lines, words and bytes of a text file of the worktree."
    );
    assert_eq!(tool["inputSchema"]["required"], serde_json::json!(["path"]));
    assert_eq!(tool["annotations"]["readOnlyHint"], true);
    // Served over MCP.
    let (mut s, _dirs) = serve(&[(&tmp, "wc-tool")]);
    served_over_mcp(&mut s, "wc-tool", |out| {
        assert_eq!(
            (out["lines"].as_u64(), out["words"].as_u64()),
            (Some(2), Some(3)),
            "{out}"
        );
    });
    assert!(s.shutdown().success());
}

/// The SDK's build record from plugins/ (its `.d` file in `plugins/target`,
/// which names the WIT file `plugins/wasm-mcp-guest/wit` links to)
/// survived the build of
/// `project`, whose copy of the SDK would have overwritten it had cargo
/// given both copies the same output name.
fn sdk_outputs_come_from_plugins(project: &Path) {
    let ours =
        std::fs::canonicalize(repo_root().join("plugins/wasm-mcp-guest/wit/tool.wit")).unwrap();
    let target = repo_root().join("plugins/target");
    let mut records = Vec::new();
    for arch in std::fs::read_dir(&target).unwrap().flatten() {
        let Ok(deps) = std::fs::read_dir(arch.path().join("release/deps")) else {
            continue;
        };
        for f in deps.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.starts_with("wasm_mcp_guest-") && name.ends_with(".d") {
                records.push(std::fs::read_to_string(f.path()).unwrap());
            }
        }
    }
    assert!(
        records.iter().any(|d| d.contains(ours.to_str().unwrap())),
        "no build record of plugins/wasm-mcp-guest left after building {}: {records:#?}",
        project.display()
    );
}

/// `name`'s tool over MCP: listed with an object schema, answers on a
/// worktree file (`check` the structured result), a missing file is a tool
/// error the model can read.
fn served_over_mcp(server: &mut Server, name: &str, check: impl Fn(&Value)) {
    let tools = server.list_all_tools();
    let tool = tools
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not listed: {tools:?}"));
    assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    assert_eq!(tool["inputSchema"]["required"], json!(["path"]), "{tool}");
    assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
    let ok = server.call(name, json!({"path": "notes/sample.txt"}));
    assert!(!is_error(&ok), "{ok}");
    assert_eq!(ok["structuredContent"]["path"], "notes/sample.txt", "{ok}");
    check(&ok["structuredContent"]);
    let missing = server.call(name, json!({"path": "notes/absent.txt"}));
    assert!(is_error(&missing), "{missing}");
    assert_eq!(
        missing["_meta"]["wasm-mcp/errorKind"], "tool_error",
        "{missing}"
    );
    assert!(text_of(&missing).contains("absent.txt"), "{missing}");
}

/// A worktree with `notes/sample.txt` (2 lines, 3 words) and a plugin dir
/// with the given built projects' components.
fn serve(projects: &[(&tempfile::TempDir, &str)]) -> (Server, [tempfile::TempDir; 2]) {
    let (wt, plugins) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir(wt.path().join("notes")).unwrap();
    std::fs::write(wt.path().join("notes/sample.txt"), "one two\nthree\n").unwrap();
    for (tmp, name) in projects {
        let wasm = format!("{name}.wasm");
        std::fs::copy(
            tmp.path().join(name).join(&wasm),
            plugins.path().join(&wasm),
        )
        .unwrap();
    }
    let (server, _) = Server::start(wt.path(), plugins.path(), &[]);
    (server, [wt, plugins])
}

/// Python and JavaScript projects made from the templates build, answer
/// `./test.sh`, and are served side by side (each tool named after its
/// project, so two scaffolded plugins never clash) and called over MCP.
#[test]
fn python_and_js_templates_build_and_are_served_side_by_side() {
    let py = scaffold_build_and_call("python", "py-tool");
    let js = scaffold_build_and_call("js", "js-tool");
    let (mut s, _dirs) = serve(&[(&py, "py-tool"), (&js, "js-tool")]);
    let names: Vec<String> = s
        .list_all_tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 2, "both tools are published: {names:?}");
    for name in ["py-tool", "js-tool"] {
        served_over_mcp(&mut s, name, |out| assert_eq!(out["lines"], 2, "{out}"));
    }
    assert!(s.shutdown().success());
}

#[test]
fn new_refuses_bad_names_unknown_languages_and_non_empty_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let at = |p: &str| tmp.path().join(p);
    for (args, expect) in [
        (vec!["new", "../evil"], "invalid name"),
        (
            vec![
                "new",
                "ok",
                "--lang",
                "cobol",
                "--dir",
                at("c").to_str().unwrap(),
            ],
            "not available in this build",
        ),
    ] {
        let out = wasm_mcp(&args).output().unwrap();
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(expect),
            "{args:?}"
        );
    }
    assert!(!at("c").exists());
    std::fs::create_dir(at("full")).unwrap();
    std::fs::write(at("full/mine.txt"), "keep").unwrap();
    let out = wasm_mcp(&["new", "ok", "--dir", at("full").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("not empty"));
    assert_eq!(
        std::fs::read_to_string(at("full/mine.txt")).unwrap(),
        "keep"
    );
    assert!(Path::new(&at("full")).read_dir().unwrap().count() == 1);
}
