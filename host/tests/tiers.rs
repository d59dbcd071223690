//! The baseline tier (Winch) a plugin missing from the compile cache runs
//! on until Cranelift's code replaces it: a hostile plugin on baseline code
//! is held to the same deadline, memory limit and output checks, and moving
//! up writes the cache and keeps the plugin working.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use wasm_mcp_host::cache::{CacheOutcome, ComponentCache};
use wasm_mcp_host::plugin::{CallError, Plugin};
use wasm_mcp_host::sandbox::{CodeTier, EngineOptions, FsAccess, Sandbox};
use wasm_mcp_host::Limits;

fn hostile() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dist/test-plugins/hostile.wasm");
    assert!(p.is_file(), "{} missing: run `just plugins`", p.display());
    p
}

fn sandbox(worktree: &std::path::Path, baseline_tier: bool) -> Sandbox {
    let limits = Limits {
        timeout: Duration::from_millis(400),
        memory_bytes: 64 << 20,
        ..Limits::default()
    };
    let opts = EngineOptions {
        pooling: true,
        baseline_tier,
        ..EngineOptions::default()
    };
    Sandbox::new(Some(worktree), FsAccess::ReadWrite, limits, &opts).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_plugin_on_baseline_code_is_held_to_its_limits_then_moves_up() {
    let wt = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::new(Some(cache_dir.path().to_path_buf()));
    let sb = sandbox(wt.path(), true);
    let plugin = Plugin::load(&sb, &cache, &hostile()).await.unwrap();
    assert_eq!(plugin.cache, CacheOutcome::Baseline);
    assert_eq!(plugin.tier(), CodeTier::Baseline);
    assert_eq!(
        std::fs::read_dir(cache_dir.path()).unwrap().count(),
        0,
        "baseline code is never cached"
    );

    // An endless loop on baseline code ends at the deadline (the epoch
    // ticker advances the baseline engine too).
    let started = Instant::now();
    let spin = plugin.call(&sb, "spin", "{}").await;
    assert!(matches!(spin, Err(CallError::Timeout { .. })), "{spin:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Memory past the limit traps, and is reported as such.
    let bomb = plugin.call(&sb, "alloc_bomb", "{}").await;
    assert!(
        matches!(bomb, Err(CallError::MemoryLimit { .. })),
        "{bomb:?}"
    );
    // A trap is a trap; the plugin keeps working after it.
    let panic = plugin.call(&sb, "panic", "{}").await;
    assert!(matches!(panic, Err(CallError::Trap(_))), "{panic:?}");
    std::fs::write(wt.path().join("f.txt"), "hello").unwrap();
    let read = plugin
        .call(&sb, "fs_read", r#"{"path": "/f.txt"}"#)
        .await
        .unwrap();
    assert!(read.contains("hello"), "{read}");

    // Moving up: Cranelift's code, written to the cache, same behaviour.
    plugin.tier_up(&sb, &cache).await.unwrap();
    assert_eq!(plugin.tier(), CodeTier::Optimized);
    assert_eq!(std::fs::read_dir(cache_dir.path()).unwrap().count(), 1);
    let spin = plugin.call(&sb, "spin", "{}").await;
    assert!(matches!(spin, Err(CallError::Timeout { .. })), "{spin:?}");
    let read = plugin
        .call(&sb, "fs_read", r#"{"path": "/f.txt"}"#)
        .await
        .unwrap();
    assert!(read.contains("hello"), "{read}");

    // The next load finds Cranelift's code in the cache.
    let again = Plugin::load(&sb, &cache, &hostile()).await.unwrap();
    assert_eq!(again.cache, CacheOutcome::Hit);
    assert_eq!(again.tier(), CodeTier::Optimized);
}

#[tokio::test]
async fn without_the_baseline_tier_a_cold_plugin_is_compiled_by_cranelift() {
    let wt = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::new(Some(cache_dir.path().to_path_buf()));
    let sb = sandbox(wt.path(), false);
    assert!(sb.engine_of(CodeTier::Baseline).is_none());
    let plugin = Plugin::load(&sb, &cache, &hostile()).await.unwrap();
    assert_eq!(plugin.cache, CacheOutcome::Compiled);
    assert_eq!(plugin.tier(), CodeTier::Optimized);
    // Nothing to move up.
    plugin.tier_up(&sb, &cache).await.unwrap();
    assert_eq!(plugin.tier(), CodeTier::Optimized);
}
