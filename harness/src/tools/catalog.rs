//! The tool catalog: an immutable snapshot per model round.
//!
//! `notifications/tools/list_changed` (or a reconnect) only marks the catalog
//! dirty; the new snapshot is built completely and swapped in at the next safe
//! point (between rounds), so a round never sees a half-updated tool set. Every
//! snapshot has a version that the trace records per round.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::mcp::discovery::DiscoveredTool;
use crate::tools::naming::{Binding, BindingTable, NameCollision};

/// One exposed tool under its local name.
#[derive(Debug, Clone)]
pub struct CatalogEntry {
    pub local_name: String,
    pub tool: DiscoveredTool,
}

#[derive(Debug, Default)]
pub struct CatalogSnapshot {
    pub version: u64,
    /// Ordered by local name (stable tool order for the model).
    entries: BTreeMap<String, Arc<CatalogEntry>>,
    bindings: BindingTable,
}

impl CatalogSnapshot {
    /// Build from the tools of all servers; fails on a local-name collision.
    pub fn build(version: u64, tools: Vec<DiscoveredTool>) -> Result<Self, NameCollision> {
        let mut bindings = BindingTable::default();
        let mut entries = BTreeMap::new();
        for tool in tools {
            let local = bindings.bind(&tool.server_id, &tool.name)?;
            entries.insert(
                local.clone(),
                Arc::new(CatalogEntry {
                    local_name: local,
                    tool,
                }),
            );
        }
        Ok(Self {
            version,
            entries,
            bindings,
        })
    }

    pub fn get(&self, local: &str) -> Option<&Arc<CatalogEntry>> {
        self.entries.get(local)
    }

    pub fn resolve(&self, local: &str) -> Option<&Binding> {
        self.bindings.resolve(local)
    }

    /// Local name for a remote tool. With `server = None` the remote name must be
    /// unique across servers.
    pub fn local_for(&self, server: Option<&str>, remote: &str) -> Option<&str> {
        match server {
            Some(s) => self.bindings.local_for(s, remote),
            None => {
                let mut hits = self
                    .entries
                    .values()
                    .filter(|e| e.tool.name == remote)
                    .map(|e| e.local_name.as_str());
                let first = hits.next()?;
                hits.next().is_none().then_some(first)
            }
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = &Arc<CatalogEntry>> {
        self.entries.values()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Holds the current snapshot and the dirty flag.
#[derive(Debug)]
pub struct Catalog {
    current: Arc<CatalogSnapshot>,
    dirty: Arc<AtomicBool>,
}

impl Catalog {
    pub fn new(initial: CatalogSnapshot) -> Self {
        Self {
            current: Arc::new(initial),
            dirty: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The frozen snapshot for one round.
    pub fn snapshot(&self) -> Arc<CatalogSnapshot> {
        self.current.clone()
    }

    pub fn version(&self) -> u64 {
        self.current.version
    }

    pub fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::SeqCst);
    }

    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::SeqCst)
    }

    /// A flag others can set (e.g. notification handlers).
    pub fn dirty_flag(&self) -> Arc<AtomicBool> {
        self.dirty.clone()
    }

    /// At a safe point: rebuild from `tools` and swap atomically. On error the
    /// old snapshot stays and the catalog stays dirty.
    pub fn refresh(&mut self, tools: Vec<DiscoveredTool>) -> Result<u64, NameCollision> {
        let next = CatalogSnapshot::build(self.current.version + 1, tools)?;
        self.current = Arc::new(next);
        self.dirty.store(false, Ordering::SeqCst);
        Ok(self.current.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn tool(server: &str, name: &str) -> DiscoveredTool {
        let schema = json!({"type": "object"});
        DiscoveredTool {
            server_id: server.into(),
            name: name.into(),
            description: String::new(),
            input_validator: Arc::new(
                wasm_mcp_protocol::CheckedSchema::compile(&schema, &Default::default()).unwrap(),
            ),
            input_schema: schema,
            output_schema: None,
            output_validator: None,
            annotations: None,
        }
    }

    #[test]
    fn snapshot_is_frozen_until_refresh() {
        let mut cat = Catalog::new(CatalogSnapshot::build(1, vec![tool("a", "x")]).unwrap());
        let round1 = cat.snapshot();
        cat.mark_dirty();
        assert!(cat.is_dirty());
        assert_eq!(
            cat.refresh(vec![tool("a", "x"), tool("a", "y")]).unwrap(),
            2
        );
        assert!(!cat.is_dirty());
        assert_eq!(round1.len(), 1, "old round's snapshot unchanged");
        assert_eq!(cat.snapshot().len(), 2);
        assert_eq!(cat.snapshot().version, 2);
    }

    #[test]
    fn lookups_across_servers() {
        let s = CatalogSnapshot::build(1, vec![tool("a", "x"), tool("b", "x"), tool("b", "y")])
            .unwrap();
        assert_eq!(s.len(), 3);
        assert!(s.local_for(None, "x").is_none(), "ambiguous across servers");
        let y = s.local_for(None, "y").unwrap().to_string();
        assert_eq!(s.resolve(&y).unwrap().server_id, "b");
        let ax = s.local_for(Some("a"), "x").unwrap();
        assert_eq!(s.get(ax).unwrap().tool.server_id, "a");
    }
}
