//! Pinning: the plugin lock file (`plugins.lock`, TOML) lists each plugin
//! by name (its file stem) with the sha256 of its bytes. Under `--locked`
//! a plugin that is missing from the lock, or whose digest differs, is
//! refused, at start-up and on every hot reload.
//!
//! ```toml
//! keys = ["RWQ…"]          # optional: minisign public keys (base64)
//!
//! [plugins.workspace]
//! sha256 = "3f1c…"
//! ```
//!
//! Keys in the lock are trusted keys under `--locked`, as if given with
//! `--verify`: every plugin must then also carry a signature by one of
//! them (or by a `--verify` key).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::cache::sha256_hex;
use crate::signing::TrustedKey;

/// File name of the lock when `--lock` is not given (in the plugin dir).
pub const DEFAULT_LOCK_FILE: &str = "plugins.lock";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    pub sha256: String,
}

/// The lock file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginLock {
    /// Trusted minisign public keys (base64 lines): under `--locked` every
    /// plugin must be signed by one of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    #[serde(default)]
    pub plugins: BTreeMap<String, Pin>,
}

/// The name a plugin file is known by: its file stem.
pub fn plugin_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The lock file to use: `--lock`, else `plugins.lock` in the plugin dir.
pub fn lock_path(lock: Option<&Path>, plugins: &Path) -> PathBuf {
    lock.map_or_else(|| plugins.join(DEFAULT_LOCK_FILE), Path::to_path_buf)
}

impl PluginLock {
    pub fn read(path: &Path) -> Result<PluginLock> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading lock file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("lock file {}", path.display()))
    }

    /// Writes atomically (temp file + rename).
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = format!(
            "# Written by `wasm-mcp lock`: the sha256 of each plugin that `wasm-mcp serve --locked` loads.\n{}",
            toml::to_string(self)?
        );
        let tmp = path.with_extension("lock.tmp");
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
    }

    /// Pins every `*.wasm` of `dir` as it is now (replacing the entries of
    /// the same names, keeping the others); returns the names pinned.
    pub fn pin_dir(&mut self, dir: &Path) -> Result<Vec<String>> {
        let mut pinned = Vec::new();
        let rd = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "wasm") && p.is_file())
            .collect();
        files.sort();
        for path in files {
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let name = plugin_name(&path);
            let sha256 = sha256_hex(&bytes);
            self.plugins.insert(name.clone(), Pin { sha256 });
            pinned.push(name);
        }
        Ok(pinned)
    }

    /// The lock's keys, checked (a key that does not parse refuses the lock).
    pub fn trusted_keys(&self, origin: &Path) -> Result<Vec<TrustedKey>> {
        let origin = format!("lock file {}", origin.display());
        self.keys
            .iter()
            .map(|k| TrustedKey::from_base64(k, &origin))
            .collect()
    }

    /// Adds `key` to the trusted keys (once).
    pub fn trust_key(&mut self, key: &TrustedKey) {
        let b64 = key.to_base64();
        if !self.keys.contains(&b64) {
            self.keys.push(b64);
        }
    }

    /// Refuses a plugin that is not pinned, or pinned to other bytes.
    pub fn check(&self, name: &str, digest: &str) -> Result<()> {
        match self.plugins.get(name) {
            None => bail!("plugin {name:?} is not in the lock file (run `wasm-mcp lock` to pin it)"),
            Some(pin) if !pin.sha256.eq_ignore_ascii_case(digest) => bail!(
                "plugin {name:?} does not match the lock file: its sha256 is {digest}, the lock pins {}",
                pin.sha256
            ),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpinned_and_changed_plugins_are_refused_by_name() {
        let mut lock = PluginLock::default();
        lock.plugins.insert(
            "w".into(),
            Pin {
                sha256: "ab".into(),
            },
        );
        assert!(lock.check("w", "ab").is_ok());
        let e = lock.check("w", "cd").unwrap_err().to_string();
        assert!(
            e.contains("\"w\" does not match") && e.contains("cd"),
            "{e}"
        );
        let e = lock.check("x", "ab").unwrap_err().to_string();
        assert!(e.contains("\"x\" is not in the lock file"), "{e}");
    }

    #[test]
    fn the_lock_round_trips_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.wasm"), b"one").unwrap();
        let mut lock = PluginLock::default();
        assert_eq!(lock.pin_dir(dir.path()).unwrap(), vec!["a".to_string()]);
        let path = dir.path().join(DEFAULT_LOCK_FILE);
        lock.write(&path).unwrap();
        assert_eq!(PluginLock::read(&path).unwrap(), lock);
        assert_eq!(lock.plugins["a"].sha256, sha256_hex(b"one"));
        // With a trusted key, added once.
        crate::signing::keygen(&dir.path().join("k"), &dir.path().join("k.pub")).unwrap();
        let key = TrustedKey::load(dir.path().join("k.pub").to_str().unwrap()).unwrap();
        lock.trust_key(&key);
        lock.trust_key(&key);
        lock.write(&path).unwrap();
        let read = PluginLock::read(&path).unwrap();
        assert_eq!((read.keys.len(), &read), (1, &lock));
        assert_eq!(
            read.trusted_keys(&path).unwrap()[0].to_base64(),
            key.to_base64()
        );
        lock.keys.push("garbage".into());
        assert!(lock.trusted_keys(&path).is_err());
    }
}
