//! Per-plugin grants: what each plugin may touch and spend, from the
//! server config file (`--config`, TOML), always within the server's own
//! maxima (the command-line limits and `--read-only`).
//!
//! ```toml
//! [default]                    # every plugin not listed below
//! filesystem = "read-only"     # none | read-only | read-write
//!
//! [plugins.workspace]          # by name (the file stem) ...
//! filesystem = "read-write"
//! paths = ["src", "docs"]      # only these subdirectories of the worktree
//! timeout_ms = 2000
//! memory_mb = 64
//! max_output_bytes = 100000
//! max_write_bytes = 1048576
//! max_files_created = 100
//! plugin_write_bytes = 10485760   # all its calls together (its share of
//! plugin_files_created = 1000     # --worktree-write-bytes / -files-created)
//! max_concurrency = 2
//! tools = ["read_file", "write_file"]
//!
//! [plugins."sha256:…"]         # ... or by digest (wins over the name)
//! ```
//!
//! A listed plugin's missing fields come from `[default]`, whose missing
//! fields are `filesystem = "read-only"` and the server's maxima. Without a
//! config file every plugin gets the server's own rights (the worktree
//! read-write unless `--read-only`): the behaviour before grants existed.

use std::collections::BTreeMap;
use std::path::{Component, Path};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::disk_budget::{DiskLimits, Share};
use crate::limits::Limits;

/// How a grant section names a plugin by its digest.
const DIGEST_PREFIX: &str = "sha256:";

/// How much of the worktree a plugin sees. Ordered: a lower access is a
/// subset of a higher one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Filesystem {
    /// No preopened directory at all.
    None,
    ReadOnly,
    ReadWrite,
}

impl Filesystem {
    pub fn can_write(self) -> bool {
        self == Filesystem::ReadWrite
    }
}

/// One grant section of the config file, as written (every field optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantSpec {
    filesystem: Option<Filesystem>,
    paths: Option<Vec<String>>,
    timeout_ms: Option<u64>,
    memory_mb: Option<usize>,
    max_output_bytes: Option<usize>,
    max_write_bytes: Option<u64>,
    max_files_created: Option<u64>,
    plugin_write_bytes: Option<u64>,
    plugin_files_created: Option<u64>,
    max_concurrency: Option<usize>,
    tools: Option<Vec<String>>,
}

impl GrantSpec {
    /// Refuses a budget of 0 where it would make every call fail (a zero
    /// concurrency share was silently 1 before; a zero timeout or memory
    /// limit is a typo, not a grant). Write budgets may be 0: the plugin adds
    /// nothing (deleting and renaming still work; `read-only` forbids
    /// changes).
    fn refuse_zeros(&self, what: &str) -> Result<()> {
        let zero = [
            ("timeout_ms", self.timeout_ms == Some(0)),
            ("memory_mb", self.memory_mb == Some(0)),
            ("max_output_bytes", self.max_output_bytes == Some(0)),
            ("max_concurrency", self.max_concurrency == Some(0)),
        ];
        match zero.iter().find(|(_, z)| *z) {
            Some((field, _)) => bail!("grant {what}: {field} must be at least 1"),
            None => Ok(()),
        }
    }

    /// `self`, with its missing fields taken from `base`.
    fn over(&self, base: &GrantSpec) -> GrantSpec {
        GrantSpec {
            filesystem: self.filesystem.or(base.filesystem),
            paths: self.paths.clone().or_else(|| base.paths.clone()),
            timeout_ms: self.timeout_ms.or(base.timeout_ms),
            memory_mb: self.memory_mb.or(base.memory_mb),
            max_output_bytes: self.max_output_bytes.or(base.max_output_bytes),
            max_write_bytes: self.max_write_bytes.or(base.max_write_bytes),
            max_files_created: self.max_files_created.or(base.max_files_created),
            plugin_write_bytes: self.plugin_write_bytes.or(base.plugin_write_bytes),
            plugin_files_created: self.plugin_files_created.or(base.plugin_files_created),
            max_concurrency: self.max_concurrency.or(base.max_concurrency),
            tools: self.tools.clone().or_else(|| base.tools.clone()),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    default: GrantSpec,
    #[serde(default)]
    plugins: BTreeMap<String, GrantSpec>,
}

/// What one plugin may touch and spend, resolved and checked against the
/// server's maxima.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Grant {
    /// Which config section granted it (`plugins.NAME`, `plugins."sha256:…"`,
    /// `default`, or `server` without a config file).
    pub source: String,
    pub filesystem: Filesystem,
    /// Subdirectories of the worktree the filesystem access is narrowed to
    /// (relative, normal components only); `None`: the whole worktree.
    pub paths: Option<Vec<String>>,
    #[serde(rename = "timeout_ms", serialize_with = "as_millis")]
    pub timeout: Duration,
    pub memory_bytes: usize,
    pub max_output_bytes: usize,
    /// Disk bounds: per call, and this plugin's share of the worktree
    /// totals (the totals stay the server's). Shown as its shares,
    /// `plugin_write_bytes` and `plugin_files_created` (the per-call bounds
    /// are the two fields below).
    #[serde(flatten, serialize_with = "shares")]
    pub disk: DiskLimits,
    pub max_write_bytes: u64,
    pub max_files_created: u64,
    /// Calls of this plugin running at once.
    pub max_concurrency: usize,
    /// Only these of the plugin's tools are published (`None`: all).
    pub tools: Option<Vec<String>>,
}

fn shares<S: serde::Serializer>(d: &DiskLimits, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("plugin_write_bytes", &d.plugin_bytes)?;
    m.serialize_entry("plugin_files_created", &d.plugin_entries)?;
    m.end()
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

impl Grant {
    /// The server's own rights: what every plugin gets without a config.
    pub fn server(limits: &Limits, max_fs: Filesystem) -> Grant {
        Grant {
            source: "server".into(),
            filesystem: max_fs,
            paths: None,
            timeout: limits.timeout,
            memory_bytes: limits.memory_bytes,
            max_output_bytes: limits.max_output_bytes,
            disk: limits.disk,
            max_write_bytes: limits.disk.call_bytes,
            max_files_created: limits.disk.call_entries,
            max_concurrency: limits.plugin_share(),
            tools: None,
        }
    }

    /// Whether this grant publishes `tool`.
    pub fn allows_tool(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|t| t.iter().any(|n| n == tool))
    }

    /// The filesystem a call of a tool gets: the grant, lowered to
    /// read-only when the tool itself claims to be read-only (a claim can
    /// only take rights away, never add any).
    pub fn filesystem_for(&self, claims_read_only: bool) -> Filesystem {
        if claims_read_only {
            self.filesystem.min(Filesystem::ReadOnly)
        } else {
            self.filesystem
        }
    }

    /// Applies one section over the server's rights, refusing anything
    /// beyond the server's maxima (`what` names the section in errors).
    fn resolve(spec: &GrantSpec, max: &Maxima, what: &str) -> Result<Grant> {
        let over = |field: &str, flag: &str, cap: String| {
            anyhow::anyhow!("grant {what}: {field} exceeds the server's maximum of {cap} ({flag})")
        };
        spec.refuse_zeros(what)?;
        let server = &max.grant;
        let mut g = server.clone();
        g.source = what.to_string();
        g.filesystem = spec.filesystem.unwrap_or(Filesystem::ReadOnly);
        if g.filesystem > server.filesystem {
            return Err(over("filesystem", "--read-only", "read-only".into()));
        }
        if let Some(paths) = &spec.paths {
            let checked = paths.iter().map(|p| check_rel_dir(p, what));
            g.paths = Some(checked.collect::<Result<_>>()?);
        }
        if let Some(ms) = spec.timeout_ms {
            g.timeout = Duration::from_millis(ms);
            if g.timeout > server.timeout {
                let cap = server.timeout.as_millis().to_string();
                return Err(over("timeout_ms", "--timeout-ms", cap));
            }
        }
        if let Some(mb) = spec.memory_mb {
            g.memory_bytes = mb.saturating_mul(1 << 20);
            if g.memory_bytes > server.memory_bytes {
                let cap = format!("{} MiB", server.memory_bytes >> 20);
                return Err(over("memory_mb", "--memory-mb", cap));
            }
        }
        if let Some(n) = spec.max_output_bytes {
            if n > server.max_output_bytes {
                let cap = server.max_output_bytes.to_string();
                return Err(over("max_output_bytes", "--max-output-bytes", cap));
            }
            g.max_output_bytes = n;
        }
        let disk = &server.disk;
        let within = |n: Option<u64>, cap: u64, field: &str, flag: &str| match n {
            Some(n) if n > cap => Err(over(field, flag, cap.to_string())),
            n => Ok(n),
        };
        let call_bytes = within(
            spec.max_write_bytes,
            disk.call_bytes,
            "max_write_bytes",
            "--max-write-bytes",
        )?;
        if let Some(n) = call_bytes {
            (g.disk.call_bytes, g.max_write_bytes) = (n, n);
        }
        let call_entries = within(
            spec.max_files_created,
            disk.call_entries,
            "max_files_created",
            "--max-files-created",
        )?;
        if let Some(n) = call_entries {
            (g.disk.call_entries, g.max_files_created) = (n, n);
        }
        let bytes = within(
            spec.plugin_write_bytes,
            disk.worktree_bytes,
            "plugin_write_bytes",
            "--worktree-write-bytes",
        )?;
        let entries = within(
            spec.plugin_files_created,
            disk.worktree_entries,
            "plugin_files_created",
            "--worktree-files-created",
        )?;
        g.disk.plugin_bytes = bytes.map_or(disk.plugin_bytes, Share::Set);
        g.disk.plugin_entries = entries.map_or(disk.plugin_entries, Share::Set);
        if let Some(n) = spec.max_concurrency {
            if n > max.slots {
                return Err(over(
                    "max_concurrency",
                    "--max-concurrency",
                    max.slots.to_string(),
                ));
            }
            g.max_concurrency = n;
        }
        g.tools = spec.tools.clone();
        Ok(g)
    }
}

/// The server's maxima every grant is checked against.
#[derive(Debug, Clone)]
struct Maxima {
    grant: Grant,
    /// The server's call slots (`--max-concurrency`).
    slots: usize,
}

/// The key a config section is looked up by: a plugin name as written, or
/// `sha256:` and 64 hex digits, lowercased (a digest key that is not one
/// would never match, silently leaving the plugin to `[default]`).
fn section_key(key: &str) -> Result<String> {
    let Some(hex) = key.strip_prefix(DIGEST_PREFIX) else {
        return Ok(key.to_string());
    };
    let ok = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    anyhow::ensure!(ok, "{key:?} is not `sha256:` and 64 hex digits");
    Ok(format!("sha256:{}", hex.to_ascii_lowercase()))
}

/// A subdirectory of the worktree as a grant may name it: relative, only
/// normal components (no `..`, `.`, root or prefix), not empty; returned
/// with its components joined by one `/` (as it is preopened).
fn check_rel_dir(p: &str, what: &str) -> Result<String> {
    let path = Path::new(p);
    let normal = path.components().all(|c| matches!(c, Component::Normal(_)));
    if p.is_empty() || !normal || p.contains('\\') || p.contains('\0') {
        bail!("grant {what}: path {p:?} must be a relative subdirectory of the worktree without `..` or `.`");
    }
    let parts: Vec<_> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    Ok(parts.join("/"))
}

/// Every plugin's grant: the config file's sections, resolved and checked
/// once at start-up.
#[derive(Debug, Clone)]
pub struct Grants {
    default: Grant,
    by_key: BTreeMap<String, Grant>,
}

impl Grants {
    /// No config file: every plugin gets the server's rights.
    pub fn server_only(limits: &Limits, max_fs: Filesystem) -> Grants {
        Grants {
            default: Grant::server(limits, max_fs),
            by_key: BTreeMap::new(),
        }
    }

    /// Reads and checks the config file `path`.
    pub fn from_file(path: &Path, limits: &Limits, max_fs: Filesystem) -> Result<Grants> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config {}", path.display()))?;
        Self::parse(&text, limits, max_fs).with_context(|| format!("config {}", path.display()))
    }

    pub fn parse(text: &str, limits: &Limits, max_fs: Filesystem) -> Result<Grants> {
        let file: ConfigFile = toml::from_str(text)?;
        let max = Maxima {
            grant: Grant::server(limits, max_fs),
            slots: limits.max_concurrency.max(1),
        };
        let default = Grant::resolve(&file.default, &max, "default")?;
        let mut by_key = BTreeMap::new();
        for (key, spec) in &file.plugins {
            let what = format!("plugins.{key:?}");
            let grant = Grant::resolve(&spec.over(&file.default), &max, &what)?;
            let key = section_key(key).with_context(|| format!("grant {what}"))?;
            anyhow::ensure!(
                by_key.insert(key.clone(), grant).is_none(),
                "grant {what}: {key} has two sections"
            );
        }
        Ok(Grants { default, by_key })
    }

    /// The config sections (`NAME` or `sha256:HEX`) that none of
    /// `plugins` (name, digest) would get: a typo or a case slip there
    /// silently leaves a plugin to `[default]`, so it is reported.
    pub fn unmatched<'a>(&'a self, plugins: &[(&str, &str)]) -> Vec<&'a str> {
        let matches = |key: &str| {
            plugins
                .iter()
                .any(|(name, digest)| match key.strip_prefix(DIGEST_PREFIX) {
                    Some(hex) => hex == *digest,
                    None => key == *name,
                })
        };
        self.by_key
            .keys()
            .map(String::as_str)
            .filter(|k| !matches(k))
            .collect()
    }

    /// The grant of the plugin `name` with `digest` (hex sha256): its
    /// digest's section, else its name's, else `[default]`. A name is never
    /// looked up as a digest: a file named `sha256:<digest>.wasm` got the
    /// grant given to that digest whatever its bytes (a helper's find).
    pub fn for_plugin(&self, name: &str, digest: &str) -> &Grant {
        let by_name = || match name.starts_with(DIGEST_PREFIX) {
            true => None,
            false => self.by_key.get(name),
        };
        self.by_key
            .get(&format!("{DIGEST_PREFIX}{digest}"))
            .or_else(by_name)
            .unwrap_or(&self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Grants> {
        Grants::parse(text, &Limits::default(), Filesystem::ReadWrite)
    }

    #[test]
    fn unlisted_plugins_get_the_default_section_read_only_out_of_the_box() {
        let g = parse("[plugins.w]\nfilesystem = \"read-write\"\n").unwrap();
        assert_eq!(g.for_plugin("other", "ab").filesystem, Filesystem::ReadOnly);
        assert_eq!(g.for_plugin("w", "ab").filesystem, Filesystem::ReadWrite);
        let g = parse("[default]\nfilesystem = \"none\"\n").unwrap();
        assert_eq!(g.for_plugin("other", "ab").filesystem, Filesystem::None);
    }

    /// A plugin named like a digest does not get that digest's grant (its
    /// bytes are another's).
    #[test]
    fn a_name_is_never_taken_for_a_digest() {
        let ab = "ab".repeat(32);
        let g = parse(&format!(
            "[default]\nfilesystem = \"read-only\"\n[plugins.\"sha256:{ab}\"]\nfilesystem = \"read-write\"\n"
        ))
        .unwrap();
        let impostor = g.for_plugin(&format!("sha256:{ab}"), &"cd".repeat(32));
        assert_eq!(impostor.filesystem, Filesystem::ReadOnly);
        assert_eq!(g.for_plugin("any", &ab).filesystem, Filesystem::ReadWrite);
    }

    #[test]
    fn a_digest_section_wins_over_the_name_and_fields_fall_back_to_default() {
        let ab = "ab".repeat(32);
        let g = parse(&format!(
            "[default]\ntimeout_ms = 500\n[plugins.w]\nfilesystem = \"read-write\"\n\
             [plugins.\"sha256:{ab}\"]\nfilesystem = \"none\"\n",
        ))
        .unwrap();
        assert_eq!(g.for_plugin("w", &ab).filesystem, Filesystem::None);
        assert_eq!(g.for_plugin("w", "cd").timeout, Duration::from_millis(500));
    }

    #[test]
    fn grants_beyond_the_server_maxima_or_with_typos_are_refused() {
        for (text, want) in [
            ("[plugins.w]\ntimeout_ms = 999999\n", "--timeout-ms"),
            ("[plugins.w]\nmemory_mb = 100000\n", "--memory-mb"),
            ("[default]\nmax_concurrency = 17\n", "--max-concurrency"),
            (
                "[plugins.w]\nplugin_write_bytes = 1073741825\n",
                "--worktree-write-bytes",
            ),
            (
                "[plugins.w]\nplugin_files_created = 100001\n",
                "--worktree-files-created",
            ),
            ("[plugins.w]\nfilesytem = \"none\"\n", "unknown field"),
            ("[plugins.w]\npaths = [\"../x\"]\n", "without `..`"),
            ("[plugins.w]\npaths = [\"/etc\"]\n", "without `..`"),
            (
                "[plugins.w]\nmax_concurrency = 0\n",
                "max_concurrency must be at least 1",
            ),
            (
                "[default]\ntimeout_ms = 0\n",
                "timeout_ms must be at least 1",
            ),
        ] {
            let e = format!("{:#}", parse(text).unwrap_err());
            assert!(e.contains(want), "{text}: {e}");
        }
        let ro = Grants::parse(
            "[plugins.w]\nfilesystem = \"read-write\"\n",
            &Limits::default(),
            Filesystem::ReadOnly,
        );
        assert!(format!("{:#}", ro.unwrap_err()).contains("--read-only"));
    }

    #[test]
    fn a_grant_sets_its_plugins_share_of_the_worktree() {
        let g = parse("[default]\nplugin_write_bytes = 5\n[plugins.w]\nplugin_files_created = 0\n");
        let g = g.unwrap();
        let w = g.for_plugin("w", "ab");
        assert_eq!(w.disk.plugin_bytes, Share::Set(5), "from [default]");
        assert_eq!(w.disk.plugin_entries, Share::Set(0));
        let other = g.for_plugin("other", "ab");
        assert_eq!(
            other.disk.plugin_bytes,
            Share::Set(5),
            "unlisted: [default]"
        );
        assert_eq!(other.disk.plugin_entries, Share::Even, "the server's");
    }

    #[test]
    fn digest_sections_are_checked_and_matched_whatever_their_case() {
        let upper = "AB".repeat(32);
        let g = parse(&format!(
            "[plugins.\"sha256:{upper}\"]\nfilesystem = \"none\"\n"
        ))
        .unwrap();
        let digest = upper.to_ascii_lowercase();
        assert_eq!(g.for_plugin("w", &digest).filesystem, Filesystem::None);
        for bad in [
            "sha256:abc",
            "sha256:",
            &format!("sha256:{}", "zz".repeat(32)),
        ] {
            let e = format!(
                "{:#}",
                parse(&format!("[plugins.\"{bad}\"]\n")).unwrap_err()
            );
            assert!(e.contains("64 hex digits"), "{bad}: {e}");
        }
        let twice = format!("[plugins.\"sha256:{upper}\"]\n[plugins.\"sha256:{digest}\"]\n");
        assert!(format!("{:#}", parse(&twice).unwrap_err()).contains("two sections"));
        let g = parse("[plugins.w]\npaths = [\"src//x/\", \"a/./b\"]\n").unwrap();
        let paths = g.for_plugin("w", "00").paths.clone().unwrap();
        assert_eq!(paths, ["src/x", "a/b"]);
    }

    #[test]
    fn a_read_only_claim_lowers_the_grant_and_never_raises_it() {
        let g = parse("[default]\nfilesystem = \"read-write\"\n").unwrap();
        let rw = g.for_plugin("x", "y");
        assert_eq!(rw.filesystem_for(true), Filesystem::ReadOnly);
        assert_eq!(rw.filesystem_for(false), Filesystem::ReadWrite);
        let g = parse("[default]\nfilesystem = \"none\"\n").unwrap();
        assert_eq!(
            g.for_plugin("x", "y").filesystem_for(true),
            Filesystem::None
        );
    }
}
