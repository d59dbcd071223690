//! Start-up: spawn -> first `tools/list` answer; ours with an empty compile
//! cache (cold: on the baseline tier, and Cranelift only) and a filled one
//! (warm), and the baseline.

use std::ffi::OsString;
use std::time::Duration;

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
/// the server must have filled with Cranelift's code by the time it exits
/// (with the baseline tier, compiled in the background after it answered).
async fn cold_starts(b: &Bench, name: &str, extra: &[OsString]) -> Result<Vec<Duration>> {
    let mut times = Vec::new();
    for i in 0..b.counts.cold_reps {
        let dir = b.tmp.path().join(format!("{name}-{i}"));
        let spec = b
            .ours_base
            .with_args(&[os("--cache-dir"), dir.clone().into()])
            .with_args(extra);
        times.push(spec.start_once("read_file").await?);
        // The server's exit waits for the background compile.
        let mut entries = 0;
        for _ in 0..100 {
            entries = std::fs::read_dir(&dir).map_or(0, |d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
                    .count()
            });
            if entries > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        ensure!(
            entries > 0,
            "cold start did not write the compile cache in {}",
            dir.display()
        );
    }
    Ok(times)
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
