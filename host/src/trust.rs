//! The trust policy a plugin passes before it is compiled: its pin in the
//! lock file (`--locked`), its signature (`--verify`), and the grant it
//! will run under (`--config`). Checked on the very bytes that are then
//! compiled, at start-up and on every hot reload.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::grants::{Grant, Grants};
use crate::pinning::{plugin_name, PluginLock};
use crate::signing::{read_signature, verify, TrustedKey};

#[derive(Debug, Clone)]
pub struct TrustPolicy {
    /// `--locked`: the lock every plugin must match.
    pub lock: Option<PluginLock>,
    /// `--verify` and the lock's `keys`: a plugin must be signed by one of
    /// these (when not empty).
    pub keys: Vec<TrustedKey>,
    pub grants: Grants,
}

/// What a plugin that passed the policy runs as.
#[derive(Debug, Clone)]
pub struct Admitted {
    pub name: String,
    pub grant: Arc<Grant>,
}

impl TrustPolicy {
    /// No pinning, no signatures, every plugin with the server's own
    /// rights (its limits and `--read-only`): the policy without trust flags.
    pub fn server_rights(sandbox: &crate::sandbox::Sandbox) -> TrustPolicy {
        TrustPolicy::open(Grants::server_only(
            sandbox.limits(),
            sandbox.max_filesystem(),
        ))
    }

    /// No pinning, no signatures, every plugin with `grants`' rights.
    pub fn open(grants: Grants) -> TrustPolicy {
        TrustPolicy {
            lock: None,
            keys: Vec::new(),
            grants,
        }
    }

    /// Admits the plugin at `path` whose bytes are `bytes` (sha256
    /// `digest`), or says why not, naming it.
    pub fn admit(&self, path: &Path, bytes: &[u8], digest: &str) -> Result<Admitted> {
        let name = plugin_name(path);
        if let Some(lock) = &self.lock {
            lock.check(&name, digest)?;
        }
        if !self.keys.is_empty() {
            let sig = read_signature(path).with_context(|| format!("plugin {name:?}"))?;
            verify(&name, bytes, sig.as_deref(), &self.keys)?;
        }
        let grant = Arc::new(self.grants.for_plugin(&name, digest).clone());
        Ok(Admitted { name, grant })
    }
}
