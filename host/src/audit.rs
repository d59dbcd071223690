//! The audit log: one JSON line per tool call (`--audit-log FILE`,
//! appended), and the same summarized at debug level on stderr.
//!
//! A line is written however the call ends: a result, an error of any
//! kind, a timeout, the request being dropped (`outcome` `cancelled`), a
//! result too large for the wire, or a call of a tool that is not
//! published (`not_allowed` when a loaded plugin's tool is hidden by an
//! allowlist, `unknown_tool` otherwise).
//!
//! The file is the operator's, never a plugin's: it must lie outside the
//! worktree (a plugin with write access could rewrite it), be a regular
//! file (or a character device) with no other hard link. Writing it never
//! holds a call up: a line that cannot be written is counted and logged
//! at error level (the first failure, then at each power of two), and the call
//! goes on.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::Serialize;

use wasm_mcp_protocol::text::head_chars;
use wasm_mcp_protocol::{ErrorKind, CALL_ID_META};

use crate::grants::{Filesystem, Grant};
use crate::plugin::{CallStats, Plugin};
use crate::repeats::Repeats;

/// Longest call id recorded (chars; the client's `_meta[CALL_ID_META]`).
const MAX_CALL_ID_CHARS: usize = 200;
/// Longest error message recorded (chars).
const MAX_ERROR_CHARS: usize = 300;

/// The client's call id, from the request's `_meta` (as parsed into the
/// params or into the request context), as a string of at most
/// [`MAX_CALL_ID_CHARS`] chars.
pub fn call_id(
    params: Option<&rmcp::model::RequestMetaObject>,
    context: &rmcp::model::RequestMetaObject,
) -> Option<String> {
    let v = params
        .and_then(|m| m.0 .0.get(CALL_ID_META))
        .or_else(|| context.0 .0.get(CALL_ID_META))?;
    let id = match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(head_chars(&id, MAX_CALL_ID_CHARS).to_string())
}

/// How a call ended, as its audit line says: `ok`, the error kind, or
/// `cancelled` (the request was dropped before the call ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOutcome {
    Ok,
    Failed(ErrorKind),
    Cancelled,
    /// A tool an allowlist hides: it did not run.
    NotAllowed,
    /// A tool no loaded plugin declares.
    UnknownTool,
}

impl AuditOutcome {
    /// `Ok` for `None`, else the failure of that kind.
    pub fn of(kind: Option<ErrorKind>) -> Self {
        kind.map_or(AuditOutcome::Ok, AuditOutcome::Failed)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Ok => "ok",
            AuditOutcome::Failed(kind) => kind.as_str(),
            AuditOutcome::Cancelled => "cancelled",
            AuditOutcome::NotAllowed => "not_allowed",
            AuditOutcome::UnknownTool => "unknown_tool",
        }
    }
}

impl std::fmt::Display for AuditOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for AuditOutcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Where audit lines go.
#[derive(Default)]
pub struct AuditLog {
    file: Option<Mutex<std::fs::File>>,
    /// Lines that could not be written.
    lost: Repeats,
}

/// One line of the audit log.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord {
    /// When the call arrived (RFC 3339, UTC).
    pub time: String,
    /// The client's id for the call (`_meta["wasm-mcp/callId"]`), if given.
    pub call_id: Option<String>,
    /// The plugin (null for a tool no loaded plugin declares).
    pub plugin: Option<String>,
    /// sha256 of the plugin's bytes.
    pub digest: Option<String>,
    pub tool: String,
    pub grant: Option<Arc<Grant>>,
    /// The filesystem this tool's calls get (the grant, or read-only when
    /// the tool claims to be read-only); null when it did not run.
    pub filesystem: Option<Filesystem>,
    /// Bytes of the JSON arguments.
    pub argument_bytes: usize,
    pub duration_ms: f64,
    /// `ok`, the error kind (`timeout`, `permission_denied`, ...) or `cancelled`.
    pub outcome: AuditOutcome,
    /// The start of the error message, for failed calls.
    pub error: Option<String>,
    pub bytes_written: u64,
    pub files_created: u64,
    pub peak_memory_bytes: usize,
}

impl AuditLog {
    /// Appends to `path` (created if missing), which must lie outside
    /// `worktree` (see the module doc); `None` logs to stderr only.
    pub fn open(path: Option<&Path>, worktree: &Path) -> Result<AuditLog> {
        let file = match path {
            None => None,
            Some(p) => Some(Mutex::new(
                open_outside(p, worktree).with_context(|| format!("audit log {}", p.display()))?,
            )),
        };
        Ok(AuditLog {
            file,
            lost: Repeats::new(),
        })
    }

    /// Whether records are wanted at all (a file, or debug logging).
    fn wanted(&self) -> bool {
        self.file.is_some() || tracing::enabled!(target: "audit", tracing::Level::DEBUG)
    }

    /// Starts the record of a call of `tool` (of `plugin`, whose calls get
    /// `filesystem`, if it is published); it is written when the returned
    /// guard is dropped, as `cancelled` unless its outcome was recorded.
    pub fn start<'a>(
        &'a self,
        plugin: Option<&Plugin>,
        tool: &str,
        filesystem: Option<Filesystem>,
        argument_bytes: usize,
        call_id: Option<String>,
    ) -> PendingAudit<'a> {
        let record = self.wanted().then(|| AuditRecord {
            time: rfc3339(SystemTime::now()),
            call_id,
            plugin: plugin.map(|p| p.name.clone()),
            digest: plugin.map(|p| p.digest.clone()),
            // A client may name any tool: an unknown name is cut.
            tool: tool.chars().take(200).collect(),
            grant: plugin.map(|p| p.grant.clone()),
            filesystem,
            argument_bytes,
            duration_ms: 0.0,
            outcome: AuditOutcome::Cancelled,
            error: None,
            bytes_written: 0,
            files_created: 0,
            peak_memory_bytes: 0,
        });
        PendingAudit {
            log: self,
            record,
            started: Instant::now(),
        }
    }

    fn write(&self, r: &AuditRecord) {
        tracing::debug!(target: "audit", call_id = ?r.call_id, plugin = ?r.plugin, tool = %r.tool,
            outcome = %r.outcome, ms = r.duration_ms, written = r.bytes_written,
            files = r.files_created, peak_memory = r.peak_memory_bytes, "call audited");
        let Some(file) = &self.file else { return };
        let Ok(mut line) = serde_json::to_vec(r) else {
            return;
        };
        line.push(b'\n');
        let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = f.write_all(&line) {
            if let Some(lost) = self.lost.note() {
                tracing::error!(
                    lost,
                    "could not write the audit log: {e}; calls go on, their audit lines are lost"
                );
            }
        }
    }
}

/// Opens `path` for appending after checking it is the operator's: outside
/// `worktree` (also through symlinks), a regular file with no other hard
/// link or a character device; never blocks opening (a FIFO is refused).
fn open_outside(path: &Path, worktree: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    let resolved = crate::operator_paths::outside_worktree(
        path,
        worktree,
        "a plugin with write access could change it",
    )?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW).bits() as i32)
        .open(&resolved)
        .context("opening it")?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    anyhow::ensure!(
        kind.is_file() || kind.is_char_device(),
        "it is not a regular file"
    );
    anyhow::ensure!(
        !kind.is_file() || meta.nlink() <= 1,
        "it has {} hard links: one of them could be where a plugin writes",
        meta.nlink()
    );
    Ok(file)
}

/// The record of a call in flight; written on [`PendingAudit::finish`],
/// or as `cancelled` if dropped before.
pub struct PendingAudit<'a> {
    log: &'a AuditLog,
    record: Option<AuditRecord>,
    started: Instant,
}

impl PendingAudit<'_> {
    /// Records the outcome (`ok` or an error kind with its message) and
    /// what the call's store used; the line is written when `self` drops.
    pub fn finish(&mut self, outcome: AuditOutcome, error: Option<String>, stats: CallStats) {
        self.overrule(outcome, error);
        if let Some(r) = &mut self.record {
            r.bytes_written = stats.bytes_written;
            r.files_created = stats.files_created;
            r.peak_memory_bytes = stats.peak_memory_bytes;
        }
    }

    /// Replaces the recorded outcome: what the client was sent instead
    /// (a result too large for the wire).
    pub fn overrule(&mut self, outcome: AuditOutcome, error: Option<String>) {
        if let Some(r) = &mut self.record {
            r.outcome = outcome;
            r.error = error.map(|m| head_chars(&m, MAX_ERROR_CHARS).to_string());
        }
    }
}

impl Drop for PendingAudit<'_> {
    fn drop(&mut self) {
        if let Some(mut r) = self.record.take() {
            r.duration_ms = self.started.elapsed().as_secs_f64() * 1000.0;
            self.log.write(&r);
        }
    }
}

/// `t` as RFC 3339 in UTC with milliseconds (`2026-12-03T12:00:00.123Z`).
fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian
/// calendar (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn outcomes_are_written_as_their_wire_names() {
        let json = |o: AuditOutcome| serde_json::to_value(o).unwrap();
        assert_eq!(json(AuditOutcome::of(None)), "ok");
        assert_eq!(json(AuditOutcome::of(Some(ErrorKind::Timeout))), "timeout");
        assert_eq!(json(AuditOutcome::Cancelled), "cancelled");
        assert_eq!(json(AuditOutcome::NotAllowed), "not_allowed");
        assert_eq!(json(AuditOutcome::UnknownTool), "unknown_tool");
    }

    #[test]
    fn times_are_rfc3339_utc() {
        let at = |s: u64, ms: u64| rfc3339(UNIX_EPOCH + Duration::from_millis(s * 1000 + ms));
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_796_299_199, 999), "2026-12-03T11:59:59.999Z");
    }
}
