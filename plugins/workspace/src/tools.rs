//! The four file tools. `root` is the directory model paths are relative to
//! (`/` inside the sandbox, a temp dir in the native tests).

use std::fs;
use std::io::Read;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::{Code, Desc, ToolErr};
use crate::paths::{is_git_metadata, join_rel, normalize, resolve, resolve_links};

/// No tool reads (or writes) more than this many bytes of one file.
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
pub const MAX_LINE_LIMIT: u64 = 1000;
pub const MAX_DIR_ENTRIES: usize = 1000;
pub const MAX_SEARCH_RESULTS: u64 = 1000;
pub const MAX_MATCH_CHARS: usize = 500;
/// Directory depth at which `search` stops descending.
pub const MAX_SEARCH_DEPTH: usize = 64;

pub fn descriptors() -> Vec<Desc> {
    vec![
        Desc {
            name: "read_file",
            title: "Read file",
            description: "Read a text file of the worktree, by lines. `path` is relative to the \
                worktree root. Returns up to `line_limit` lines (default and maximum 1000) starting \
                at line `offset` (0-based, default 0). At most the first 2 MiB of the file are read; \
                `total_lines` counts the lines within that window and `truncated` is true when the \
                line limit or the 2 MiB cap cut the output. Bytes that are not valid UTF-8 are \
                replaced with U+FFFD (lossy conversion).",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the worktree root."},
                    "offset": {"type": "integer", "minimum": 0, "default": 0,
                               "description": "First line to return, 0-based."},
                    "line_limit": {"type": "integer", "minimum": 1, "maximum": MAX_LINE_LIMIT,
                                   "default": MAX_LINE_LIMIT, "description": "Maximum number of lines to return."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                    "start_line": {"type": "integer", "minimum": 0},
                    "lines_returned": {"type": "integer", "minimum": 0},
                    "total_lines": {"type": "integer", "minimum": 0},
                    "size_bytes": {"type": "integer", "minimum": 0},
                    "truncated": {"type": "boolean"}
                },
                "required": ["path", "content", "start_line", "lines_returned", "total_lines",
                             "size_bytes", "truncated"]
            }),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        Desc {
            name: "write_file",
            title: "Write file",
            description: "Write a text file of the worktree, replacing it if it exists. `path` is \
                relative to the worktree root; `content` is at most 2 MiB (UTF-8 bytes). Parent \
                directories are created only when `create_dirs` is true. The worktree's `.git` \
                metadata is never writable.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the worktree root."},
                    "content": {"type": "string", "description": "The new file content (at most 2 MiB)."},
                    "create_dirs": {"type": "boolean", "default": false,
                                    "description": "Create missing parent directories."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "bytes_written": {"type": "integer", "minimum": 0},
                    "created": {"type": "boolean", "description": "True if the file did not exist before."}
                },
                "required": ["path", "bytes_written", "created"]
            }),
            read_only: false,
            destructive: true,
            idempotent: true,
        },
        Desc {
            name: "list_dir",
            title: "List directory",
            description: "List a directory of the worktree (default: the root), sorted by name, at \
                most 1000 entries. `kind` is file, dir, symlink (not followed) or other; `size` is \
                the file size in bytes (0 for non-files).",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "default": ".",
                             "description": "Directory path, relative to the worktree root."}
                },
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "entries": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "kind": {"enum": ["file", "dir", "symlink", "other"]},
                                "size": {"type": "integer", "minimum": 0}
                            },
                            "required": ["name", "kind", "size"]
                        }
                    },
                    "truncated": {"type": "boolean"}
                },
                "required": ["path", "entries", "truncated"]
            }),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        Desc {
            name: "search",
            title: "Search files",
            description: "Search the worktree for a literal string (not a regex), recursively from \
                `path` (default: the root). Returns matching lines (1-based line numbers, text cut \
                at 500 characters), at most `max_results` (default 100, maximum 1000). Skips `.git`, \
                files over 2 MiB, binary files (containing a NUL byte) and symlinked directories.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1, "description": "Literal text to find."},
                    "path": {"type": "string", "default": ".",
                             "description": "File or directory to search, relative to the worktree root."},
                    "case_sensitive": {"type": "boolean", "default": true},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS,
                                    "default": 100}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "matches": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "path": {"type": "string"},
                                "line": {"type": "integer", "minimum": 1},
                                "text": {"type": "string"}
                            },
                            "required": ["path", "line", "text"]
                        }
                    },
                    "files_scanned": {"type": "integer", "minimum": 0},
                    "truncated": {"type": "boolean"}
                },
                "required": ["matches", "files_scanned", "truncated"]
            }),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
    ]
}

/// Runs tool `name`; returns the result object as JSON text.
pub fn call(root: &Path, name: &str, args_json: &str) -> Result<String, ToolErr> {
    let out = match name {
        "read_file" => read_file(root, parse(name, args_json)?)?,
        "write_file" => write_file(root, parse(name, args_json)?)?,
        "list_dir" => list_dir(root, parse(name, args_json)?)?,
        "search" => search(root, parse(name, args_json)?)?,
        _ => {
            return Err(ToolErr::new(
                Code::UnknownTool,
                format!("unknown tool `{name}`"),
            ))
        }
    };
    Ok(out.to_string())
}

fn parse<T: DeserializeOwned>(tool: &str, args_json: &str) -> Result<T, ToolErr> {
    let text = if args_json.trim().is_empty() {
        "{}"
    } else {
        args_json
    };
    serde_json::from_str(text)
        .map_err(|e| ToolErr::invalid(format!("invalid arguments for {tool}: {e}")))
}

fn check_range(field: &str, v: u64, lo: u64, hi: u64) -> Result<u64, ToolErr> {
    if v < lo || v > hi {
        return Err(ToolErr::invalid(format!(
            "`{field}` must be between {lo} and {hi}, got {v}"
        )));
    }
    Ok(v)
}

fn default_dot() -> String {
    ".".to_string()
}

// ---------------------------------------------------------------- read_file

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: u64,
    line_limit: Option<u64>,
}

/// The pure part of `read_file`: a window of lines of `data`.
#[derive(Debug, PartialEq, Eq)]
pub struct Preview {
    pub content: String,
    pub lines_returned: u64,
    pub total_lines: u64,
    pub truncated: bool,
}

/// `data` is what was read (at most the cap); `capped` says the file had
/// more. Lines keep their terminators, so `content` is an exact slice.
pub fn preview(data: &[u8], offset: u64, line_limit: u64, capped: bool) -> Preview {
    let text = String::from_utf8_lossy(data);
    let mut total = 0u64;
    let mut returned = 0u64;
    let mut content = String::new();
    for line in text.split_inclusive('\n') {
        if total >= offset && returned < line_limit {
            content.push_str(line);
            returned += 1;
        }
        total += 1;
    }
    let truncated = capped || offset.saturating_add(returned) < total;
    Preview {
        content,
        lines_returned: returned,
        total_lines: total,
        truncated,
    }
}

fn read_file(root: &Path, a: ReadArgs) -> Result<Value, ToolErr> {
    let limit = check_range(
        "line_limit",
        a.line_limit.unwrap_or(MAX_LINE_LIMIT),
        1,
        MAX_LINE_LIMIT,
    )?;
    let rel = normalize(&a.path)?;
    let full = resolve(root, &rel);
    let file = fs::File::open(&full).map_err(|e| ToolErr::io(&rel, &e))?;
    let meta = file.metadata().map_err(|e| ToolErr::io(&rel, &e))?;
    if meta.is_dir() {
        return Err(ToolErr::invalid(format!(
            "{rel} is a directory (use list_dir)"
        )));
    }
    // Sized up front: no reallocation (and copy) while reading a large file.
    let mut data = Vec::with_capacity(meta.len().min(MAX_FILE_BYTES) as usize + 1);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| ToolErr::io(&rel, &e))?;
    let capped = data.len() as u64 > MAX_FILE_BYTES;
    data.truncate(MAX_FILE_BYTES as usize);
    let p = preview(&data, a.offset, limit, capped);
    Ok(json!({
        "path": rel,
        "content": p.content,
        "start_line": a.offset,
        "lines_returned": p.lines_returned,
        "total_lines": p.total_lines,
        "size_bytes": meta.len().max(data.len() as u64),
        "truncated": p.truncated,
    }))
}

// --------------------------------------------------------------- write_file

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
    #[serde(default)]
    create_dirs: bool,
}

fn write_file(root: &Path, a: WriteArgs) -> Result<Value, ToolErr> {
    if a.content.len() as u64 > MAX_FILE_BYTES {
        return Err(ToolErr::new(
            Code::TooLarge,
            format!(
                "content is {} bytes, the limit is {MAX_FILE_BYTES}",
                a.content.len()
            ),
        ));
    }
    let rel = normalize(&a.path)?;
    if rel == "." {
        return Err(ToolErr::invalid(
            "path must name a file, not the worktree root",
        ));
    }
    // Decide on the path the write really lands on: a symlink committed in
    // the repository (`link -> .git`, `d -> .`) must not lead into `.git`.
    let real = resolve_links(root, &rel)?;
    if is_git_metadata(&rel) || is_git_metadata(&real) {
        return Err(ToolErr::new(
            Code::PermissionDenied,
            format!("{rel}: the worktree's git metadata is not writable"),
        ));
    }
    if real == "." {
        return Err(ToolErr::invalid(format!("{rel} is a directory")));
    }
    let full = resolve(root, &real);
    let existing = fs::symlink_metadata(&full).ok();
    if existing.as_ref().is_some_and(|m| m.is_dir()) {
        return Err(ToolErr::invalid(format!("{rel} is a directory")));
    }
    if let Some((parent, _)) = real.rsplit_once('/') {
        let pfull = resolve(root, parent);
        if a.create_dirs {
            fs::create_dir_all(&pfull).map_err(|e| ToolErr::io(parent, &e))?;
        } else if !pfull.is_dir() {
            return Err(ToolErr::new(
                Code::NotFound,
                format!("parent directory {parent} does not exist (set create_dirs to create it)"),
            ));
        }
    }
    fs::write(&full, a.content.as_bytes()).map_err(|e| ToolErr::io(&rel, &e))?;
    Ok(json!({ "path": rel, "bytes_written": a.content.len(), "created": existing.is_none() }))
}

// ----------------------------------------------------------------- list_dir

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default = "default_dot")]
    path: String,
}

fn kind_of(ft: &fs::FileType) -> &'static str {
    if ft.is_symlink() {
        "symlink"
    } else if ft.is_dir() {
        "dir"
    } else if ft.is_file() {
        "file"
    } else {
        "other"
    }
}

fn list_dir(root: &Path, a: ListArgs) -> Result<Value, ToolErr> {
    let rel = normalize(&a.path)?;
    let full = resolve(root, &rel);
    let meta = fs::metadata(&full).map_err(|e| ToolErr::io(&rel, &e))?;
    if !meta.is_dir() {
        return Err(ToolErr::invalid(format!("{rel} is not a directory")));
    }
    let mut entries = Vec::new();
    for ent in fs::read_dir(&full).map_err(|e| ToolErr::io(&rel, &e))? {
        let ent = ent.map_err(|e| ToolErr::io(&rel, &e))?;
        let name = ent.file_name().to_string_lossy().into_owned();
        let (kind, size) = match ent.file_type() {
            Ok(ft) => {
                let kind = kind_of(&ft);
                let size = if kind == "file" {
                    ent.metadata().map(|m| m.len()).unwrap_or(0)
                } else {
                    0
                };
                (kind, size)
            }
            Err(_) => ("other", 0),
        };
        entries.push((name, kind, size));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let truncated = entries.len() > MAX_DIR_ENTRIES;
    entries.truncate(MAX_DIR_ENTRIES);
    let entries: Vec<Value> = entries
        .into_iter()
        .map(|(name, kind, size)| json!({"name": name, "kind": kind, "size": size}))
        .collect();
    Ok(json!({ "path": rel, "entries": entries, "truncated": truncated }))
}

// ------------------------------------------------------------------- search

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    pattern: String,
    #[serde(default = "default_dot")]
    path: String,
    #[serde(default = "yes")]
    case_sensitive: bool,
    max_results: Option<u64>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, PartialEq, Eq)]
pub struct Match {
    pub path: String,
    pub line: u64,
    pub text: String,
}

/// A literal matcher; case-insensitive matching compares lowercased text.
pub struct Matcher {
    pattern: String,
    case_sensitive: bool,
}

impl Matcher {
    pub fn new(pattern: &str, case_sensitive: bool) -> Self {
        let pattern = if case_sensitive {
            pattern.to_string()
        } else {
            pattern.to_lowercase()
        };
        Matcher {
            pattern,
            case_sensitive,
        }
    }

    pub fn is_match(&self, line: &str) -> bool {
        if self.case_sensitive {
            line.contains(&self.pattern)
        } else {
            line.to_lowercase().contains(&self.pattern)
        }
    }

    /// Appends the matching lines of `text` (file `path`) to `out`, up to
    /// `max` matches in total. Returns false once `out` is full and more
    /// matches were left out.
    pub fn scan(&self, path: &str, text: &str, out: &mut Vec<Match>, max: usize) -> bool {
        for (i, line) in text.split('\n').enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if self.is_match(line) {
                if out.len() >= max {
                    return false;
                }
                out.push(Match {
                    path: path.to_string(),
                    line: i as u64 + 1,
                    text: cap_chars(line, MAX_MATCH_CHARS),
                });
            }
        }
        true
    }
}

pub fn cap_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// True for content `search` treats as binary.
pub fn is_binary(data: &[u8]) -> bool {
    data.contains(&0)
}

struct Search<'a> {
    root: &'a Path,
    matcher: Matcher,
    max: usize,
    matches: Vec<Match>,
    files_scanned: u64,
    truncated: bool,
}

impl Search<'_> {
    fn file(&mut self, rel: &str, size: u64) {
        if size > MAX_FILE_BYTES {
            return;
        }
        let Ok(data) = fs::read(resolve(self.root, rel)) else {
            return;
        };
        if data.len() as u64 > MAX_FILE_BYTES || is_binary(&data) {
            return;
        }
        self.files_scanned += 1;
        let text = String::from_utf8_lossy(&data);
        if !self.matcher.scan(rel, &text, &mut self.matches, self.max) {
            self.truncated = true;
        }
    }

    fn dir(&mut self, rel: &str, depth: usize) {
        if depth > MAX_SEARCH_DEPTH {
            return;
        }
        let Ok(rd) = fs::read_dir(resolve(self.root, rel)) else {
            return;
        };
        let mut ents: Vec<(String, fs::FileType)> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| Some((e.file_name().to_str()?.to_string(), e.file_type().ok()?)))
            .collect();
        ents.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, ft) in ents {
            if self.truncated {
                return;
            }
            let child = join_rel(rel, &name);
            if ft.is_dir() {
                if name != ".git" {
                    self.dir(&child, depth + 1);
                }
            } else if ft.is_file() || ft.is_symlink() {
                // Symlinks: files are followed (the sandbox polices the
                // target), directories are not.
                match fs::metadata(resolve(self.root, &child)) {
                    Ok(m) if m.is_file() => self.file(&child, m.len()),
                    _ => {}
                }
            }
        }
    }
}

fn search(root: &Path, a: SearchArgs) -> Result<Value, ToolErr> {
    if a.pattern.is_empty() {
        return Err(ToolErr::invalid("`pattern` must not be empty"));
    }
    let max = check_range(
        "max_results",
        a.max_results.unwrap_or(100),
        1,
        MAX_SEARCH_RESULTS,
    )? as usize;
    let rel = normalize(&a.path)?;
    let meta = fs::metadata(resolve(root, &rel)).map_err(|e| ToolErr::io(&rel, &e))?;
    let mut s = Search {
        root,
        matcher: Matcher::new(&a.pattern, a.case_sensitive),
        max,
        matches: Vec::new(),
        files_scanned: 0,
        truncated: false,
    };
    if meta.is_dir() {
        s.dir(&rel, 0);
    } else {
        s.file(&rel, meta.len());
    }
    let matches: Vec<Value> = s
        .matches
        .into_iter()
        .map(|m| json!({"path": m.path, "line": m.line, "text": m.text}))
        .collect();
    Ok(json!({ "matches": matches, "files_scanned": s.files_scanned, "truncated": s.truncated }))
}

#[cfg(test)]
mod tests;
