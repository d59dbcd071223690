//! The live tool registry of a server: plugins loaded from a directory, the
//! current [`Catalog`], reloads when the directory changes, and the call
//! path (validation → sandboxed call → output checks).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::cache::ComponentCache;
use crate::catalog::Catalog;
use crate::plugin::{CallError, Plugin};
use crate::sandbox::Sandbox;

/// File identity used to notice plugin changes without re-reading bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
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

/// Every `*.wasm` seen, by path: its stamp and the plugin, or `None` when it
/// was refused.
type Seen = BTreeMap<PathBuf, (Stamp, Option<Arc<Plugin>>)>;

pub struct Registry {
    sandbox: Sandbox,
    cache: ComponentCache,
    dir: PathBuf,
    allow: Option<Vec<String>>,
    catalog: RwLock<Arc<Catalog>>,
    loaded: tokio::sync::Mutex<Seen>,
    permits: Semaphore,
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
        out.push((
            path,
            Stamp {
                len: meta.len(),
                modified: meta.modified().ok(),
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
        anyhow::ensure!(
            dir.is_dir(),
            "plugin dir {} is not a directory",
            dir.display()
        );
        let reg = Arc::new(Registry {
            permits: Semaphore::new(sandbox.limits().max_concurrency),
            sandbox,
            cache,
            dir: dir.to_owned(),
            allow,
            catalog: RwLock::new(Arc::new(Catalog::build(0, &[], None))),
            loaded: tokio::sync::Mutex::new(BTreeMap::new()),
        });
        reg.reload().await?;
        Ok(reg)
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The current catalog (cheap clone of an `Arc`).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().unwrap().clone()
    }

    /// Rescan the plugin dir; (re)load changed files. Returns true when the
    /// published tool list changed (the caller then notifies clients).
    pub async fn reload(&self) -> Result<bool> {
        let files = scan(&self.dir)?;
        let mut loaded = self.loaded.lock().await;
        let mut next = BTreeMap::new();
        let mut changed_files = false;
        for (path, stamp) in files {
            if let Some((old, plugin)) = loaded.get(&path) {
                if *old == stamp {
                    // Unchanged: keep it (a refused file stays refused until it changes).
                    next.insert(path, (stamp, plugin.clone()));
                    continue;
                }
            }
            changed_files = true;
            let started = std::time::Instant::now();
            let plugin = match Plugin::load(&self.sandbox, &self.cache, &path).await {
                Ok(p) => {
                    tracing::info!(plugin = %path.display(), tools = p.tools.len(), cache = ?p.cache,
                        ms = started.elapsed().as_millis() as u64, "loaded plugin");
                    Some(p)
                }
                Err(e) => {
                    tracing::error!("refused plugin: {e:#}");
                    None
                }
            };
            next.insert(path, (stamp, plugin));
        }
        changed_files |= loaded.len() != next.len();
        *loaded = next;
        if !changed_files {
            return Ok(false);
        }
        // BTreeMap order = file-name order: the first plugin defining a name wins.
        let plugins: Vec<Arc<Plugin>> = loaded.values().filter_map(|(_, p)| p.clone()).collect();
        let old = self.catalog();
        let new = Catalog::build(old.version + 1, &plugins, self.allow.as_deref());
        for r in &new.rejections {
            tracing::warn!(plugin = %r.plugin, tool = ?r.tool, "tool not published: {}", r.reason);
        }
        if let Some(allow) = &self.allow {
            for name in allow.iter().filter(|n| new.get(n).is_none()) {
                tracing::warn!(tool = %name, "allowed tool is not provided by any plugin");
            }
        }
        let changed = new.fingerprint() != old.fingerprint();
        tracing::info!(
            version = new.version,
            tools = new.len(),
            changed,
            "catalog built"
        );
        *self.catalog.write().unwrap() = Arc::new(new);
        Ok(changed)
    }

    /// Validate and run one call against the given catalog snapshot.
    pub async fn call(&self, catalog: &Catalog, name: &str, args: Value) -> Option<Outcome> {
        let tool = catalog.get(name)?;
        let validation = wasm_mcp_protocol::Validation::shared();
        let args = match validation.validate(&tool.input, args).await {
            Ok(args) => args,
            Err(e) => return Some(Outcome::InvalidArguments(e.to_string())),
        };
        let _permit = self.permits.acquire().await.expect("semaphore closed");
        let args_text = args.to_string();
        let started = std::time::Instant::now();
        let result = tool.plugin.call(&self.sandbox, name, &args_text).await;
        let elapsed_us = started.elapsed().as_micros() as u64;
        let outcome = match result {
            Err(e) => {
                tracing::info!(tool = name, kind = e.kind(), elapsed_us, "call failed: {e}");
                Outcome::Failed(e)
            }
            Ok(text) => match validation.check_result(&text, tool.output.as_ref()).await {
                Ok(value) => Outcome::Ok { value, text },
                Err(e) => Outcome::ContractViolation(e),
            },
        };
        tracing::debug!(tool = name, elapsed_us, "call done");
        Some(outcome)
    }
}
