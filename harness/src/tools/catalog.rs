//! The tool catalog: an immutable snapshot per model round.
//!
//! `notifications/tools/list_changed` (or a reconnect) is only acted on at the
//! next safe point (between rounds): the new snapshot is built completely and
//! swapped in, so a round never sees a half-updated tool set. Every snapshot
//! has a version that the trace records per round.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::tools::naming::{Binding, BindingTable, NameCollision};
use crate::tools::tool::{NameResolver, Tool};

#[derive(Debug, Default)]
pub struct CatalogSnapshot {
    pub version: u64,
    /// Ordered by local name (stable tool order for the model).
    entries: BTreeMap<String, Arc<Tool>>,
    bindings: BindingTable,
}

impl CatalogSnapshot {
    /// Build from the tools of all servers; fails on a local-name collision.
    pub fn build(version: u64, tools: Vec<Tool>) -> Result<Self, NameCollision> {
        let mut bindings = BindingTable::default();
        let mut entries = BTreeMap::new();
        for tool in tools {
            let Some(b) = &tool.binding else {
                continue; // the catalog holds server tools only
            };
            bindings.bind_as(tool.local_name.clone(), &b.server_id, &b.remote_name)?;
            entries.insert(tool.local_name.clone(), Arc::new(tool));
        }
        Ok(Self {
            version,
            entries,
            bindings,
        })
    }

    pub fn get(&self, local: &str) -> Option<&Arc<Tool>> {
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
                    .filter(|t| t.remote_name() == Some(remote))
                    .map(|t| t.local_name.as_str());
                let first = hits.next()?;
                hits.next().is_none().then_some(first)
            }
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.entries.values()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl NameResolver for CatalogSnapshot {
    fn local_for(&self, server: Option<&str>, remote: &str) -> Option<String> {
        CatalogSnapshot::local_for(self, server, remote).map(str::to_string)
    }
}

/// Holds the current snapshot.
#[derive(Debug)]
pub struct Catalog {
    current: Arc<CatalogSnapshot>,
}

impl Catalog {
    pub fn new(initial: CatalogSnapshot) -> Self {
        Self {
            current: Arc::new(initial),
        }
    }

    /// The frozen snapshot for one round.
    pub fn snapshot(&self) -> Arc<CatalogSnapshot> {
        self.current.clone()
    }

    pub fn version(&self) -> u64 {
        self.current.version
    }

    /// At a safe point: rebuild from `tools` and swap atomically. On error the
    /// old snapshot stays.
    pub fn refresh(&mut self, tools: Vec<Tool>) -> Result<u64, NameCollision> {
        let next = CatalogSnapshot::build(self.current.version + 1, tools)?;
        self.current = Arc::new(next);
        Ok(self.current.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn tool(server: &str, name: &str) -> Tool {
        let schema = json!({"type": "object"});
        Tool {
            local_name: crate::tools::naming::local_name(server, name),
            binding: Some(Binding {
                server_id: server.into(),
                remote_name: name.into(),
            }),
            description: String::new(),
            input_validator: Some(Arc::new(
                wasm_mcp_protocol::CheckedSchema::compile(
                    &schema,
                    &Default::default(),
                    wasm_mcp_protocol::SchemaUse::Results,
                )
                .unwrap(),
            )),
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
        assert_eq!(
            cat.refresh(vec![tool("a", "x"), tool("a", "y")]).unwrap(),
            2
        );
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
        assert_eq!(s.get(ax).unwrap().server_id(), Some("a"));
    }
}
