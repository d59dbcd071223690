//! N `read_file` (small) calls in flight on one connection, ours and the baseline.

use anyhow::{Context, Result};

use crate::drive::concurrent;
use crate::request::{Ask, Probe};
use crate::servers::ServerSpec;
use crate::setup::Bench;
use crate::stats::ratio;

pub async fn run(b: &Bench) -> Result<()> {
    eprintln!("bench: concurrency ...");
    let levels: Vec<usize> = b
        .args
        .conc_levels
        .iter()
        .copied()
        .filter(|&n| n > 0)
        .collect();
    let mut servers: Vec<(&str, &ServerSpec)> = vec![("ours", &b.ours)];
    if let Some(spec) = b
        .baseline_spec()
        .filter(|_| !b.args.no_baseline_concurrency)
    {
        servers.push(("baseline", spec));
    }
    let req = Ask::Read(Probe::read_file()).request(&b.small);
    let mut conc: Vec<(&str, Vec<f64>)> = Vec::new();
    for (label, spec) in &servers {
        let conn = spec.connect().await?;
        let mut rates = Vec::new();
        for &n in &levels {
            rates.push(
                concurrent(conn.peer(), &req, n, b.counts.conc_calls)
                    .await
                    .with_context(|| format!("{label}: N={n}"))?,
            );
        }
        conn.close().await?;
        conc.push((label, rates));
    }
    print_table(&levels, &conc, b.counts.conc_calls);
    Ok(())
}

fn print_table(levels: &[usize], conc: &[(&str, Vec<f64>)], calls: usize) {
    println!(
        "== concurrency: N read_file (small) calls in flight on one connection, {calls} calls per N =="
    );
    let mut header = format!("{:<10} {:>5}", "server", "N");
    header.push_str(&format!(" {:>10} {:>10}", "calls/s", "vs N=1"));
    if conc.len() > 1 {
        header.push_str(&format!(" {:>14}", "ours/baseline"));
    }
    println!("{header}");
    for (label, rates) in conc {
        for (i, &n) in levels.iter().enumerate() {
            let mut line = format!(
                "{:<10} {:>5} {:>10.1} {:>10}",
                label,
                n,
                rates[i],
                ratio(rates[i], rates[0])
            );
            if conc.len() > 1 {
                let other = if *label == "ours" {
                    ratio(rates[i], conc[1].1[i])
                } else {
                    String::new()
                };
                line.push_str(&format!(" {other:>14}"));
            }
            println!("{line}");
        }
    }
    println!();
}
