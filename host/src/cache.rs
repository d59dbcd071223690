//! On-disk cache of compiled components, keyed by the component's content
//! hash and the engine's compatibility hash, so a warm start deserializes
//! native code instead of recompiling with Cranelift.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

use crate::compile_child::ChildCompiler;
use crate::sandbox::CodeTier;

impl CacheOutcome {
    /// The compiler whose code this is.
    pub fn tier(self) -> CodeTier {
        match self {
            CacheOutcome::Baseline => CodeTier::Baseline,
            CacheOutcome::Hit | CacheOutcome::Compiled => CodeTier::Optimized,
        }
    }
}

/// How a component was obtained, for logs and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from a `.cwasm` in the cache directory.
    Hit,
    /// Compiled now (and written to the cache when there is one).
    Compiled,
    /// Compiled now by the baseline compiler (Winch; never cached): the
    /// plugin runs on it until Cranelift's code replaces it.
    Baseline,
}

/// A cache directory (or none: always compile). Every compile a server
/// does goes through it, so it also counts them (see [`Compiles`]).
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
    compiles: Arc<CompileGauge>,
    /// Compiles run in bounded child processes (`wasm-mcp` does); `None`:
    /// in this process (the bench and library tests, on trusted plugins).
    child: Option<ChildCompiler>,
}

/// The compiles a cache has run: running now, the most ever running at
/// once, and finished, by compiler. The registry bounds `peak` (load slots
/// plus the tier-up lane) however many cold plugins a directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Compiles {
    pub running: usize,
    pub peak: usize,
    /// Finished baseline (Winch) compiles.
    pub baseline: usize,
    /// Finished Cranelift compiles, each with its cache entry written
    /// (when it could be).
    pub optimized: usize,
}

#[derive(Debug, Default)]
struct CompileGauge {
    running: AtomicUsize,
    peak: AtomicUsize,
    baseline: AtomicUsize,
    optimized: AtomicUsize,
}

impl CompileGauge {
    /// Counts one compile by `tier` until the returned guard drops.
    fn enter(&self, tier: CodeTier) -> Counted<'_> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        Counted(self, tier)
    }

    /// The finished compiles of `tier`.
    fn done(&self, tier: CodeTier) -> &AtomicUsize {
        match tier {
            CodeTier::Baseline => &self.baseline,
            CodeTier::Optimized => &self.optimized,
        }
    }
}

/// One compile running; counted as done when dropped.
struct Counted<'a>(&'a CompileGauge, CodeTier);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0.done(self.1).fetch_add(1, Ordering::SeqCst);
    }
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn engine_key(engine: &Engine) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!("{:016x}", h.finish())
}

impl ComponentCache {
    pub fn new(dir: Option<PathBuf>) -> Self {
        ComponentCache {
            dir,
            compiles: Arc::default(),
            child: None,
        }
    }

    /// Every compile through this cache runs in a child process `child`
    /// describes, bounded in memory and time ([`crate::compile_child`]).
    pub fn compiling_in(mut self, child: ChildCompiler) -> Self {
        self.child = Some(child);
        if let Some(dir) = &self.dir {
            remove_abandoned_outputs(dir, ABANDONED_AFTER);
        }
        self
    }

    /// The compiles run through this cache (and its clones) so far.
    pub fn compiles(&self) -> Compiles {
        let g = &self.compiles;
        Compiles {
            running: g.running.load(Ordering::SeqCst),
            peak: g.peak.load(Ordering::SeqCst),
            baseline: g.baseline.load(Ordering::SeqCst),
            optimized: g.optimized.load(Ordering::SeqCst),
        }
    }

    /// Compiles `bytes` with the baseline engine (Winch). Never cached:
    /// the plugin runs on it only until Cranelift's code replaces it.
    pub fn compile_baseline(&self, baseline: &Engine, bytes: &[u8]) -> Result<Component> {
        compilable(bytes)?;
        let _counted = self.compiles.enter(CodeTier::Baseline);
        let Some(child) = &self.child else {
            return Component::new(baseline, bytes)
                .map_err(anyhow::Error::from)
                .context("compiling component (baseline)");
        };
        self.compiled_by(child, CodeTier::Baseline, baseline, bytes, None)
            .context("compiling component (baseline)")
    }

    fn entry(&self, engine: &Engine, digest: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{digest}-{}.cwasm", engine_key(engine))))
    }

    /// The cached component for `digest` compiled by `engine`, if any.
    pub fn lookup(&self, engine: &Engine, digest: &str) -> Option<Component> {
        self.entry(engine, digest)
            .filter(|p| p.is_file())
            .and_then(|p| map(engine, &p))
    }

    /// Load the component for `bytes` (whose hex SHA-256 is `digest`).
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &str,
    ) -> Result<(Component, CacheOutcome)> {
        if let Some(c) = self.lookup(engine, digest) {
            return Ok((c, CacheOutcome::Hit));
        }
        compilable(bytes)?;
        let entry = self.entry(engine, digest);
        // Counted as done once its cache entry is written (or could not
        // be), so a finished count means the entry is on disk.
        let _counted = self.compiles.enter(CodeTier::Optimized);
        if let Some(child) = &self.child {
            let compiled =
                self.compiled_by(child, CodeTier::Optimized, engine, bytes, entry.as_deref());
            return Ok((
                compiled.context("compiling component")?,
                CacheOutcome::Compiled,
            ));
        }
        let compiled = engine
            .precompile_component(bytes)
            .map_err(anyhow::Error::from)
            .context("compiling component")?;
        // Mapped from the cache file when it could be written: its code pages
        // are then shared with every other server using the same cache
        // (not a private copy per process).
        if let Some(path) = entry {
            match write_atomic(&path, &compiled) {
                Ok(()) => {
                    if let Some(c) = map(engine, &path) {
                        return Ok((c, CacheOutcome::Compiled));
                    }
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), "could not write cache entry: {e:#}")
                }
            }
        }
        // SAFETY: `compiled` was produced by this engine just now.
        let component = unsafe { Component::deserialize(engine, &compiled) }?;
        Ok((component, CacheOutcome::Compiled))
    }
}

impl ComponentCache {
    /// `bytes` compiled for `tier` by `child` and mapped by `engine`: from
    /// `entry` (the cache entry, the output renamed into place whole) or,
    /// with none, from a scratch file removed once mapped.
    fn compiled_by(
        &self,
        child: &ChildCompiler,
        tier: CodeTier,
        engine: &Engine,
        bytes: &[u8],
        entry: Option<&Path>,
    ) -> Result<Component> {
        let out = scratch_file(self.dir.as_deref(), tier)?;
        let placed = child
            .precompile(tier, bytes, &out)
            .and_then(|()| match entry {
                Some(entry) => std::fs::rename(&out, entry)
                    .map(|()| entry.to_path_buf())
                    .context("placing the cache entry"),
                None => Ok(out.clone()),
            });
        let component = placed
            .and_then(|path| map(engine, &path).context("the compiler's output did not load"));
        let _ = std::fs::remove_file(&out);
        component
    }
}

/// A new file's path for a compile child's output: in the cache directory
/// (then renamed into place on the same file system), else the system's
/// temporary directory.
fn scratch_file(dir: Option<&Path>, tier: CodeTier) -> Result<PathBuf> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = dir.map_or_else(std::env::temp_dir, Path::to_path_buf);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let n = N.fetch_add(1, Ordering::Relaxed);
    Ok(dir.join(format!(
        "{COMPILING_PREFIX}{}-{n}-{tier:?}",
        std::process::id()
    )))
}

/// How a compile child's unplaced output is named, and a cache entry being
/// written ([`write_atomic`]).
const COMPILING_PREFIX: &str = ".compiling-";
const WRITING_PREFIX: &str = ".tmp-";

/// Refuses a cache directory inside `worktree`: a cache entry is native
/// code the server maps as it is, and a plugin with write access to the
/// worktree could write one (the directory is the operator's, as the audit
/// log is). Symlinks are followed; parts of `dir` not made yet are taken as
/// they are written.
pub fn check_outside(dir: &Path, worktree: &Path) -> Result<()> {
    let why = "a plugin with write access could write an entry, native code the server maps";
    crate::operator_paths::outside_worktree(dir, worktree, why)
        .with_context(|| format!("compile cache {}", dir.display()))?;
    Ok(())
}

/// The cache entry at `path`, mapped; `None` (logged) when it is unusable.
fn map(engine: &Engine, path: &Path) -> Option<Component> {
    // SAFETY: the cache directory is written only by this program (atomic
    // rename of `Engine::precompile_component` output): it is the
    // operator's, never inside the worktree (`check_outside`, at start),
    // and the harness refuses a repository that tracks files where its
    // policy puts it (`.cache`). The file name binds both the source hash
    // and the engine's compatibility hash. A corrupt entry fails to
    // deserialize and the caller compiles instead.
    match unsafe { Component::deserialize_file(engine, path) } {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(path = %path.display(), "ignoring unusable cache entry: {e:#}");
            None
        }
    }
}

/// Age after which a compile's unplaced output in the cache directory is
/// taken for abandoned: one lives for the moment between its compiler
/// writing it and the server renaming it into place, and a server stopped
/// mid-compile left 37–55 MB files for good (a helper's find). By age, not
/// by whether the process that named it is alive: servers in other PID
/// namespaces may share the directory.
pub const ABANDONED_AFTER: Duration = Duration::from_secs(600);

/// Removes the compile outputs and temporary entries (`.compiling-*`,
/// `.tmp-*`) in `dir` last written more than `age` ago.
pub fn remove_abandoned_outputs(dir: &Path, age: Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(COMPILING_PREFIX) || name.starts_with(WRITING_PREFIX)) {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|e| e > age));
        if old {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => {
                    tracing::info!(file = %entry.path().display(), "removed an abandoned compile output")
                }
                Err(e) => tracing::debug!(file = %entry.path().display(), "could not remove: {e}"),
            }
        }
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().context("cache path has no parent")?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        "{WRITING_PREFIX}{}-{}",
        std::process::id(),
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Refuses code too costly to compile ([`crate::code_limits`]), before any
/// compiler runs: every compile of a component not in the cache goes
/// through here.
fn compilable(bytes: &[u8]) -> Result<()> {
    match crate::code_limits::CodeShape::of(bytes).refusal() {
        Some(why) => anyhow::bail!("too costly to compile: {why}"),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outputs left by a server stopped mid-compile are removed once old;
    /// a fresh one (a compile of a live server) and the entries stay.
    #[test]
    fn abandoned_outputs_are_removed_once_old() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = std::time::SystemTime::now() - Duration::from_secs(3600);
        for name in [".compiling-1-0-Optimized", ".tmp-1-x.cwasm"] {
            let f = std::fs::File::create(d.join(name)).unwrap();
            f.set_modified(old).unwrap();
        }
        std::fs::write(d.join(".compiling-2-0-Baseline"), b"fresh").unwrap();
        let entry = std::fs::File::create(d.join("abc-def.cwasm")).unwrap();
        entry.set_modified(old).unwrap();
        remove_abandoned_outputs(d, ABANDONED_AFTER);
        let mut left: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [".compiling-2-0-Baseline", "abc-def.cwasm"]);
    }
}
