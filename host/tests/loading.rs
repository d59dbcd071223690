//! Loading rules that need no real plugin: the compile cache and the
//! refusal of files that are not tool components.

use std::path::Path;

use wasm_mcp_host::cache::{sha256_hex, CacheOutcome, ComponentCache};
use wasm_mcp_host::plugin::Plugin;
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
