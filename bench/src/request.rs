//! What a timed `tools/call` sends and how its answer is checked: every
//! answer is verified, so a broken server cannot post a fast number.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{json, Map, Value};

use crate::fixture::FileCase;

/// One kind of `tools/call` the bench times.
pub trait Request: Send + Sync {
    fn params(&self) -> CallToolRequestParams;
    /// `Ok` only for the answer this request must get.
    fn check(&self, r: &CallToolResult) -> Result<()>;
    /// For error messages: `read_file small.txt`.
    fn what(&self) -> String;
}

/// How much of a read-a-file answer is checked.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The exact `read_file` preview of the whole file (ours and the baseline).
    Preview,
    /// Any successful result whose text or structured content holds the whole file (a peer).
    Holds,
}

/// Which tool a server reads files with, and how its answers are checked.
#[derive(Clone)]
pub struct Probe {
    pub tool: String,
    /// `Some(worktree)`: pass absolute paths under it.
    pub absolute_in: Option<PathBuf>,
    pub expect: Expect,
}

impl Probe {
    /// The workspace plugin's (and the baseline's) `read_file`.
    pub fn read_file() -> Probe {
        Probe {
            tool: "read_file".into(),
            absolute_in: None,
            expect: Expect::Preview,
        }
    }

    pub fn request(&self, case: &Arc<FileCase>) -> ReadFile {
        let path = match &self.absolute_in {
            None => case.rel.clone(),
            Some(dir) => dir.join(&case.rel).to_string_lossy().into_owned(),
        };
        ReadFile {
            case: case.clone(),
            tool: self.tool.clone(),
            path,
            expect: self.expect,
        }
    }
}

/// What a server in a series is asked for a file: to read it, or (the
/// floor) for a result of as many bytes.
#[derive(Clone)]
pub enum Ask {
    Read(Probe),
    Bytes,
}

impl Ask {
    pub fn request(&self, case: &Arc<FileCase>) -> Arc<dyn Request> {
        match self {
            Ask::Read(probe) => Arc::new(probe.request(case)),
            Ask::Bytes => Arc::new(Floor {
                bytes: case.bytes(),
            }),
        }
    }
}

/// Read one whole file.
pub struct ReadFile {
    pub case: Arc<FileCase>,
    tool: String,
    path: String,
    expect: Expect,
}

impl Request for ReadFile {
    fn params(&self) -> CallToolRequestParams {
        CallToolRequestParams::new(self.tool.clone())
            .with_arguments(object(json!({ "path": self.path })))
    }

    fn check(&self, r: &CallToolResult) -> Result<()> {
        match self.expect {
            Expect::Preview => check_preview(&self.case, r),
            Expect::Holds => check_holds(&self.case, r),
        }
    }

    fn what(&self) -> String {
        format!("{} {}", self.tool, self.case.rel)
    }
}

/// The floor server's one tool: a result of `bytes` bytes of content, shaped
/// like ours (`structuredContent` plus its text mirror).
pub struct Floor {
    pub bytes: usize,
}

/// The floor server's tool name.
pub const FLOOR_TOOL: &str = "floor";

/// The content the floor returns for `bytes`.
pub fn floor_payload(bytes: usize) -> String {
    "x".repeat(bytes)
}

impl Request for Floor {
    fn params(&self) -> CallToolRequestParams {
        CallToolRequestParams::new(FLOOR_TOOL)
            .with_arguments(object(json!({ "bytes": self.bytes })))
    }

    fn check(&self, r: &CallToolResult) -> Result<()> {
        ensure!(r.is_error != Some(true), "floor: returned an error");
        let got = structured_str(r, "content")?;
        ensure!(
            got.len() == self.bytes && got.bytes().all(|b| b == b'x'),
            "floor: wrong content ({} bytes, expected {})",
            got.len(),
            self.bytes
        );
        Ok(())
    }

    fn what(&self) -> String {
        format!("{FLOOR_TOOL} {} bytes", self.bytes)
    }
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!("arguments are built as objects"),
    }
}

fn structured_str<'a>(r: &'a CallToolResult, key: &str) -> Result<&'a str> {
    r.structured_content
        .as_ref()
        .context("result has no structuredContent")?
        .get(key)
        .and_then(Value::as_str)
        .with_context(|| format!("result has no string `{key}`"))
}

/// The structured result must be exactly this file's whole preview.
pub fn check_preview(case: &FileCase, r: &CallToolResult) -> Result<()> {
    if r.is_error == Some(true) {
        bail!(
            "{}: tool returned an error: {:.300}",
            case.rel,
            serde_json::to_string(&r.content).unwrap_or_default()
        );
    }
    check_structured(
        case,
        r.structured_content
            .as_ref()
            .context("result has no structuredContent")?,
    )
}

/// `read_file`'s structured preview `v` holds exactly the whole of `case`.
pub fn check_structured(case: &FileCase, v: &Value) -> Result<()> {
    let rel = &case.rel;
    let got = v
        .get("content")
        .and_then(Value::as_str)
        .context("result has no string `content`")?;
    ensure!(
        got.len() == case.content.len() && got == case.content,
        "{rel}: content mismatch ({} bytes, expected {})",
        got.len(),
        case.content.len()
    );
    let num = |k: &str| v.get(k).and_then(Value::as_u64);
    ensure!(
        v.get("path").and_then(Value::as_str) == Some(rel.as_str()),
        "{rel}: wrong `path` in {v:.200}"
    );
    ensure!(num("start_line") == Some(0), "{rel}: wrong start_line");
    ensure!(
        num("lines_returned") == Some(case.lines),
        "{rel}: wrong lines_returned"
    );
    ensure!(
        num("total_lines") == Some(case.lines),
        "{rel}: wrong total_lines"
    );
    ensure!(
        num("size_bytes") == Some(case.content.len() as u64),
        "{rel}: wrong size_bytes"
    );
    ensure!(
        v.get("truncated").and_then(Value::as_bool) == Some(false),
        "{rel}: wrong truncated"
    );
    Ok(())
}

/// A peer's answer: not an error, and its structured content or its text
/// holds this whole file (exactly, somewhere). Text that is a JSON document
/// counts when one of its strings holds the file: wassette answers with the
/// WIT result as JSON text, `{"ok":"<file>"}`.
fn check_holds(case: &FileCase, r: &CallToolResult) -> Result<()> {
    ensure!(
        r.is_error != Some(true),
        "{}: the peer returned an error",
        case.rel
    );
    let structured = r
        .structured_content
        .as_ref()
        .is_some_and(|v| any_string_contains(v, &case.content));
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    let in_json_text = || {
        serde_json::from_str::<Value>(&text).is_ok_and(|v| any_string_contains(&v, &case.content))
    };
    ensure!(
        structured || text.contains(&case.content) || in_json_text(),
        "{}: the peer's answer does not hold the file ({} bytes of text)",
        case.rel,
        text.len()
    );
    Ok(())
}

/// Some string inside `v` contains `needle`.
fn any_string_contains(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s.contains(needle),
        Value::Array(items) => items.iter().any(|i| any_string_contains(i, needle)),
        Value::Object(map) => map.values().any(|i| any_string_contains(i, needle)),
        _ => false,
    }
}

/// `read_file` answered with an exact leading part of `case`, marked
/// `truncated` (its own read cap): `Some(bytes returned)`.
pub fn capped_at(case: &FileCase, r: &CallToolResult) -> Option<usize> {
    let v = r.structured_content.as_ref()?;
    let got = v.get("content")?.as_str()?;
    let cut = v.get("truncated")?.as_bool()? && got.len() < case.content.len();
    (cut && case.content.starts_with(got)).then_some(got.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case() -> FileCase {
        FileCase {
            label: "a.txt".into(),
            rel: "a.txt".into(),
            content: "hello\nworld\n".into(),
            lines: 2,
        }
    }

    fn preview(content: &str, truncated: bool) -> CallToolResult {
        CallToolResult::structured(json!({
            "path": "a.txt", "content": content, "start_line": 0,
            "lines_returned": 2, "total_lines": 2, "size_bytes": 12, "truncated": truncated,
        }))
    }

    #[test]
    fn a_whole_preview_passes_and_a_cut_or_altered_one_does_not() {
        let c = case();
        check_preview(&c, &preview("hello\nworld\n", false)).unwrap();
        assert!(check_preview(&c, &preview("hello\n", false)).is_err());
        assert!(check_preview(&c, &preview("hello\nworle\n", false)).is_err());
        assert!(check_preview(&c, &preview("hello\nworld\n", true)).is_err());
        assert_eq!(capped_at(&c, &preview("hello\n", true)), Some(6));
        assert_eq!(capped_at(&c, &preview("hellx\n", true)), None);
        assert_eq!(capped_at(&c, &preview("hello\nworld\n", false)), None);
    }

    #[test]
    fn a_peer_answer_must_hold_the_whole_file() {
        let req = Probe {
            tool: "read".into(),
            absolute_in: None,
            expect: Expect::Holds,
        }
        .request(&Arc::new(case()));
        let text = |s: &str| CallToolResult::success(vec![rmcp::model::ContentBlock::text(s)]);
        req.check(&text("file: hello\nworld\n.")).unwrap();
        assert!(req.check(&text("hello\n")).is_err());
        let mut err = text("hello\nworld\n");
        err.is_error = Some(true);
        assert!(req.check(&err).is_err());
    }

    /// wassette's shape: the WIT `result<string, string>` as JSON text. The
    /// file has a newline and quotes, so its JSON form differs from the file.
    #[test]
    fn a_peer_json_text_answer_must_hold_the_whole_file() {
        let mut c = case();
        c.content = "line \"one\"\nline two\n".into();
        let req = Probe {
            tool: "read-file".into(),
            absolute_in: None,
            expect: Expect::Holds,
        }
        .request(&Arc::new(c));
        let content = req.case.content.clone();
        let text = |s: String| CallToolResult::success(vec![rmcp::model::ContentBlock::text(s)]);
        let ok = |s: &str| json!({ "ok": s }).to_string();
        req.check(&text(ok(&content))).unwrap();
        // A file cut short, an `err` naming something else, escaped text
        // that is not a JSON document: all refused.
        assert!(req.check(&text(ok(&content[..content.len() - 1]))).is_err());
        assert!(req
            .check(&text(json!({ "err": "denied" }).to_string()))
            .is_err());
        assert!(req.check(&text(content.replace('\n', "\\n"))).is_err());
    }

    #[test]
    fn the_floor_answer_must_have_its_size() {
        let f = Floor { bytes: 5 };
        f.check(&CallToolResult::structured(json!({"content": "xxxxx"})))
            .unwrap();
        assert!(f
            .check(&CallToolResult::structured(json!({"content": "xxxx"})))
            .is_err());
        assert!(f
            .check(&CallToolResult::structured(json!({"content": "xxxxy"})))
            .is_err());
    }
}
