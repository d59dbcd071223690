//! Local tool names: `mcp_<server>_<tool>_<sha256-8>`.
//!
//! The hash is over `server_id || 0x00 || remote_name`, so two different remote
//! tools never share a local name even when sanitizing or truncation makes the
//! readable parts equal. Names are `[A-Za-z0-9_]`, at most [`MAX_LOCAL_NAME`] chars.

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use wasm_mcp_protocol::text::head_bytes;

pub const MAX_LOCAL_NAME: usize = 60;
const HASH_LEN: usize = 8;
/// `mcp_` + `_` + `_` + hash.
const FIXED: usize = 4 + 1 + 1 + HASH_LEN;

/// Every character outside `[A-Za-z0-9_]` becomes `_` (one byte per char).
pub(crate) fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub fn name_hash(server_id: &str, remote: &str) -> String {
    let mut h = Sha256::new();
    h.update(server_id.as_bytes());
    h.update([0u8]);
    h.update(remote.as_bytes());
    hex::encode(h.finalize())[..HASH_LEN].to_string()
}

/// The local (model-facing) name of `remote` on `server_id`.
pub fn local_name(server_id: &str, remote: &str) -> String {
    let mut s = sanitize(server_id);
    let mut t = sanitize(remote);
    let budget = MAX_LOCAL_NAME - FIXED;
    if s.len() + t.len() > budget {
        // Truncate the middle parts, keep the hash. Each part keeps at least half
        // the budget unless the other needs less.
        let half = budget / 2;
        let s_keep = s
            .len()
            .min(budget.saturating_sub(t.len().min(half)).max(half));
        let t_keep = budget - s_keep.min(s.len());
        s = head_bytes(&s, s_keep).to_string();
        t = head_bytes(&t, t_keep).to_string();
    }
    format!("mcp_{s}_{t}_{}", name_hash(server_id, remote))
}

/// Where a local name points.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Binding {
    pub server_id: String,
    pub remote_name: String,
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("local name `{local}` collides: {first:?} vs {second:?}")]
pub struct NameCollision {
    pub local: String,
    pub first: Binding,
    pub second: Binding,
}

/// local name → (server, remote name), with reverse lookup.
#[derive(Debug, Clone, Default)]
pub struct BindingTable {
    by_local: HashMap<String, Binding>,
    by_remote: HashMap<Binding, String>,
}

impl BindingTable {
    /// Bind `remote` on `server_id`, returning its local name. Fails if the local
    /// name is already bound to a different (server, tool), across all servers.
    pub fn bind(&mut self, server_id: &str, remote: &str) -> Result<String, NameCollision> {
        let local = local_name(server_id, remote);
        self.bind_as(local, server_id, remote)
    }

    /// Bind under an explicit local name (used by tests to force collisions).
    pub fn bind_as(
        &mut self,
        local: String,
        server_id: &str,
        remote: &str,
    ) -> Result<String, NameCollision> {
        let b = Binding {
            server_id: server_id.to_string(),
            remote_name: remote.to_string(),
        };
        if let Some(existing) = self.by_local.get(&local) {
            if *existing == b {
                return Ok(local);
            }
            return Err(NameCollision {
                local,
                first: existing.clone(),
                second: b,
            });
        }
        self.by_local.insert(local.clone(), b.clone());
        self.by_remote.insert(b, local.clone());
        Ok(local)
    }

    pub fn resolve(&self, local: &str) -> Option<&Binding> {
        self.by_local.get(local)
    }

    pub fn local_for(&self, server_id: &str, remote: &str) -> Option<&str> {
        self.by_remote
            .get(&Binding {
                server_id: server_id.to_string(),
                remote_name: remote.to_string(),
            })
            .map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.by_local.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_local.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(n: &str) -> bool {
        n.len() <= MAX_LOCAL_NAME && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    }

    #[test]
    fn shape_and_hash() {
        let n = local_name("ws", "read_file");
        assert_eq!(
            n,
            format!("mcp_ws_read_file_{}", name_hash("ws", "read_file"))
        );
        assert_eq!(name_hash("ws", "read_file").len(), 8);
        assert_ne!(name_hash("ws", "read_file"), name_hash("ws2", "read_file"));
        // Separator prevents ("a","bc") == ("ab","c").
        assert_ne!(name_hash("a", "bc"), name_hash("ab", "c"));
    }

    #[test]
    fn sanitizes_and_distinguishes() {
        let a = local_name("my-server", "fs.read");
        let b = local_name("my_server", "fs_read");
        assert!(valid(&a) && valid(&b));
        assert!(a.starts_with("mcp_my_server_fs_read_"));
        assert_ne!(a, b, "same readable part, different hash");
    }

    #[test]
    fn long_names_truncate_middle_keep_hash() {
        let server = "s".repeat(50);
        let tool = "t".repeat(80);
        let n = local_name(&server, &tool);
        assert!(valid(&n), "{n} ({})", n.len());
        assert_eq!(n.len(), MAX_LOCAL_NAME);
        assert!(n.ends_with(&format!("_{}", name_hash(&server, &tool))));
        assert!(
            n.contains("sss") && n.contains("ttt"),
            "both parts survive: {n}"
        );
        // Short server keeps its whole id.
        let n2 = local_name("ws", &"x".repeat(100));
        assert!(n2.starts_with("mcp_ws_xxx") && valid(&n2));
        // Differ only past the truncation point → still distinct.
        let p = "p".repeat(70);
        assert_ne!(
            local_name("ws", &format!("{p}1")),
            local_name("ws", &format!("{p}2"))
        );
    }

    #[test]
    fn binding_table_reverse_lookup_and_collision() {
        let mut t = BindingTable::default();
        let l1 = t.bind("a", "read").unwrap();
        let l2 = t.bind("b", "read").unwrap();
        assert_ne!(l1, l2);
        assert_eq!(t.resolve(&l1).unwrap().server_id, "a");
        assert_eq!(t.local_for("b", "read"), Some(l2.as_str()));
        assert_eq!(t.bind("a", "read").unwrap(), l1, "rebinding is idempotent");
        let err = t.bind_as(l1.clone(), "c", "other").unwrap_err();
        assert_eq!(err.first.server_id, "a");
        assert_eq!(err.second.server_id, "c");
        assert_eq!(t.len(), 2);
    }
}
