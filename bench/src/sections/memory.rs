//! Memory of `wasm-mcp serve` from `/proc/PID/smaps_rollup` (the server
//! process itself, by the pid of the child the client spawned): one server
//! with the Rust sample plugins idle and with 16 calls in flight, the PSS
//! per server with 16 running, and what each Python or JavaScript sample
//! plugin adds on its own. Every server starts warm from one compile cache,
//! so compiled code is mapped from the same files.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use crate::drive::checked;
use crate::fixture::FileCase;
use crate::request::{Ask, Probe, Request};
use crate::sections::scaling::close_all;
use crate::servers::{os, Connection, ServerSpec};
use crate::setup::{prime_cache, Bench};
use crate::smaps::{mib, Memory};
use crate::targets::Results;

/// Calls in flight, and servers at once.
const SIXTEEN: usize = 16;

pub async fn run(b: &Bench, results: &mut Results) -> Result<()> {
    eprintln!("bench: memory ...");
    let m = Memo::new(b);
    let rust = m.spec(&b.plugins, "rust");
    prime_cache(&b.server, &b.worktree, &b.plugins, &m.cache)?;
    let rust_tools = tool_count(&rust).await?;

    eprintln!("bench: memory: one server, idle and loaded ...");
    let conn = m.settled(&rust).await?;
    ensure_runs(conn.pid, &b.server)?;
    let idle = Memory::of(conn.pid)?;
    let loaded = m.under_load(&conn).await?;
    conn.close().await?;
    eprintln!("bench: memory: {SIXTEEN} servers ...");
    let many = m.many(&rust).await?;
    let mut samples = Vec::new();
    for sample in sample_plugins(b)? {
        eprintln!("bench: memory: + {} ...", sample.display());
        let dir = m.dir_with(&b.plugins, &sample)?;
        prime_cache(&b.server, &b.worktree, &dir, &m.cache)?; // compiles the sample
        let spec = m.spec(&dir, "sample");
        ensure!(
            tool_count(&spec).await? > rust_tools,
            "{}: the sample's tools are not listed",
            sample.display()
        );
        let conn = m.settled(&spec).await?;
        samples.push((sample, Memory::of(conn.pid)?));
        conn.close().await?;
    }

    print_tables(&m, idle, loaded, &many, &samples);
    results.idle_rss_mib = Some(mib(idle.rss));
    results.pss_at_16_mib = Some(mib(mean(&many, |m| m.pss)));
    Ok(())
}

/// The memory section's servers and requests.
struct Memo<'a> {
    b: &'a Bench,
    cache: PathBuf,
    small: Arc<dyn Request>,
    /// What the calls in flight read: the large file (`--quick`: the small one,
    /// so a debug build drains them in seconds).
    load: Arc<FileCase>,
}

impl<'a> Memo<'a> {
    fn new(b: &'a Bench) -> Memo<'a> {
        let read = Ask::Read(Probe::read_file());
        Memo {
            b,
            cache: b
                .args
                .cache_dir
                .clone()
                .unwrap_or_else(|| b.tmp.path().join("cache-memory")),
            small: read.request(&b.small),
            load: if b.args.quick { &b.small } else { &b.large }.clone(),
        }
    }

    /// ours on `plugins`, 16 calls at once allowed for the one plugin.
    fn spec(&self, plugins: &Path, name: &'static str) -> ServerSpec {
        let mut spec = self.b.ours_base.clone();
        spec.name = name;
        spec.args = vec![
            os("serve"),
            os("--worktree"),
            self.b.worktree.clone().into(),
            os("--plugins"),
            plugins.into(),
            os("--watch-ms"),
            os("0"),
            os("--cache-dir"),
            self.cache.clone().into(),
            os("--max-concurrency"),
            os(SIXTEEN.to_string()),
            os("--max-concurrency-per-plugin"),
            os(SIXTEEN.to_string()),
        ];
        spec
    }

    /// A plugin dir holding `rust`'s plugins and `sample` (hard links, or copies).
    fn dir_with(&self, rust: &Path, sample: &Path) -> Result<PathBuf> {
        let name = sample.file_stem().context("sample without a name")?;
        let dir = self.b.tmp.path().join("memory-plugins").join(name);
        std::fs::create_dir_all(&dir)?;
        let mut files = wasm_files(rust)?;
        files.push(sample.to_owned());
        for f in files {
            let to = dir.join(f.file_name().context("plugin without a name")?);
            if std::fs::hard_link(&f, &to).is_err() {
                std::fs::copy(&f, &to).with_context(|| format!("copying {}", f.display()))?;
            }
        }
        Ok(dir)
    }

    /// Connected, tools listed, one small call made, then left alone a moment.
    async fn settled(&self, spec: &ServerSpec) -> Result<Connection> {
        let conn = spec.connect().await?;
        spec.expect_tool(&conn, "read_file").await?;
        checked(conn.peer(), self.small.as_ref()).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(conn)
    }

    /// The sample with the highest RSS while 16 reads are kept in flight.
    async fn under_load(&self, conn: &Connection) -> Result<Memory> {
        let read = Ask::Read(Probe::read_file()).request(&self.load);
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..SIXTEEN)
            .map(|_| {
                let (peer, req) = (conn.peer().clone(), read.clone());
                let (stop, done) = (stop.clone(), done.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        checked(&peer, req.as_ref()).await?;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    anyhow::Ok(())
                })
            })
            .collect();
        let mut peak = Memory::default();
        let until = Instant::now() + Duration::from_millis(self.b.counts.memory_load_ms);
        let running = || !tasks.iter().any(|t| t.is_finished()); // a failed call ends its task
        while running() && (Instant::now() < until || done.load(Ordering::Relaxed) < SIXTEEN) {
            let m = Memory::of(conn.pid)?;
            if m.rss > peak.rss {
                peak = m;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await??;
        }
        Ok(peak)
    }

    /// 16 servers running at once, each settled; their memory.
    async fn many(&self, spec: &ServerSpec) -> Result<Vec<Memory>> {
        let mut conns = Vec::with_capacity(SIXTEEN);
        for _ in 0..SIXTEEN {
            conns.push(self.settled_quickly(spec).await?);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let memory = conns
            .iter()
            .map(|c| Memory::of(c.pid))
            .collect::<Result<Vec<_>>>()?;
        close_all(conns).await?;
        Ok(memory)
    }

    async fn settled_quickly(&self, spec: &ServerSpec) -> Result<Connection> {
        let conn = spec.connect().await?;
        checked(conn.peer(), self.small.as_ref()).await?;
        Ok(conn)
    }
}

/// `pid` is a process of `program` (not a wrapper around it).
fn ensure_runs(pid: u32, program: &Path) -> Result<()> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))?;
    let want = program.canonicalize()?;
    ensure!(
        exe == want,
        "pid {pid} runs {}, not {}",
        exe.display(),
        want.display()
    );
    Ok(())
}

async fn tool_count(spec: &ServerSpec) -> Result<usize> {
    let conn = spec.connect().await?;
    let n = conn
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| anyhow::anyhow!("{}: tools/list: {e}", spec.name))?
        .len();
    conn.close().await?;
    Ok(n)
}

/// The `.wasm` files of a directory, sorted.
fn wasm_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    files.sort();
    Ok(files)
}

/// The Python and JavaScript samples (`dist/samples/*.wasm`); none when absent.
fn sample_plugins(b: &Bench) -> Result<Vec<PathBuf>> {
    let dir = b
        .args
        .samples
        .clone()
        .unwrap_or_else(|| b.root.join("dist/samples"));
    if !dir.is_dir() {
        eprintln!(
            "bench: {} missing, no sample plugins measured",
            dir.display()
        );
        return Ok(Vec::new());
    }
    wasm_files(&dir)
}

fn mean(v: &[Memory], f: impl Fn(&Memory) -> u64) -> u64 {
    v.iter().map(&f).sum::<u64>() / v.len().max(1) as u64
}

fn print_tables(
    m: &Memo,
    idle: Memory,
    loaded: Memory,
    many: &[Memory],
    samples: &[(PathBuf, Memory)],
) {
    let names: Vec<String> = wasm_files(&m.b.plugins)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    println!(
        "== memory: wasm-mcp serve from /proc/PID/smaps_rollup, MiB (Rust plugins: {}) ==",
        names.join(", ")
    );
    println!(
        "{:<46} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "server", "RSS", "anon", "file", "PSS", "PSS anon", "PSS file"
    );
    let row = |name: &str, m: &Memory| {
        println!(
            "{:<46} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            name,
            mib(m.rss),
            mib(m.anon),
            mib(m.file()),
            mib(m.pss),
            mib(m.pss_anon),
            mib(m.pss_file)
        );
    };
    row("idle (tools listed, one call made)", &idle);
    let load = format!("{SIXTEEN} read_file {} in flight (peak RSS)", m.load.rel);
    row(&load, &loaded);
    let avg = Memory {
        rss: mean(many, |m| m.rss),
        pss: mean(many, |m| m.pss),
        anon: mean(many, |m| m.anon),
        pss_anon: mean(many, |m| m.pss_anon),
        pss_file: mean(many, |m| m.pss_file),
    };
    row(
        &format!("each of {} servers running (mean)", many.len()),
        &avg,
    );
    println!(
        "{} servers: PSS total {:.1} MiB, per server min {:.1} / max {:.1} MiB",
        many.len(),
        mib(many.iter().map(|m| m.pss).sum()),
        mib(many.iter().map(|m| m.pss).min().unwrap_or(0)),
        mib(many.iter().map(|m| m.pss).max().unwrap_or(0))
    );
    for (path, m) in samples {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        row(&format!("idle, Rust plugins + {name}"), m);
        println!(
            "  {name} adds: RSS {:+.1} MiB (anon {:+.1}, file {:+.1}), PSS {:+.1} MiB",
            delta(m.rss, idle.rss),
            delta(m.anon, idle.anon),
            delta(m.file(), idle.file()),
            delta(m.pss, idle.pss)
        );
    }
    println!();
}

fn delta(a: u64, b: u64) -> f64 {
    mib(a) - mib(b)
}
