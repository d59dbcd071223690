//! How per-call cost grows with the result: `read_file` of whole files of
//! 1 KiB .. 4 MiB (ours) and results of as many bytes from the floor, with
//! the cost per MiB and the marginal cost per MiB between sizes, so a copy
//! or a re-parse that grows faster than the result shows up as a step.
//!
//! `read_file` returns at most 1000 lines, so the files have few long
//! lines; it also caps a read at a size of its own (2 MiB in the workspace
//! plugin): a size over it is reported as capped, not timed.

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::drive::{call, sequential};
use crate::fixture::{binary_bytes, FileCase};
use crate::request::{capped_at, Ask, Probe};
use crate::servers::{Connection, ServerSpec};
use crate::setup::Bench;
use crate::stats::{ms, ratio, Stats};

/// (bytes, lines): every line `bytes / lines` long, at most 1000 lines.
const SIZES: [(usize, usize); 5] = [
    (1 << 10, 16),
    (64 << 10, 64),
    (1 << 20, 512),
    (2 << 20, 512),
    (4 << 20, 512),
];

/// `read_file` reads at least this much (2 MiB in the workspace plugin): an
/// answer cut shorter is an error, not a cap.
const MIN_READ_CAP: usize = 2 << 20;

/// Bytes each size's series moves in a full run.
const BYTES_PER_SERIES: usize = 256 << 20;

enum Outcome {
    Timed(Stats),
    /// The tool answered with only this many bytes (its own cap).
    Capped(usize),
}

pub async fn run(b: &Bench) -> Result<()> {
    eprintln!("bench: result sizes ...");
    let cases = make_files(b)?;
    let servers: [(&str, &ServerSpec, Ask); 2] = [
        ("ours", &b.ours, Ask::Read(Probe::read_file())),
        ("floor", &b.floor, Ask::Bytes),
    ];
    let mut rows = Vec::new();
    for (label, spec, ask) in &servers {
        let conn = spec.connect().await?;
        for case in &cases {
            let outcome = measure(b, &conn, ask, case)
                .await
                .with_context(|| format!("{label}: {}", case.rel))?;
            rows.push((*label, case.bytes(), outcome));
        }
        conn.close().await?;
    }
    print_table(&rows);
    Ok(())
}

fn make_files(b: &Bench) -> Result<Vec<Arc<FileCase>>> {
    SIZES
        .iter()
        .map(|&(bytes, lines)| {
            let rel = format!("size-{}.txt", binary_bytes(bytes).replace(' ', ""));
            FileCase::make(&b.worktree, &rel, lines, bytes / lines).map(Arc::new)
        })
        .collect()
}

fn calls_for(b: &Bench, bytes: usize) -> usize {
    b.counts
        .size_calls
        .unwrap_or_else(|| (BYTES_PER_SERIES / bytes).clamp(20, 1000))
}

async fn measure(b: &Bench, conn: &Connection, ask: &Ask, case: &Arc<FileCase>) -> Result<Outcome> {
    let req = ask.request(case);
    let first = call(conn.peer(), req.as_ref()).await?;
    if let Some(got) = capped_at(case, &first).filter(|&got| got >= MIN_READ_CAP) {
        return Ok(Outcome::Capped(got));
    }
    req.check(&first)?; // the first call is the warm-up
    let stats = sequential(conn.peer(), req.as_ref(), 0, calls_for(b, case.bytes())).await?;
    Ok(Outcome::Timed(stats))
}

fn print_table(rows: &[(&str, usize, Outcome)]) {
    println!("== result size: one whole file per call (floor: as many bytes), sequential on one connection ==");
    println!(
        "{:<9} {:<7} {:>6} {:>10} {:>10} {:>10} {:>12} {:>14}",
        "result", "server", "calls", "p50 ms", "calls/s", "MiB/s", "ms per MiB", "Δms per ΔMiB"
    );
    let mut prev: Option<(&str, usize, f64)> = None;
    for (server, bytes, outcome) in rows {
        let mib = *bytes as f64 / (1 << 20) as f64;
        let s = match outcome {
            Outcome::Timed(s) => s,
            Outcome::Capped(got) => {
                println!(
                    "{:<9} {:<7} capped: the tool returned {} of the file (its read cap)",
                    binary_bytes(*bytes),
                    server,
                    binary_bytes(*got)
                );
                continue;
            }
        };
        let p50 = ms(s.p50);
        let marginal = match prev {
            Some((p, pb, pp50)) if p == *server => {
                format!("{:.3}", (p50 - pp50) / (mib - pb as f64 / (1 << 20) as f64))
            }
            _ => "-".into(),
        };
        println!(
            "{:<9} {:<7} {:>6} {:>10.3} {:>10.1} {:>10.1} {:>12.3} {:>14}",
            binary_bytes(*bytes),
            server,
            s.n,
            p50,
            s.rate,
            s.rate * mib,
            p50 / mib,
            marginal
        );
        prev = Some((server, *bytes, p50));
    }
    print_over_floor(rows);
    println!();
}

/// Ours minus the floor at each size both timed.
fn print_over_floor(rows: &[(&str, usize, Outcome)]) {
    let timed = |server: &str, bytes: usize| {
        rows.iter().find_map(|(s, b, o)| match o {
            Outcome::Timed(st) if *s == server && *b == bytes => Some(ms(st.p50)),
            _ => None,
        })
    };
    let mut line = String::from("ours over the floor, p50:");
    for (bytes, _) in SIZES {
        if let (Some(o), Some(f)) = (timed("ours", bytes), timed("floor", bytes)) {
            line.push_str(&format!(
                " {} +{:.3} ms ({});",
                binary_bytes(bytes),
                o - f,
                ratio(o, f)
            ));
        }
    }
    println!("{}", line.trim_end_matches(';'));
}
