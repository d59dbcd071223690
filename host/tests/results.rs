//! A call's result is bounded before the host copies it out of guest
//! memory (`plugin::transfer_limit`): a hostile plugin's 48 MiB result is
//! refused unread and costs the host's heap nothing; one between the
//! output cap and that limit is copied, then refused; one under the cap is
//! read whole, copied once; a single WASI call handing the host more than
//! the limit (one 48 MiB `output-stream.write`) is refused unread too; a
//! plugin whose `list-tools` hands the host 100 MiB is refused at load once
//! [`TOOL_LIST_TRANSFER_BYTES`] of it were copied, one declaring 500,000
//! empty tools before it allocates them, and one writing 64 MiB in one WASI
//! call while listing before it copies the write.
//!
//! This binary counts the host's heap (its own global allocator): guest
//! linear memory is mapped by wasmtime's pool, outside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use wasm_mcp_host::cache::ComponentCache;
use wasm_mcp_host::plugin::{transfer_limit, CallError, Plugin, TOOL_LIST_TRANSFER_BYTES};
use wasm_mcp_host::sandbox::{EngineOptions, FsAccess, Sandbox};
use wasm_mcp_host::Limits;

/// The system allocator, counting the bytes allocated now and at most.
struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = NOW.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            NOW.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static HEAP: Counting = Counting;

/// Held by each test while it measures: the count is the whole process's,
/// and the test harness runs tests on threads side by side.
static MEASURING: Mutex<()> = Mutex::new(());

/// The host heap's growth over what it held when `f` started, at most.
async fn peak_growth<T>(f: impl std::future::Future<Output = T>) -> (T, usize) {
    let before = NOW.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = f.await;
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(before))
}

const CAP: usize = 5 << 20;

/// `dist/test-plugins/<name>.wasm`, which must have been built.
fn test_plugin(name: &str) -> PathBuf {
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../dist/test-plugins/{name}.wasm"));
    assert!(p.is_file(), "{} missing: run `just plugins`", p.display());
    p
}

/// The hostile plugin loaded under a 5 MiB output cap, called once (the
/// first call sets up what every call shares), holding this test's turn
/// to measure.
struct Hostile {
    _alone: MutexGuard<'static, ()>,
    _dirs: [tempfile::TempDir; 2],
    sb: Arc<Sandbox>,
    plugin: Arc<Plugin>,
}

impl Hostile {
    // Each test has a runtime of its own: the lock only orders the tests'
    // threads, no task of this runtime waits for it.
    #[allow(clippy::await_holding_lock)]
    async fn load() -> Hostile {
        let alone = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
        let dist = test_plugin("hostile");
        let (wt, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let limits = Limits {
            max_output_bytes: CAP,
            ..Limits::default()
        };
        let opts = EngineOptions {
            pooling: true,
            ..EngineOptions::default()
        };
        let sb = Sandbox::new(Some(wt.path()), FsAccess::ReadWrite, limits, &opts).unwrap();
        let sb = Arc::new(sb);
        let cc = ComponentCache::new(Some(cache.path().to_path_buf()));
        let plugin = Plugin::load(&sb, &cc, &dist).await.unwrap();
        let h = Hostile {
            _alone: alone,
            _dirs: [wt, cache],
            sb,
            plugin,
        };
        h.flood(1000).await.0.unwrap();
        h
    }

    /// `flood` with a result of `bytes` (plus its JSON wrapping), and how
    /// much the host's heap grew during the call, at most.
    async fn flood(&self, bytes: usize) -> (Result<String, CallError>, usize) {
        let args = format!(r#"{{"bytes": {bytes}}}"#);
        peak_growth(self.plugin.call(&self.sb, "flood", &args)).await
    }
}

/// What `flood` wraps its result in.
const WRAPPING: usize = r#"{"data":""}"#.len();

#[tokio::test(flavor = "current_thread")]
async fn a_result_over_the_transfer_limit_is_refused_unread() {
    let h = Hostile::load().await;
    let huge = 48 << 20;
    let (out, growth) = h.flood(huge).await;
    let e = out.unwrap_err();
    let refused = CallError::OutputTooLarge {
        bytes: None,
        cap: CAP,
    };
    assert_eq!(e, refused);
    let said = e.to_string();
    let limit = format!("more than {} bytes", transfer_limit(CAP));
    assert!(said.contains(&limit), "{said}");
    assert!(
        growth < 4 << 20,
        "the host heap grew by {growth} bytes for a refused {huge}-byte result"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_result_between_the_cap_and_the_transfer_limit_is_copied_then_refused() {
    let h = Hostile::load().await;
    let n = CAP + (1 << 20);
    assert!(n + WRAPPING < transfer_limit(CAP));
    let (out, growth) = h.flood(n).await;
    let bytes = Some(n + WRAPPING);
    assert_eq!(
        out.unwrap_err(),
        CallError::OutputTooLarge { bytes, cap: CAP }
    );
    assert!(
        growth < n + (1 << 20),
        "the host heap grew by {growth} bytes"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_result_under_the_cap_is_read_whole_and_copied_once() {
    let h = Hostile::load().await;
    let n = CAP - 64;
    let (out, growth) = h.flood(n).await;
    let text = out.unwrap();
    assert_eq!(text.len(), n + WRAPPING);
    assert!(text.starts_with(r#"{"data":"xxx"#) && text.ends_with(r#"xxx"}"#));
    // The text copied out once (`Plugin::call` copies it whole), not twice.
    assert!(
        growth < text.len() + (1 << 20),
        "the host heap grew by {growth} bytes for a {}-byte result",
        text.len()
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_wasi_call_over_the_transfer_limit_is_refused_unread() {
    let h = Hostile::load().await;
    // One `output-stream.write` of 48 MiB: the host would lift the whole
    // list before looking at it.
    let huge = 48 << 20;
    let args = format!(r#"{{"bytes": {huge}}}"#);
    let (out, growth) = peak_growth(h.plugin.call(&h.sb, "big_write", &args)).await;
    assert_eq!(
        out.unwrap_err(),
        CallError::OutputTooLarge {
            bytes: None,
            cap: CAP
        }
    );
    assert!(
        growth < 4 << 20,
        "the host heap grew by {growth} bytes for a refused {huge}-byte write"
    );
    // A small write goes through: the refusal above is the size.
    let args = r#"{"bytes": 1000}"#;
    let text = h.plugin.call(&h.sb, "big_write", args).await.unwrap();
    assert_eq!(text, r#"{"wrote":true}"#);
}

/// Load the test plugin `name`, which must be refused for its tool list
/// naming the limit; the host heap's growth during the load.
async fn refused_tool_list(name: &str) -> usize {
    let h = Hostile::load().await;
    let dist = test_plugin(name);
    let cache = tempfile::tempdir().unwrap();
    let cc = ComponentCache::new(Some(cache.path().to_path_buf()));
    let (loaded, growth) = peak_growth(Plugin::load(&h.sb, &cc, &dist)).await;
    let Err(refused) = loaded else {
        panic!("{name} was loaded")
    };
    let said = format!("{refused:#}");
    let limit =
        format!("more than {TOOL_LIST_TRANSFER_BYTES} bytes at once while listing its tools");
    assert!(said.contains(&limit), "{said}");
    growth
}

/// 200 descriptions of 512 KiB: under wasmtime's default hostcall fuel
/// (128 MiB) all of it was copied before the catalog cut them.
#[tokio::test(flavor = "current_thread")]
async fn a_tool_list_over_its_transfer_limit_is_refused_at_load() {
    let growth = refused_tool_list("hugelist").await;
    assert!(
        // Room for the component's compile, inside the measured load.
        growth < TOOL_LIST_TRANSFER_BYTES + (16 << 20),
        "the host heap grew by {growth} bytes for a refused 100 MiB tool list"
    );
}

/// Over the limit by record count alone: `manylist` declares 500,000 tools
/// whose every text is empty. wasmtime charges a lifted list its host
/// size before allocating it, so the limit holds without a string byte.
#[tokio::test(flavor = "current_thread")]
async fn a_tool_list_over_its_transfer_limit_by_count_is_refused_at_load() {
    // As in plugins/manylist; each lifted descriptor holds at least five
    // `String`s.
    const TOOLS: usize = 500_000;
    let host_bytes = TOOLS * 5 * std::mem::size_of::<String>();
    assert!(host_bytes > TOOL_LIST_TRANSFER_BYTES);
    let growth = refused_tool_list("manylist").await;
    assert!(
        // Room for the component's compile, inside the measured load.
        growth < 16 << 20,
        "the host heap grew by {growth} bytes for a refused list of {TOOLS} tools ({host_bytes} bytes lifted)"
    );
}

/// One WASI call made while listing counts against the same limit:
/// `loudload` writes 64 MiB to stdout in a single `output-stream.write`
/// before it lists its one tool; the host refuses the load before it
/// copies the buffer.
#[tokio::test(flavor = "current_thread")]
async fn a_wasi_call_over_the_limit_while_listing_is_refused_at_load() {
    const WRITE_BYTES: usize = 64 << 20; // plugins/loudload
    const { assert!(WRITE_BYTES > TOOL_LIST_TRANSFER_BYTES) };
    let growth = refused_tool_list("loudload").await;
    assert!(
        // Room for the component's compile, inside the measured load.
        growth < 16 << 20,
        "the host heap grew by {growth} bytes for a refused {WRITE_BYTES}-byte write"
    );
}
