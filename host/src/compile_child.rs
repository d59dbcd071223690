//! Compiling a component in a child process, bounded in memory and time.
//!
//! A compiler's cost is not bounded by the size of what it compiles, and a
//! compile cannot be interrupted: a 1.5 KB component of components nested
//! 30 deep, each instantiating the one below twice, grew the server to
//! 3 GB in 6 s (wasmtime inlines every instantiation: 2^30 of them); one
//! function of 50,000 locals and 100,000 joins took Cranelift ~1.4 GB/s
//! until the machine ran out; one of 250,000 values on the stack across
//! 167,000 blocks took Winch 45 s (quadratic), during which nothing was
//! served (a helper's finds). [`crate::code_limits`] refuses the shapes
//! known to be costly before any compiler runs; this bounds the rest: the
//! compiler runs in `wasm-mcp compile-worker`, a child with an address
//! space limit (`RLIMIT_AS`, `--compile-memory-mb`), a deadline
//! (`--compile-timeout-ms`, then it is killed) and a lower CPU priority,
//! and writes the compiled code to a file the server then maps.
//!
//! The bytes compiled are the bytes the server hashed and checked: they go
//! to the child on its stdin, never as a path it would read again.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::sandbox::CodeTier;

/// Default bound of one compile's address space (`--compile-memory-mb`):
/// Cranelift peaked at ~500 MB on the Python and JavaScript samples.
pub const DEFAULT_COMPILE_MEMORY_MB: u64 = 4096;
/// Default deadline of one compile (`--compile-timeout-ms`): the samples
/// took Cranelift 10–12 s on a loaded 2-core machine.
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(120);

/// The subcommand the child runs.
pub const WORKER_COMMAND: &str = "compile-worker";

/// Most of a failed child's stderr kept for its error.
const KEPT_STDERR: u64 = 16 << 10;

/// Where and within what a compile runs.
#[derive(Debug, Clone)]
pub struct ChildCompiler {
    /// The `wasm-mcp` binary (it has the [`WORKER_COMMAND`] subcommand).
    pub exe: PathBuf,
    pub memory_bytes: u64,
    pub timeout: Duration,
}

impl ChildCompiler {
    /// This process's own binary, with the default bounds: on Linux the
    /// running one (`/proc/self/exe`), even if its file was replaced since
    /// (an upgrade while serving): a newer binary's code would not load.
    pub fn this_binary() -> Result<Self> {
        let running = Path::new("/proc/self/exe");
        let exe = match running.exists() {
            true => running.to_path_buf(),
            false => std::env::current_exe().context("finding this program's binary")?,
        };
        Ok(ChildCompiler {
            exe,
            memory_bytes: DEFAULT_COMPILE_MEMORY_MB << 20,
            timeout: DEFAULT_COMPILE_TIMEOUT,
        })
    }

    /// Compiles `bytes` for `tier` in a child, which writes the
    /// serialized component to `out`.
    pub fn precompile(&self, tier: CodeTier, bytes: &[u8], out: &Path) -> Result<()> {
        let mut command = Command::new(&self.exe);
        command
            .arg(WORKER_COMMAND)
            .arg(tier_name(tier))
            .arg(out)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env("WASM_MCP_LOG", "error");
        dies_with_this_thread(&mut command);
        let mut child = command
            .spawn()
            .with_context(|| format!("starting the compiler ({})", self.exe.display()))?;
        self.bound(child.id());
        let sent = child.stdin.take().map(|mut stdin| stdin.write_all(bytes));
        let stderr = child.stderr.take();
        let said = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(e) = stderr {
                let _ = e.take(KEPT_STDERR).read_to_string(&mut text);
            }
            text
        });
        let status = self.wait(&mut child)?;
        let said = said.join().unwrap_or_default();
        match status {
            Some(status) if status.success() => Ok(()),
            Some(_) if said.contains("memory allocation") || said.contains("out of memory") => {
                bail!(
                    "compiling needed more than {} MiB (--compile-memory-mb)",
                    self.memory_bytes >> 20
                )
            }
            Some(status) => {
                if let Some(Err(e)) = sent {
                    tracing::debug!("sending the component to the compiler: {e}");
                }
                bail!("the compiler failed ({status}): {}", said.trim())
            }
            None => bail!(
                "compiling took longer than {} ms (--compile-timeout-ms)",
                self.timeout.as_millis()
            ),
        }
    }

    /// Bounds the child's address space and lowers its priority (calls
    /// running meanwhile keep theirs). Set before it is sent anything.
    fn bound(&self, pid: u32) {
        let pid = rustix::process::Pid::from_raw(pid as i32);
        let limit = rustix::process::Rlimit {
            current: Some(self.memory_bytes),
            maximum: Some(self.memory_bytes),
        };
        if let Err(e) = rustix::process::prlimit(pid, rustix::process::Resource::As, limit) {
            tracing::warn!("could not bound the compiler's memory: {e}");
        }
        let _ = rustix::process::setpriority_process(pid, 10);
    }

    /// The child's exit status, or `None` when it passed the deadline (it
    /// is then killed).
    fn wait(&self, child: &mut std::process::Child) -> Result<Option<std::process::ExitStatus>> {
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The child is killed when the thread that starts it ends (Linux's
/// parent-death signal follows the thread; this one waits for the child
/// until it exits, so that is when the server's process ends). A server
/// stopped mid-compile (an MCP client's stdio session ends with SIGTERM
/// two seconds after its input, and the TypeScript SDK signals the server
/// alone) left its compiler running, several at once on two cores, each
/// writing tens of MB that nothing removed (a helper's find).
fn dies_with_this_thread(command: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = rustix::process::getpid();
        // SAFETY: between fork and exec the closure makes two system calls
        // (prctl, getppid) and allocates nothing.
        unsafe {
            command.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))?;
                // The server ended before the signal was set: no one waits.
                match rustix::process::getppid() == Some(parent) {
                    true => Ok(()),
                    false => Err(std::io::Error::other("the server has ended")),
                }
            });
        }
    }
}

fn tier_name(tier: CodeTier) -> &'static str {
    match tier {
        CodeTier::Baseline => "baseline",
        CodeTier::Optimized => "optimized",
    }
}

/// The child's side (`wasm-mcp compile-worker TIER OUT`): the component on
/// stdin, compiled for `tier` by an engine configured as the server's, its
/// serialized code written to `out`.
pub fn run_worker(tier: &str, out: &Path) -> Result<()> {
    let tier = match tier {
        "baseline" => CodeTier::Baseline,
        "optimized" => CodeTier::Optimized,
        other => bail!("unknown code tier {other:?}"),
    };
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .context("reading the component")?;
    let engine = crate::sandbox::compile_engine(tier)?;
    let compiled = engine
        .precompile_component(&bytes)
        .map_err(anyhow::Error::from)
        .context("compiling component")?;
    std::fs::write(out, compiled).with_context(|| format!("writing {}", out.display()))
}
