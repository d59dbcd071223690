//! In process, per call (fresh store + instance each time): instantiation
//! alone and a whole `read_file`, with the on-demand and the pooling
//! instance allocator; the same call after the thread slept [`IDLE_GAP`],
//! as a server's call comes after waiting for the client; and what a
//! served call does instead of instantiating when its plugin's spare
//! instance is ready (`host/src/spare.rs`): taking the spare, and the
//! whole call on it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Result};
use wasm_mcp_host::cache::ComponentCache;
use wasm_mcp_host::grants::Filesystem;
use wasm_mcp_host::plugin::Plugin;
use wasm_mcp_host::sandbox::{set_deadline, EngineOptions, FsAccess, Sandbox};
use wasm_mcp_host::Limits;

use crate::fixture::FileCase;
use crate::request::check_structured;
use crate::setup::Bench;
use crate::stats::{ratio, us, Stats};
use crate::targets::Results;

struct InProcess {
    /// A store built and dropped, nothing instantiated in it.
    store: Stats,
    instantiate: Stats,
    /// Calls back to back.
    call: Stats,
    /// Each call after [`IDLE_GAP`] asleep.
    call_after_idle: Stats,
    /// A ready spare taken and given its call's deadline.
    take_spare: Stats,
    /// A call under the plugin's grant on a ready spare.
    call_on_spare: Stats,
}

/// About what a served call's thread sleeps between calls: the client's
/// round trip (the floor's p50 is 0.14–0.2 ms on the project's VM).
const IDLE_GAP: Duration = Duration::from_micros(200);

pub async fn run(b: &Bench, results: &mut Results) -> Result<()> {
    eprintln!("bench: in-process instantiation ...");
    let iters = b.counts.inst_iters;
    let cache = b.tmp.path().join("cache-inproc");
    let measure = |pooling| {
        in_process(
            &b.plugin_path,
            &b.worktree,
            &cache,
            pooling,
            &b.small,
            iters,
        )
    };
    let on_demand = measure(false).await?;
    let pooled = measure(true).await?;
    println!("== in-process, per call (fresh store + instance each time), {iters} iterations ==");
    println!(
        "{:<52} {:>10} {:>10} {:>12}",
        "measurement", "p50 µs", "p99 µs", "per second"
    );
    for (name, s) in [
        (
            "instantiate_only, on-demand allocator",
            &on_demand.instantiate,
        ),
        ("instantiate_only, pooling allocator", &pooled.instantiate),
        (
            "  of which the store (WASI context, preopen) alone",
            &pooled.store,
        ),
        ("call read_file small, on-demand allocator", &on_demand.call),
        ("call read_file small, pooling allocator", &pooled.call),
        (
            "call read_file small, pooling, after 0.2 ms asleep",
            &pooled.call_after_idle,
        ),
        (
            "a spare instance taken for a call, pooling",
            &pooled.take_spare,
        ),
        (
            "call read_file small, pooling, on a spare",
            &pooled.call_on_spare,
        ),
    ] {
        println!(
            "{:<52} {:>10.1} {:>10.1} {:>12.0}",
            name,
            us(s.p50),
            us(s.p99),
            s.rate
        );
    }
    println!(
        "ratio pooling/on-demand: instantiate p50 {}, call p50 {}",
        ratio(us(pooled.instantiate.p50), us(on_demand.instantiate.p50)),
        ratio(us(pooled.call.p50), us(on_demand.call.p50))
    );
    println!(
        "a call after 0.2 ms asleep (as a served call comes after its client's round trip): p50 {} the back-to-back call's",
        ratio(us(pooled.call_after_idle.p50), us(pooled.call.p50))
    );
    println!(
        "a call on a spare (as served once its plugin has a spare): p50 {} the back-to-back call's",
        ratio(us(pooled.call_on_spare.p50), us(pooled.call.p50))
    );
    println!();
    results.spare_take_us = Some(us(pooled.take_spare.p50));
    results.call_on_spare_us = Some(us(pooled.call_on_spare.p50));
    results.inst_pooling_us = Some(us(pooled.instantiate.p50));
    results.inst_on_demand_us = Some(us(on_demand.instantiate.p50));
    results.call_pooling_us = Some(us(pooled.call.p50));
    Ok(())
}

async fn in_process(
    plugin_path: &Path,
    worktree: &Path,
    cache_dir: &Path,
    pooling: bool,
    case: &FileCase,
    iters: usize,
) -> Result<InProcess> {
    let sandbox = Arc::new(Sandbox::new(
        Some(worktree),
        FsAccess::ReadWrite,
        Limits::default(),
        &EngineOptions {
            pooling,
            ..EngineOptions::default()
        },
    )?);
    let cache = ComponentCache::new(Some(cache_dir.to_owned()));
    let plugin = Plugin::load(&sandbox, &cache, plugin_path).await?;
    ensure!(
        plugin.tools.iter().any(|t| t.name == "read_file"),
        "{} has no read_file tool",
        plugin_path.display()
    );
    let args = serde_json::to_string(&serde_json::json!({ "path": case.rel }))?;
    let warm = (iters / 10).clamp(10, 200);

    for _ in 0..warm {
        instantiate_once(&plugin, &sandbox).await?;
    }
    let mut samples = Vec::with_capacity(iters);
    let wall = Instant::now();
    for _ in 0..iters {
        let t = Instant::now();
        instantiate_once(&plugin, &sandbox).await?;
        samples.push(t.elapsed());
    }
    let instantiate = Stats::new(samples, wall.elapsed());

    let deadline = Instant::now() + Duration::from_secs(3600);
    let mut samples = Vec::with_capacity(iters);
    let wall = Instant::now();
    for _ in 0..iters {
        let t = Instant::now();
        drop(sandbox.new_store_in(sandbox.engine(), true, deadline)?);
        samples.push(t.elapsed());
    }
    let store = Stats::new(samples, wall.elapsed());

    let check = |out: &str| -> Result<()> { check_structured(case, &serde_json::from_str(out)?) };
    for _ in 0..warm {
        check(&call_once(&plugin, &sandbox, &args).await?)?;
    }
    let mut samples = Vec::with_capacity(iters);
    let mut outs = Vec::with_capacity(iters);
    let wall = Instant::now();
    for _ in 0..iters {
        let t = Instant::now();
        outs.push(call_once(&plugin, &sandbox, &args).await?);
        samples.push(t.elapsed());
    }
    let call = Stats::new(samples, wall.elapsed());
    for out in &outs {
        check(out)?;
    }
    // Asleep on the calling thread, as a server waits for its client's
    // next request (a tokio timer cannot wait 0.2 ms).
    let idle_iters = iters.min(1000);
    let mut samples = Vec::with_capacity(idle_iters);
    for _ in 0..idle_iters {
        std::thread::sleep(IDLE_GAP);
        let t = Instant::now();
        let out = call_once(&plugin, &sandbox, &args).await?;
        samples.push(t.elapsed());
        check(&out)?;
    }
    // Its rate over the calls alone, not the sleeps.
    let busy = samples.iter().sum();
    let call_after_idle = Stats::new(samples, busy);

    let mut samples = Vec::with_capacity(iters);
    for _ in 0..iters {
        ready_spare(&plugin, &sandbox).await?;
        let t = Instant::now();
        let spare = plugin.take_spare(Filesystem::ReadOnly);
        let Some((mut spare_store, instance)) = spare else {
            bail!("the spare was not there")
        };
        set_deadline(&mut spare_store, deadline);
        samples.push(t.elapsed());
        drop((spare_store, instance));
    }
    let busy = samples.iter().sum();
    let take_spare = Stats::new(samples, busy);

    let mut samples = Vec::with_capacity(iters);
    for _ in 0..iters {
        ready_spare(&plugin, &sandbox).await?;
        let t = Instant::now();
        let out = call_on_spare(&plugin, &sandbox, &args).await?;
        samples.push(t.elapsed());
        check(&out)?;
    }
    let busy = samples.iter().sum();
    let call_on_spare = Stats::new(samples, busy);
    Ok(InProcess {
        store,
        instantiate,
        call,
        call_after_idle,
        take_spare,
        call_on_spare,
    })
}

/// Has the plugin make a spare for a read-only call and waits for it.
async fn ready_spare(plugin: &Arc<Plugin>, sandbox: &Arc<Sandbox>) -> Result<()> {
    plugin.prepare_spare(sandbox, Filesystem::ReadOnly);
    let t = Instant::now();
    while !plugin.spare_ready(Filesystem::ReadOnly) {
        ensure!(t.elapsed() < Duration::from_secs(5), "no spare was made");
        tokio::task::yield_now().await;
    }
    Ok(())
}

/// One `read_file` call with `args` as served (under the plugin's grant,
/// read-only: it takes the spare), its JSON text result.
async fn call_on_spare(plugin: &Arc<Plugin>, sandbox: &Arc<Sandbox>, args: &str) -> Result<String> {
    let deadline = Instant::now() + sandbox.limits().timeout;
    let (out, _) = plugin
        .call_served(sandbox, Filesystem::ReadOnly, "read_file", args, deadline)
        .await;
    out.map_err(|e| anyhow!("call on a spare: {e}"))
}

async fn instantiate_once(plugin: &Plugin, sandbox: &Sandbox) -> Result<()> {
    plugin
        .instantiate_only(sandbox)
        .await
        .map_err(|e| anyhow!("instantiate: {e}"))
}

/// One `read_file` call with `args`, its JSON text result.
async fn call_once(plugin: &Plugin, sandbox: &Sandbox, args: &str) -> Result<String> {
    plugin
        .call(sandbox, "read_file", args)
        .await
        .map_err(|e| anyhow!("call: {e}"))
}
