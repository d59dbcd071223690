//! The baseline tier (Winch) a plugin missing from the compile cache runs
//! on until Cranelift's code replaces it: a hostile plugin on baseline code
//! is held to the same deadline, memory limit and output checks, and moving
//! up writes the cache and keeps the plugin working.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use wasm_mcp_host::cache::{CacheOutcome, ComponentCache};
use wasm_mcp_host::limits::{LOAD_SLOTS, TIER_UP_SLOTS};
use wasm_mcp_host::plugin::{CallError, Plugin};
use wasm_mcp_host::registry::{Outcome, Registry};
use wasm_mcp_host::sandbox::{CodeTier, EngineOptions, FsAccess, Sandbox};
use wasm_mcp_host::Limits;

fn hostile() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dist/test-plugins/hostile.wasm");
    assert!(p.is_file(), "{} missing: run `just plugins`", p.display());
    p
}

fn sandbox(worktree: &std::path::Path, baseline_tier: bool) -> Sandbox {
    // Deadlines with room for a loaded two-core machine compiling other
    // plugins meanwhile (baseline code, a debug build).
    let limits = Limits {
        timeout: Duration::from_millis(1500),
        load_timeout: Duration::from_secs(60),
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
        started.elapsed() < Duration::from_secs(10),
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

/// `bytes` (a component) with a custom section appended: another content
/// hash, so another compile and another cache entry, same behaviour.
fn with_custom_section(bytes: &[u8], tag: &str) -> Vec<u8> {
    use wasm_encoder::ComponentSection;
    let mut out = bytes.to_vec();
    wasm_encoder::CustomSection {
        name: format!("tier-test-{tag}").into(),
        data: (&[][..]).into(),
    }
    .append_to_component(&mut out);
    out
}

/// Hostile in its own way: a plugin dir of many cold plugins. Each loads
/// on baseline code, all in the first scan (none waits behind a Cranelift
/// compile past the load budget); then each moves to Cranelift's code in
/// the background, one at a time, so compiles at once stay within the load
/// slots plus the tier-up lane (not one thread per plugin on the blocking
/// pool), and every plugin ends up on cached Cranelift code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_cold_plugins_load_at_once_then_tier_up_one_at_a_time() {
    const PLUGINS: usize = 3 * LOAD_SLOTS;
    let wt = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let original = std::fs::read(hostile()).unwrap();
    for i in 0..PLUGINS {
        let bytes = with_custom_section(&original, &i.to_string());
        std::fs::write(dir.path().join(format!("cold-{i:02}.wasm")), bytes).unwrap();
    }
    let cache = ComponentCache::new(Some(cache_dir.path().to_path_buf()));
    let reg = Registry::open(sandbox(wt.path(), true), cache.clone(), dir.path(), None)
        .await
        .unwrap();
    // All loaded in the first scan, each on baseline code; the first
    // plugin's tools are served while the tier-ups run.
    assert_eq!(cache.compiles().baseline, PLUGINS, "{:?}", cache.compiles());
    let catalog = reg.catalog();
    assert!(catalog.get("fs_read").is_some(), "{:?}", catalog.rejections);
    std::fs::write(wt.path().join("f.txt"), "hello").unwrap();
    let read = reg
        .call(&catalog, "fs_read", serde_json::json!({"path": "/f.txt"}))
        .await;
    assert!(
        matches!(&read, Some(Outcome::Ok { text, .. }) if text.contains("hello")),
        "{read:?}"
    );

    let deadline = Instant::now() + Duration::from_secs(600);
    let done = loop {
        let c = cache.compiles();
        if c.optimized >= PLUGINS && c.running == 0 {
            break c;
        }
        assert!(Instant::now() < deadline, "tier-ups did not finish: {c:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        done.optimized, PLUGINS,
        "one Cranelift compile each: {done:?}"
    );
    assert!(
        done.peak <= LOAD_SLOTS + TIER_UP_SLOTS,
        "{} compiles ran at once; the bound is {LOAD_SLOTS} loads + {TIER_UP_SLOTS} tier-up",
        done.peak
    );
    assert!(done.peak >= 2, "loads never overlapped: {done:?}");
    assert_eq!(
        std::fs::read_dir(cache_dir.path()).unwrap().count(),
        PLUGINS,
        "one cached Cranelift entry per plugin"
    );
}
