//! Start-up: spawn -> first `tools/list` answer; ours with an empty compile
//! cache (cold: on the baseline tier, and Cranelift only) and a filled one
//! (warm), and the baseline.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};

use crate::servers::os;
use crate::setup::Bench;
use crate::stats::{median, ms, ratio};
use crate::targets::Results;

pub async fn run(b: &Bench, results: &mut Results) -> Result<()> {
    eprintln!("bench: start-up ...");
    let c = &b.counts;
    let cold = cold_starts(b, "cache-cold", &[]).await?;
    let cranelift_only = cold_starts(b, "cache-cold-cl", &[os("--no-baseline-compiler")]).await?;
    let warm_dir = b.tmp.path().join("cache-warm");
    let warm_spec = b.ours_base.with_args(&[os("--cache-dir"), warm_dir.into()]);
    warm_spec.start_once("read_file").await?; // fills the cache
    let mut warm = Vec::new();
    for _ in 0..c.warm_reps {
        warm.push(warm_spec.start_once("read_file").await?);
    }
    let mut base_start = Vec::new();
    if let Some(baseline) = b.baseline_spec() {
        baseline.start_once("read_file").await?; // page cache / .pyc warm-up, like the warm run above
        for _ in 0..c.warm_reps {
            base_start.push(baseline.start_once("read_file").await?);
        }
    }
    let (cold_m, warm_m) = (median(cold.clone()), median(warm.clone()));
    println!("== start-up: spawn -> first tools/list answer (median of reps) ==");
    println!(
        "{:<44} {:>5} {:>10} {:>10} {:>10}",
        "server", "reps", "median ms", "min ms", "max ms"
    );
    print_row("ours, cold (empty --cache-dir: compiles)", &cold);
    print_row("ours, cold, --no-baseline-compiler", &cranelift_only);
    print_row("ours, warm (cache filled: deserializes)", &warm);
    if b.baseline.is_some() {
        print_row("baseline (python FastMCP)", &base_start);
    }
    print!("ratio warm/cold: {}", ratio(ms(warm_m), ms(cold_m)));
    if b.baseline.is_some() {
        print!(
            ", ours warm/baseline: {}",
            ratio(ms(warm_m), ms(median(base_start.clone())))
        );
    }
    println!("\n");
    results.cold_ms = Some(ms(cold_m));
    results.warm_ms = Some(ms(warm_m));
    Ok(())
}

/// Start-ups of ours (with `extra` flags), each on an empty cache, which
/// the server must fill with Cranelift's code (with the baseline tier,
/// compiled in the background after it answered). The server is kept
/// until the cache entry is there: at its exit it waits only
/// `EXIT_WAIT` for a background compile, which a loaded machine (a debug
/// build, a CI run) can take longer than.
async fn cold_starts(b: &Bench, name: &str, extra: &[OsString]) -> Result<Vec<Duration>> {
    let mut times = Vec::new();
    for i in 0..b.counts.cold_reps {
        let dir = b.tmp.path().join(format!("{name}-{i}"));
        let spec = b
            .ours_base
            .with_args(&[os("--cache-dir"), dir.clone().into()])
            .with_args(extra);
        let t0 = Instant::now();
        let conn = spec.connect().await?;
        spec.expect_tool(&conn, "read_file").await?;
        times.push(t0.elapsed());
        let written = cache_written(&dir, CACHE_WAIT).await;
        conn.close().await?;
        ensure!(
            written,
            "cold start did not write the compile cache in {} within {CACHE_WAIT:?}",
            dir.display()
        );
    }
    Ok(times)
}

/// How long a cold start's server is given to write its cache entry.
const CACHE_WAIT: Duration = Duration::from_secs(120);

/// Whether a compiled component (`*.cwasm`) appears in `dir` within `limit`.
async fn cache_written(dir: &std::path::Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let entries = std::fs::read_dir(dir).map_or(0, |d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
                .count()
        });
        if entries > 0 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn print_row(name: &str, v: &[Duration]) {
    let (mn, mx) = (
        v.iter().min().copied().unwrap_or_default(),
        v.iter().max().copied().unwrap_or_default(),
    );
    println!(
        "{:<44} {:>5} {:>10.1} {:>10.1} {:>10.1}",
        name,
        v.len(),
        ms(median(v.to_vec())),
        ms(mn),
        ms(mx)
    );
}
