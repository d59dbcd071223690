//! The live tool registry of a server: plugins loaded from a directory, the
//! current [`Catalog`], reloads when the directory changes, and the call
//! path (validation → sandboxed call → output checks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result};
use serde_json::Value;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::task::JoinSet;

use crate::audit::{AuditLog, AuditOutcome, PendingAudit};
use crate::cache::ComponentCache;
use wasm_mcp_protocol::text::{display_clipped, LOG_DETAIL_BYTES, SHOWN_TEXT_BYTES};
use wasm_mcp_protocol::ErrorKind;

use crate::catalog::Catalog;
use crate::limits::{before, LOAD_SLOTS, TIER_UP_SLOTS};
use crate::plugin::{CallError, CallStats, LoadError, Plugin, Slot};
use crate::sandbox::{CodeTier, Sandbox};
use crate::signing::signature_path;
use crate::trust::TrustPolicy;

/// File identity used to notice plugin changes without re-reading bytes
/// (the plugin's and its signature's: a signature added or replaced
/// reloads the plugin).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    file: FileStamp,
    signature: Option<FileStamp>,
}

/// What changes whenever a file's bytes may have: size, modification
/// time, and the inode and its change time (which no one can set back:
/// a copy-in with the old size and `touch -r` is still noticed).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: (u64, u64),
    changed: (i64, i64),
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode: (meta.dev(), meta.ino()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// The outcome of a tool call as the server reports it.
#[derive(Debug)]
pub enum Outcome {
    /// Structured result (a JSON object valid against the output schema),
    /// and the plugin's own JSON text of it (sent as the text block as is).
    Ok { value: Value, text: String },
    /// Arguments did not match the input schema (the caller's fault).
    InvalidArguments(String),
    /// The tool failed, trapped, or broke its contract.
    Failed(CallError),
    /// The result broke the tool's own output schema (the plugin's fault).
    ContractViolation(String),
}

/// Where an admitted call is (reported as progress to clients that ask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStage {
    /// Arguments are valid; waiting for a call slot.
    Queued,
    /// Slots taken; the guest is running.
    Running,
}

impl Outcome {
    /// The error kind, `None` for a successful call.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            Outcome::Ok { .. } => None,
            Outcome::InvalidArguments(_) => Some(ErrorKind::InvalidArguments),
            Outcome::Failed(e) => Some(e.kind()),
            Outcome::ContractViolation(_) => Some(ErrorKind::ContractViolation),
        }
    }

    /// The error's own message, `None` for a successful call.
    pub fn error_message(&self) -> Option<String> {
        match self {
            Outcome::Ok { .. } => None,
            Outcome::InvalidArguments(m) | Outcome::ContractViolation(m) => Some(m.clone()),
            Outcome::Failed(e) => Some(e.to_string()),
        }
    }
}

/// What a registry checks plugins against and records calls in.
pub struct Trust {
    pub policy: TrustPolicy,
    pub audit: AuditLog,
}

/// Every `*.wasm` seen, by path: its stamp and the plugin, or `None` when it
/// was refused.
type Seen = BTreeMap<PathBuf, (Stamp, Option<Arc<Plugin>>)>;

pub struct Registry {
    sandbox: Arc<Sandbox>,
    cache: ComponentCache,
    dir: PathBuf,
    allow: Option<Vec<String>>,
    catalog: RwLock<Arc<Catalog>>,
    loaded: tokio::sync::Mutex<Seen>,
    /// The server's call slots (`--max-concurrency`).
    permits: Semaphore,
    /// Plugin loads running at once (they have their own instance slots).
    load_slots: Arc<Semaphore>,
    /// Background tier-ups running at once (their own lane: loads never
    /// queue behind them).
    tier_up_slots: Arc<Semaphore>,
    /// Pins, trusted keys and grants every load is checked against.
    policy: Arc<TrustPolicy>,
    audit: AuditLog,
}

/// What one load attempt of a changed file gave.
enum Loaded {
    /// Loaded, or refused for good (`None`) until the file changes.
    Done(Option<Arc<Plugin>>),
    /// A transient failure: keep what was there and retry at the next scan.
    Retry,
}

fn scan(dir: &Path) -> Result<Vec<(PathBuf, Stamp)>> {
    let mut out = Vec::new();
    let rd =
        std::fs::read_dir(dir).with_context(|| format!("reading plugin dir {}", dir.display()))?;
    for entry in rd {
        let entry = entry?;
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("wasm") {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let signature = std::fs::metadata(signature_path(&path))
            .ok()
            .map(|m| FileStamp::of(&m));
        out.push((
            path,
            Stamp {
                file: FileStamp::of(&meta),
                signature,
            },
        ));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

impl Registry {
    /// Load every `*.wasm` in `dir`. A plugin that fails to load is logged
    /// and skipped; the others are served.
    pub async fn open(
        sandbox: Sandbox,
        cache: ComponentCache,
        dir: &Path,
        allow: Option<Vec<String>>,
    ) -> Result<Arc<Self>> {
        let trust = Trust {
            policy: TrustPolicy::server_rights(&sandbox),
            audit: AuditLog::default(),
        };
        Self::open_trusted(sandbox, cache, dir, allow, trust).await
    }

    /// [`Registry::open`] with a trust policy (every load is checked
    /// against it) and an audit log (every call is recorded in it).
    pub async fn open_trusted(
        sandbox: Sandbox,
        cache: ComponentCache,
        dir: &Path,
        allow: Option<Vec<String>>,
        trust: Trust,
    ) -> Result<Arc<Self>> {
        anyhow::ensure!(
            dir.is_dir(),
            "plugin dir {} is not a directory",
            dir.display()
        );
        let reg = Arc::new(Registry {
            permits: Semaphore::new(sandbox.limits().max_concurrency),
            load_slots: Arc::new(Semaphore::new(LOAD_SLOTS)),
            tier_up_slots: Arc::new(Semaphore::new(TIER_UP_SLOTS)),
            sandbox: Arc::new(sandbox),
            cache,
            dir: dir.to_owned(),
            allow,
            catalog: RwLock::new(Arc::new(Catalog::build(0, &[], None))),
            loaded: tokio::sync::Mutex::new(BTreeMap::new()),
            policy: Arc::new(trust.policy),
            audit: trust.audit,
        });
        reg.reload().await?;
        Ok(reg)
    }

    /// The current catalog (cheap clone of an `Arc`).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().unwrap().clone()
    }

    /// Rescan the plugin dir; (re)load changed files, in parallel, each
    /// under `--load-timeout-ms` (waiting for a load slot included). Returns
    /// true when the published tool list changed (the caller then notifies
    /// clients).
    pub async fn reload(&self) -> Result<bool> {
        let files = scan(&self.dir)?;
        let mut loaded = self.loaded.lock().await;
        let mut next = BTreeMap::new();
        let mut changed = Vec::new();
        for (path, stamp) in files {
            match loaded.get(&path) {
                // Unchanged: keep it (a refused file stays refused until it changes).
                Some((old, plugin)) if *old == stamp => {
                    next.insert(path, (stamp, plugin.clone()));
                }
                _ => changed.push((path, stamp)),
            }
        }
        let mut changed_files = false;
        for (path, stamp, result) in self.load_all(changed).await {
            match result {
                Loaded::Done(plugin) => {
                    changed_files = true;
                    next.insert(path, (stamp, plugin));
                }
                Loaded::Retry => {
                    if let Some(old) = loaded.get(&path) {
                        next.insert(path, old.clone());
                    }
                }
            }
        }
        changed_files |= loaded.len() != next.len();
        *loaded = next;
        Ok(changed_files && self.publish(&loaded).await)
    }

    /// Builds and swaps in the catalog of `loaded`; true when the published
    /// tool list changed.
    async fn publish(&self, loaded: &Seen) -> bool {
        // BTreeMap order = file-name order: the first plugin defining a name
        // wins, unless another published it in the catalog this replaces.
        let plugins: Vec<Arc<Plugin>> = loaded.values().filter_map(|(_, p)| p.clone()).collect();
        let failing: BTreeSet<String> = loaded
            .iter()
            .filter(|(_, (_, p))| p.is_none())
            .map(|(path, _)| crate::pinning::plugin_name(path))
            .collect();
        let old = self.catalog();
        // Compiling the tools' schemas is CPU work (up to ~0.5 s a plugin
        // within its regex budget): on a blocking thread, so the executor
        // keeps answering calls meanwhile.
        let build = {
            let (plugins, allow, version) = (plugins.clone(), self.allow.clone(), old.version + 1);
            let before = old.clone();
            move || {
                Catalog::build_after(version, &plugins, allow.as_deref(), Some(&before), &failing)
            }
        };
        let new = match tokio::task::spawn_blocking(build).await {
            Ok(catalog) => catalog,
            Err(e) => {
                tracing::error!("building the catalog failed: {e}; the previous one stays");
                return false;
            }
        };
        for r in &new.rejections {
            tracing::warn!(plugin = %r.plugin, tool = ?r.tool, "tool not published: {}", r.reason);
        }
        let ids: Vec<(&str, &str)> = plugins
            .iter()
            .map(|p| (p.name.as_str(), p.digest.as_str()))
            .collect();
        for key in self.policy.grants.unmatched(&ids) {
            tracing::warn!("grant section plugins.{key:?} matches no loaded plugin (names are file stems, case-sensitive)");
        }
        if let Some(allow) = &self.allow {
            for name in allow.iter().filter(|n| new.get(n).is_none()) {
                tracing::warn!(tool = %name, "allowed tool is not provided by any plugin");
            }
        }
        self.sandbox.note_disk_writers(new.writers());
        let changed = new.fingerprint() != old.fingerprint();
        tracing::info!(
            version = new.version,
            tools = new.len(),
            changed,
            "catalog built"
        );
        *self.catalog.write().unwrap() = Arc::new(new);
        changed
    }

    /// Loads `files` concurrently: in file-name order each waits for a
    /// load slot (until the scan's budget runs out: then it is retried at
    /// the next scan) and runs `list-tools` under its own deadline, so slow
    /// plugins neither add up nor hold back the others.
    async fn load_all(&self, files: Vec<(PathBuf, Stamp)>) -> Vec<(PathBuf, Stamp, Loaded)> {
        let budget = Instant::now() + self.sandbox.limits().load_timeout;
        let mut results: Vec<Option<Loaded>> = files.iter().map(|_| None).collect();
        let mut tasks = JoinSet::new();
        for (i, (path, _)) in files.iter().enumerate() {
            let Some(slot) = acquire_owned_until(&self.load_slots, budget).await else {
                let busy = LoadError::Busy(format!("{}: {}", path.display(), Slot::Load));
                results[i] = Some(log_load(path, Err(busy), Instant::now()));
                continue;
            };
            let (sandbox, cache, path) = (self.sandbox.clone(), self.cache.clone(), path.clone());
            let policy = self.policy.clone();
            tasks.spawn(async move {
                let started = Instant::now();
                let result = Plugin::load_trusted(&sandbox, &cache, &policy, &path).await;
                drop(slot);
                (i, log_load(&path, result, started))
            });
        }
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok((i, loaded)) => results[i] = Some(loaded),
                Err(e) => tracing::error!("a plugin load task failed: {e}"),
            }
        }
        // Only now, so this scan's loads never share the cores with them.
        for loaded in results.iter().flatten() {
            if let Loaded::Done(Some(plugin)) = loaded {
                self.spawn_tier_up(plugin);
            }
        }
        files
            .into_iter()
            .zip(results)
            .map(|((path, stamp), r)| (path, stamp, r.unwrap_or(Loaded::Retry)))
            .collect()
    }

    /// Moves a plugin loaded on baseline code to Cranelift's in the
    /// background (its calls go on meanwhile), in the tier-up lane, in the
    /// order loaded; a failure is logged and the plugin stays on the
    /// baseline code, which is correct, only slower.
    fn spawn_tier_up(&self, plugin: &Arc<Plugin>) {
        if plugin.tier() != CodeTier::Baseline {
            return;
        }
        let (plugin, sandbox, cache) = (plugin.clone(), self.sandbox.clone(), self.cache.clone());
        let lane = self.tier_up_slots.clone();
        tokio::spawn(async move {
            let Ok(_slot) = lane.acquire_owned().await else {
                return;
            };
            if let Err(e) = plugin.tier_up(&sandbox, &cache).await {
                tracing::warn!(plugin = %plugin.name, "stays on baseline code: {e:#}");
            }
        });
    }

    /// Validate and run one call against the given catalog snapshot.
    pub async fn call(&self, catalog: &Catalog, name: &str, args: Value) -> Option<Outcome> {
        self.call_observed(catalog, name, args, None, |_| {}).await
    }

    /// [`Registry::call_audited`], its audit line written at once.
    pub async fn call_observed(
        &self,
        catalog: &Catalog,
        name: &str,
        args: Value,
        call_id: Option<String>,
        stage: impl FnMut(CallStage) + Send,
    ) -> Option<Outcome> {
        let (outcome, _audit) = self.call_audited(catalog, name, args, call_id, stage).await;
        outcome
    }

    /// [`Registry::call`] with the client's id for the call (recorded in
    /// the audit log), telling `stage` where the call is as it goes; the
    /// outcome (`None`: no such tool is published) comes with its audit
    /// line, written when it drops (the caller may overrule the outcome
    /// with what it sent instead). The
    /// call's deadline (its plugin's grant) starts now: it waits for a slot
    /// at most half of it (then it is `busy`, having run nothing), so an
    /// admitted call always has at least the other half to run. Dropping
    /// the returned future ends the call wherever it is (its guest within
    /// one epoch tick) and releases its slots.
    pub async fn call_audited(
        &self,
        catalog: &Catalog,
        name: &str,
        args: Value,
        call_id: Option<String>,
        mut stage: impl FnMut(CallStage) + Send,
    ) -> (Option<Outcome>, PendingAudit<'_>) {
        let arrived = Instant::now();
        let args_text = args.to_string();
        let Some(tool) = catalog.get(name) else {
            return (
                None,
                self.audit_unpublished(catalog, name, &args_text, call_id),
            );
        };
        let plugin = &tool.plugin;
        let timeout = plugin.grant.timeout;
        let (admit_by, deadline) = (arrived + timeout / 2, arrived + timeout);
        let mut audit = self.audit.start(
            Some(plugin),
            name,
            Some(tool.filesystem),
            args_text.len(),
            call_id,
        );
        let validation = wasm_mcp_protocol::Validation::shared();
        // Validation hands the same value back: `args_text` is what runs.
        let lane = Some(plugin.validation_lane());
        if let Err(e) = validation.validate(lane, &tool.input, args).await {
            let outcome = AuditOutcome::Failed(ErrorKind::InvalidArguments);
            audit.finish(outcome, Some(e.to_string()), CallStats::default());
            return (Some(Outcome::InvalidArguments(e.to_string())), audit);
        }
        let started = Instant::now();
        let admitted = match self.try_admit(plugin) {
            Some(permits) => Ok(permits),
            None => {
                stage(CallStage::Queued);
                self.admit(plugin, admit_by).await
            }
        };
        // The slots are held until the result is checked: parsing it takes
        // up to the call's memory limit, so no more results are parsed at
        // once than calls run.
        let (result, stats, _permits) = match admitted {
            Ok(permits) => {
                stage(CallStage::Running);
                let (result, stats) = plugin
                    .call_served(&self.sandbox, tool.filesystem, name, &args_text, deadline)
                    .await;
                (result, stats, Some(permits))
            }
            Err(busy) => (Err(busy), CallStats::default(), None),
        };
        let elapsed_us = started.elapsed().as_micros() as u64;
        let outcome = match result {
            Err(e) => {
                let e_shown = display_clipped(&e, SHOWN_TEXT_BYTES);
                tracing::info!(tool = name, kind = %e.kind(), elapsed_us, "call failed: {e_shown}");
                Outcome::Failed(e)
            }
            Ok(text) => match validation
                .check_result(lane, &text, tool.output.as_ref())
                .await
            {
                Ok(value) => Outcome::Ok { value, text },
                Err(e) => Outcome::ContractViolation(e),
            },
        };
        let audited = AuditOutcome::of(outcome.kind());
        audit.finish(audited, outcome.error_message(), stats);
        tracing::debug!(tool = name, elapsed_us, "call done");
        (Some(outcome), audit)
    }

    /// The audit line of a call of a tool that is not published: hidden
    /// by an allowlist (`not_allowed`, naming the plugin that declares
    /// it) or declared by no loaded plugin (`unknown_tool`).
    fn audit_unpublished(
        &self,
        catalog: &Catalog,
        name: &str,
        args_text: &str,
        call_id: Option<String>,
    ) -> PendingAudit<'_> {
        let hidden = catalog.hidden(name);
        let mut audit =
            self.audit
                .start(hidden.map(|p| &**p), name, None, args_text.len(), call_id);
        let (outcome, why) = match hidden {
            Some(_) => (AuditOutcome::NotAllowed, "the tool is not on its allowlist"),
            None => (
                AuditOutcome::UnknownTool,
                "no loaded plugin declares this tool",
            ),
        };
        audit.finish(outcome, Some(why.into()), CallStats::default());
        audit
    }

    /// Both slots of [`Registry::admit`] when they are free now.
    fn try_admit<'a>(
        &'a self,
        plugin: &'a Plugin,
    ) -> Option<(SemaphorePermit<'a>, SemaphorePermit<'a>)> {
        let share = plugin.share().try_acquire().ok()?;
        let server = self.permits.try_acquire().ok()?;
        Some((share, server))
    }

    /// Takes a slot of the plugin's share, then a server slot, both before
    /// `deadline` (else `busy`): one plugin's stuck calls can hold at most
    /// its share of the server, never a slot of another plugin.
    async fn admit<'a>(
        &'a self,
        plugin: &'a Plugin,
        deadline: Instant,
    ) -> Result<(SemaphorePermit<'a>, SemaphorePermit<'a>), CallError> {
        let limits = self.sandbox.limits();
        let share = acquire_until(plugin.share(), deadline)
            .await
            .ok_or(CallError::Busy(Slot::PluginShare(
                plugin.grant.max_concurrency,
            )))?;
        let server = acquire_until(&self.permits, deadline)
            .await
            .ok_or(CallError::Busy(Slot::Server(limits.max_concurrency)))?;
        Ok((share, server))
    }
}

/// A permit of `sem`, unless `deadline` passes first.
async fn acquire_until(sem: &Semaphore, deadline: Instant) -> Option<SemaphorePermit<'_>> {
    before(deadline, sem.acquire()).await?.ok()
}

/// An owned permit of `sem`, unless `deadline` passes first.
async fn acquire_owned_until(
    sem: &Arc<Semaphore>,
    deadline: Instant,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    before(deadline, sem.clone().acquire_owned()).await?.ok()
}

/// Logs a load attempt's result and sorts it: loaded, refused, or retry.
fn log_load(path: &Path, result: Result<Arc<Plugin>, LoadError>, started: Instant) -> Loaded {
    match result {
        Ok(p) => {
            tracing::info!(plugin = %path.display(), tools = p.tools.len(), cache = ?p.cache,
                ms = started.elapsed().as_millis() as u64, "loaded plugin");
            Loaded::Done(Some(p))
        }
        Err(LoadError::Busy(m)) => {
            tracing::warn!("plugin not loaded yet: {m}");
            Loaded::Retry
        }
        Err(e @ LoadError::Refused(_)) => {
            let shown = display_clipped(&format_args!("{e:#}"), LOG_DETAIL_BYTES);
            tracing::error!("refused plugin: {shown}");
            Loaded::Done(None)
        }
    }
}
