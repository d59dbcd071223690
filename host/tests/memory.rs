//! The memory limit covers a whole call (every memory and table of its
//! store), not each linear memory, under both instance allocators.

use std::time::{Duration, Instant};

use wasm_mcp_host::sandbox::{EngineOptions, FsAccess, Sandbox};
use wasm_mcp_host::Limits;
use wasmtime::component::Component;

const LIMIT: usize = 64 << 20;

/// A component with `n` core instances, each with its own memory that
/// grows by 20 MiB at start (and a table of 1 element).
fn component(n: usize) -> String {
    let instances: String = (0..n)
        .map(|i| format!("(core instance $i{i} (instantiate $m))\n"))
        .collect();
    format!(
        r#"(component
             (core module $m
               (memory 1)
               (table 1 funcref)
               (func $grow (if (i32.lt_s (memory.grow (i32.const 320)) (i32.const 0)) (then unreachable)))
               (start $grow))
             {instances})"#
    )
}

fn sandbox(pooling: bool) -> Sandbox {
    let limits = Limits {
        memory_bytes: LIMIT,
        ..Limits::default()
    };
    let opts = EngineOptions {
        pooling,
        ..EngineOptions::default()
    };
    Sandbox::new(None, FsAccess::ReadOnly, limits, &opts).unwrap()
}

/// Instantiates an `n`-memory component in a fresh call store; returns
/// whether it succeeded, whether the limiter saw the limit, and the bytes
/// the store holds.
async fn instantiate(sb: &Sandbox, n: usize) -> (bool, bool, usize) {
    let bytes = wat::parse_str(component(n)).unwrap();
    let c = Component::new(sb.engine(), &bytes).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut store = sb.new_store(false, deadline).unwrap();
    let ok = sb.linker().instantiate_async(&mut store, &c).await.is_ok();
    let lim = store.data().limiter();
    (ok, lim.exceeded(), lim.used())
}

async fn total_is_bounded(pooling: bool) {
    let sb = sandbox(pooling);
    // Two memories of ~20 MiB fit in 64 MiB together.
    let (ok, exceeded, used) = instantiate(&sb, 2).await;
    assert!(ok && !exceeded, "pooling={pooling}");
    assert!(used > 40 << 20 && used <= LIMIT, "used {used}");
    // Four do not, although each alone is far below the limit.
    let (ok, exceeded, used) = instantiate(&sb, 4).await;
    assert!(
        !ok,
        "4 × 20 MiB instantiated under a 64 MiB limit (pooling={pooling})"
    );
    assert!(exceeded, "the limiter did not flag the memory limit");
    assert!(used <= LIMIT, "used {used}");
}

#[tokio::test]
async fn the_memory_limit_covers_all_memories_of_a_call_on_demand() {
    total_is_bounded(false).await;
}

#[tokio::test]
async fn the_memory_limit_covers_all_memories_of_a_call_pooling() {
    total_is_bounded(true).await;
}

/// Compiles and instantiates `wat` in a fresh call store.
async fn try_instantiate(sb: &Sandbox, wat: &str) -> wasmtime::Result<()> {
    let c = Component::new(sb.engine(), wat::parse_str(wat).unwrap())?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut store = sb.new_store(false, deadline).unwrap();
    sb.linker().instantiate_async(&mut store, &c).await?;
    Ok(())
}

#[tokio::test]
async fn components_larger_than_a_slot_allows_are_refused() {
    // More core instances than a component may have: refused (at compile
    // time by the pool, at instantiation by the store limiter), so calls
    // admitted by the concurrency limits cannot drain the pool.
    let max = Limits::default().per_component.core_instances as usize;
    let wat = |n: usize| {
        let inst: String = (0..n)
            .map(|i| format!("(core instance $i{i} (instantiate $m))"))
            .collect();
        format!("(component (core module $m) {inst})")
    };
    for pooling in [true, false] {
        let sb = sandbox(pooling);
        try_instantiate(&sb, &wat(max)).await.unwrap();
        let err = try_instantiate(&sb, &wat(max + 1)).await.unwrap_err();
        assert!(
            format!("{err:#}").contains("maximum") || format!("{err:#}").contains("limit"),
            "{err:#}"
        );
    }
}
