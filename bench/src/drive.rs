//! Driving calls: one, a sequential series, or N in flight at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use rmcp::model::CallToolResult;
use rmcp::service::Peer;
use rmcp::RoleClient;

use crate::request::Request;
use crate::stats::Stats;

/// One `tools/call`, unchecked.
pub async fn call(peer: &Peer<RoleClient>, req: &dyn Request) -> Result<CallToolResult> {
    peer.call_tool(req.params())
        .await
        .map_err(|e| anyhow!("tools/call {}: {e}", req.what()))
}

/// One `tools/call`, checked.
pub async fn checked(peer: &Peer<RoleClient>, req: &dyn Request) -> Result<()> {
    req.check(&call(peer, req).await?)
}

/// Sequential calls on one connection; warm-up calls are checked, not timed.
pub async fn sequential(
    peer: &Peer<RoleClient>,
    req: &dyn Request,
    warmup: usize,
    n: usize,
) -> Result<Stats> {
    for _ in 0..warmup {
        checked(peer, req).await?;
    }
    let (samples, wall) = timed(peer, req, n).await?;
    Ok(Stats::new(samples, wall))
}

/// `n` checked calls in a row: each one's latency, and the wall time of all.
pub async fn timed(
    peer: &Peer<RoleClient>,
    req: &dyn Request,
    n: usize,
) -> Result<(Vec<Duration>, Duration)> {
    let mut samples = Vec::with_capacity(n);
    let wall = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        let r = call(peer, req).await?;
        samples.push(t.elapsed());
        req.check(&r)?;
    }
    Ok((samples, wall.elapsed()))
}

/// `total` calls with `level` in flight at once on one connection; calls/s.
pub async fn concurrent(
    peer: &Peer<RoleClient>,
    req: &Arc<dyn Request>,
    level: usize,
    total: usize,
) -> Result<f64> {
    in_flight(peer, req, vec![2; level]).await?; // warm-up at this level
    let split: Vec<usize> = (0..level)
        .map(|i| total / level + usize::from(i < total % level))
        .collect();
    let wall = Instant::now();
    in_flight(peer, req, split).await?;
    Ok(total as f64 / wall.elapsed().as_secs_f64())
}

/// One task per entry, each making that many checked calls in a row.
pub async fn in_flight(
    peer: &Peer<RoleClient>,
    req: &Arc<dyn Request>,
    per_task: Vec<usize>,
) -> Result<()> {
    let tasks: Vec<_> = per_task
        .into_iter()
        .map(|k| {
            let (peer, req) = (peer.clone(), req.clone());
            tokio::spawn(async move {
                for _ in 0..k {
                    checked(&peer, req.as_ref()).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    Ok(())
}
