//! Loading rules: the compile cache, the refusal of files that are not
//! tool components, and what a rebuild of the catalog does again.

use std::path::Path;
use std::sync::Arc;

use wasm_mcp_host::cache::{sha256_hex, CacheOutcome, ComponentCache};
use wasm_mcp_host::plugin::Plugin;
use wasm_mcp_host::registry::Registry;
use wasm_mcp_host::sandbox::{EngineOptions, FsAccess, Sandbox};
use wasm_mcp_host::Limits;

fn sandbox() -> Sandbox {
    Sandbox::new(
        None,
        FsAccess::ReadOnly,
        Limits::default(),
        &EngineOptions::default(),
    )
    .unwrap()
}

#[test]
fn compiled_components_are_cached_by_content_hash() {
    let sb = sandbox();
    let dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::new(Some(dir.path().to_path_buf()));
    let bytes = wat::parse_str("(component (core module))").unwrap();
    let digest = sha256_hex(&bytes);
    let (_, first) = cache.load(sb.engine(), &bytes, &digest).unwrap();
    assert_eq!(first, CacheOutcome::Compiled);
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "one cache entry: {entries:?}");
    assert!(entries[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with(&digest));
    let (_, second) = cache.load(sb.engine(), &bytes, &digest).unwrap();
    assert_eq!(second, CacheOutcome::Hit);
    // A corrupt entry is not trusted: it is recompiled (and rewritten).
    std::fs::write(&entries[0], b"corrupt").unwrap();
    let (_, third) = cache.load(sb.engine(), &bytes, &digest).unwrap();
    assert_eq!(third, CacheOutcome::Compiled);
    let (_, fourth) = cache.load(sb.engine(), &bytes, &digest).unwrap();
    assert_eq!(fourth, CacheOutcome::Hit);
    // Other bytes, other entry.
    let other = wat::parse_str("(component (core module) (core module))").unwrap();
    let (_, o) = cache
        .load(sb.engine(), &other, &sha256_hex(&other))
        .unwrap();
    assert_eq!(o, CacheOutcome::Compiled);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[tokio::test]
async fn non_components_and_wrong_worlds_are_refused_with_the_file_name() {
    let sb = sandbox();
    let cache = ComponentCache::new(None);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "garbage.wasm",
            b"definitely not wasm".to_vec(),
            "not a WebAssembly component",
        ),
        (
            "core.wasm",
            wat::parse_str("(module)").unwrap(),
            "core wasm module, not a component",
        ),
        (
            "empty-world.wasm",
            wat::parse_str("(component)").unwrap(),
            "cannot be linked",
        ),
        // Proposals the host's wasmtime is built without (threads, GC)
        // fail to compile, with the file named, instead of loading.
        (
            "shared-memory.wasm",
            wat::parse_str("(component (core module (memory 1 1 shared)))").unwrap(),
            "failed to compile",
        ),
        (
            "gc-struct.wasm",
            wat::parse_str("(component (core module (type (struct (field i32)))))").unwrap(),
            "failed to compile",
        ),
    ];
    for (name, bytes, want) in cases {
        let err = Plugin::from_bytes(&sb, &cache, Path::new(name), &bytes)
            .await
            .unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains(name) && msg.contains(want), "{name}: {msg}");
    }
}

/// A plugin's schemas are compiled once, by the first catalog that
/// publishes it (up to ~0.5 s of regex compiling a plugin, within its
/// budget): a rebuild when another plugin arrives reuses them, the same
/// compiled schema, not a fresh compile of every plugin in the directory.
#[tokio::test]
async fn a_rebuild_reuses_the_schemas_of_unchanged_plugins() {
    let dist = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dist");
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a-workspace.wasm");
    std::fs::copy(dist.join("plugins/workspace.wasm"), &first).unwrap();
    let reg = Registry::open(sandbox(), ComponentCache::new(None), dir.path(), None)
        .await
        .unwrap();
    let before = reg.catalog();
    let read = before
        .get("read_file")
        .expect("the workspace plugin's read_file");
    assert!(read.output.is_some(), "read_file declares an output schema");

    let second = dir.path().join("b-conformance.wasm");
    std::fs::copy(dist.join("test-plugins/conformance.wasm"), &second).unwrap();
    assert!(
        reg.reload().await.unwrap(),
        "the new plugin's tools are published"
    );
    let after = reg.catalog();
    assert!(after.version > before.version && after.len() > before.len());
    let again = after.get("read_file").unwrap();
    assert!(
        Arc::ptr_eq(&read.input, &again.input),
        "input schema compiled again"
    );
    assert!(
        Arc::ptr_eq(
            read.output.as_ref().unwrap(),
            again.output.as_ref().unwrap()
        ),
        "output schema compiled again"
    );
}
