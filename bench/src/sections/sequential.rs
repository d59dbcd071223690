//! `read_file` as sequential calls on one connection: ours (pooling and
//! on-demand), the floor (same bytes, no work), the baseline, the peer.
//! Each server reads the small file, then the large one, then the small
//! one again (after its own warm-up calls): what a large call leaves
//! behind for good (pages kept resident in a pooled slot, allocator state)
//! shows in the small calls after it.

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::drive::sequential;
use crate::fixture::FileCase;
use crate::request::{Ask, Probe};
use crate::servers::ServerSpec;
use crate::setup::Bench;
use crate::stats::{ms, ratio, Stats};
use crate::targets::{PerFile, Results};

struct Series<'a> {
    label: &'static str,
    spec: &'a ServerSpec,
    ask: Ask,
}

struct Measured {
    server: &'static str,
    case: Arc<FileCase>,
    /// The small file read again after the large file's series.
    after_large: bool,
    stats: Stats,
}

pub async fn run(b: &Bench, results: &mut Results) -> Result<()> {
    eprintln!("bench: sequential read_file ...");
    let measured = measure(b).await?;
    print_table(&measured);
    let find = |server: &str, case: &Arc<FileCase>| {
        measured
            .iter()
            .find(|m| m.server == server && Arc::ptr_eq(&m.case, case) && !m.after_large)
            .map(|m| &m.stats)
    };
    let after_large = |server: &str| {
        measured
            .iter()
            .find(|m| m.server == server && m.after_large)
            .map(|m| &m.stats)
    };
    print_after_large(b, &find, &after_large);
    if b.baseline.is_some() {
        print_ratios(b, "baseline", &find, true);
    }
    if b.peer.is_some() {
        print_ratios(b, "peer", &find, false);
    }
    print_over_floor(b, &find);
    println!();
    let per_file = |server: &str| PerFile {
        small: find(server, &b.small).map(Into::into),
        large: find(server, &b.large).map(Into::into),
    };
    results.ours = per_file("ours");
    results.floor = per_file("floor");
    results.baseline = per_file("baseline");
    results.peer = per_file("peer");
    results.ours_small_after_large = after_large("ours").map(Into::into);
    results.on_demand_small = find("ours on-demand", &b.small).map(Into::into);
    results.on_demand_small_after_large = after_large("ours on-demand").map(Into::into);
    Ok(())
}

fn series(b: &Bench) -> Vec<Series<'_>> {
    let read = Ask::Read(Probe::read_file());
    let mut all = vec![
        Series {
            label: "ours",
            spec: &b.ours,
            ask: read.clone(),
        },
        Series {
            label: "ours on-demand",
            spec: &b.ours_ondemand,
            ask: read.clone(),
        },
        Series {
            label: "floor",
            spec: &b.floor,
            ask: Ask::Bytes,
        },
    ];
    if let Some(spec) = b.baseline_spec() {
        all.push(Series {
            label: "baseline",
            spec,
            ask: read,
        });
    }
    if let Some((spec, probe)) = &b.peer {
        all.push(Series {
            label: "peer",
            spec,
            ask: Ask::Read(probe.clone()),
        });
    }
    all
}

async fn measure(b: &Bench) -> Result<Vec<Measured>> {
    let c = &b.counts;
    let mut out = Vec::new();
    for s in series(b) {
        let conn = s.spec.connect().await?;
        let order = [
            (&b.small, c.small, false),
            (&b.large, c.large, false),
            (&b.small, c.small, true),
        ];
        for (case, n, after_large) in order {
            let warm = if Arc::ptr_eq(case, &b.large) {
                c.warmup.min(5)
            } else {
                c.warmup
            };
            let req = s.ask.request(case);
            let stats = sequential(conn.peer(), req.as_ref(), warm, n)
                .await
                .with_context(|| format!("{}: {}", s.label, case.rel))?;
            out.push(Measured {
                server: s.label,
                case: case.clone(),
                after_large,
                stats,
            });
        }
        conn.close().await?;
    }
    Ok(out)
}

fn print_table(measured: &[Measured]) {
    println!("== read_file, sequential calls on one connection (warm-up excluded) ==");
    println!(
        "{:<28} {:<16} {:>6} {:>10} {:>10} {:>10}",
        "file", "server", "calls", "p50 ms", "p99 ms", "calls/s"
    );
    for m in measured {
        let file = match m.after_large {
            true => format!("{}, again", m.case.label),
            false => m.case.label.to_string(),
        };
        println!(
            "{:<28} {:<16} {:>6} {:>10.3} {:>10.3} {:>10.1}",
            file,
            m.server,
            m.stats.n,
            ms(m.stats.p50),
            ms(m.stats.p99),
            m.stats.rate
        );
    }
    println!("(floor: reads no file, returns as many bytes in the same result shape; \"again\": after the large file's calls)");
}

/// Each server's small-file p50 after its large-file calls against before.
fn print_after_large<'a>(
    b: &Bench,
    before: &impl Fn(&str, &Arc<FileCase>) -> Option<&'a Stats>,
    after: &impl Fn(&str) -> Option<&'a Stats>,
) {
    let mut line = format!(
        "{} after the large file's calls, p50 against before:",
        b.small.label
    );
    for server in ["ours", "ours on-demand", "floor", "baseline", "peer"] {
        if let (Some(x), Some(y)) = (before(server, &b.small), after(server)) {
            line.push_str(&format!(" {server} {};", ratio(ms(y.p50), ms(x.p50))));
        }
    }
    println!("{}", line.trim_end_matches(';'));
}

/// `ours/<other>` per file; `with_on_demand` adds the on-demand allocator's.
fn print_ratios<'a>(
    b: &Bench,
    other: &str,
    find: &impl Fn(&str, &Arc<FileCase>) -> Option<&'a Stats>,
    with_on_demand: bool,
) {
    println!("ratio ours/{other}:");
    for case in [&b.small, &b.large] {
        let (Some(o), Some(p), Some(x)) = (
            find("ours", case),
            find("ours on-demand", case),
            find(other, case),
        ) else {
            continue;
        };
        if with_on_demand {
            println!(
                "  {:<20} calls/s {} (on-demand {}), p50 latency {} (on-demand {})",
                case.label,
                ratio(o.rate, x.rate),
                ratio(p.rate, x.rate),
                ratio(ms(o.p50), ms(x.p50)),
                ratio(ms(p.p50), ms(x.p50))
            );
        } else {
            println!(
                "  {:<20} calls/s {}, p50 latency {}",
                case.label,
                ratio(o.rate, x.rate),
                ratio(ms(o.p50), ms(x.p50))
            );
        }
    }
}

/// Each server's p50 minus the floor's for the same number of bytes.
fn print_over_floor<'a>(b: &Bench, find: &impl Fn(&str, &Arc<FileCase>) -> Option<&'a Stats>) {
    println!("per-call overhead over the floor (p50 minus the floor's p50, same result size):");
    for case in [&b.small, &b.large] {
        let Some(f) = find("floor", case) else {
            continue;
        };
        let mut line = format!("  {:<20} floor {:.3} ms:", case.label, ms(f.p50));
        for server in ["ours", "ours on-demand", "baseline", "peer"] {
            if let Some(s) = find(server, case) {
                line.push_str(&format!(
                    " {server} +{:.3} ms ({});",
                    ms(s.p50) - ms(f.p50),
                    ratio(ms(s.p50), ms(f.p50))
                ));
            }
        }
        println!("{}", line.trim_end_matches(';'));
    }
}
