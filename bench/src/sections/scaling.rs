//! Several task servers at once, one connection each, every connection
//! making sequential small `read_file` calls: aggregate calls/s and the
//! per-call latency as servers are added.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::drive::{checked, timed};
use crate::request::{Ask, Probe, Request};
use crate::servers::Connection;
use crate::setup::Bench;
use crate::stats::{ms, ratio, Stats};

pub async fn run(b: &Bench) -> Result<()> {
    eprintln!("bench: servers at once ...");
    let req = Ask::Read(Probe::read_file()).request(&b.small);
    let mut rows = Vec::new();
    for &n in b.args.scaling_servers.iter().filter(|&&n| n > 0) {
        let stats = at_once(b, &req, n)
            .await
            .with_context(|| format!("{n} servers"))?;
        rows.push((n, stats));
    }
    println!(
        "== servers at once: one connection each, {} sequential read_file (small) calls per server ==",
        b.counts.scaling_calls
    );
    println!(
        "{:>8} {:>8} {:>12} {:>10} {:>10} {:>10}",
        "servers", "calls", "calls/s", "vs 1", "p50 ms", "p99 ms"
    );
    let first = rows.first().map(|(_, s)| s.rate).unwrap_or(0.0);
    for (n, s) in &rows {
        println!(
            "{:>8} {:>8} {:>12.1} {:>10} {:>10.3} {:>10.3}",
            n,
            s.n,
            s.rate,
            ratio(s.rate, first),
            ms(s.p50),
            ms(s.p99)
        );
    }
    println!();
    Ok(())
}

/// `n` servers started and warmed, then all timed together.
async fn at_once(b: &Bench, req: &Arc<dyn Request>, n: usize) -> Result<Stats> {
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        let conn = b.ours.connect().await?;
        for _ in 0..b.counts.warmup.max(1) {
            checked(conn.peer(), req.as_ref()).await?;
        }
        conns.push(conn);
    }
    let calls = b.counts.scaling_calls;
    let wall = Instant::now();
    let tasks: Vec<_> = conns
        .iter()
        .map(|conn| {
            let (peer, req) = (conn.peer().clone(), req.clone());
            tokio::spawn(async move { timed(&peer, req.as_ref(), calls).await })
        })
        .collect();
    let mut samples: Vec<Duration> = Vec::with_capacity(n * calls);
    for t in tasks {
        samples.extend(t.await??.0);
    }
    let wall = wall.elapsed();
    close_all(conns).await?;
    Ok(Stats::new(samples, wall))
}

pub async fn close_all(conns: Vec<Connection>) -> Result<()> {
    for c in conns {
        c.close().await?;
    }
    Ok(())
}
