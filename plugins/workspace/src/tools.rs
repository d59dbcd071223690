//! The four file tools. `root` is the directory model paths are relative to
//! (`/` inside the sandbox, a temp dir in the native tests).

use std::io;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasm_mcp_guest::fs::ReadChunk;
use wasm_mcp_guest::{fs, Descriptor, Encoded, Tool};

use crate::api::{Code, ToolErr};
use crate::paths::{is_git_metadata, join_rel, normalize, resolve, resolve_links};
use crate::window;

/// No tool reads (or writes) more than this many bytes of one file.
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// Most bytes of JSON text `read_file` returns as `content`. The host caps
/// a tool's whole output (5 MiB by default), and escaping can make text up
/// to 6× the bytes read (`\u0001` for a control character; U+FFFD, 3
/// bytes, for an invalid one), so a file within `MAX_FILE_BYTES` may not
/// fit whole. 4 MiB leaves 1 MiB for the rest of the result: the path (a
/// few KiB escaped at most: the system refuses longer ones) and the counts.
pub const MAX_CONTENT_JSON_BYTES: usize = 4 << 20;
pub const MAX_LINE_LIMIT: u64 = 1000;
pub const MAX_DIR_ENTRIES: usize = 1000;
pub const MAX_SEARCH_RESULTS: u64 = 1000;
pub const MAX_MATCH_CHARS: usize = 500;
/// Directory depth at which `search` stops descending.
pub const MAX_SEARCH_DEPTH: usize = 64;

/// The four tools, with paths resolved under `root`.
pub fn tools(root: &Path) -> Vec<Tool> {
    let at = |root: &Path| root.to_path_buf();
    let (r1, r2, r3, r4) = (at(root), at(root), at(root), at(root));
    vec![
        Tool::encoded("read_file", move |a| read_file(&r1, a))
            .title("Read file")
            .read_only()
            .idempotent(),
        Tool::new("write_file", move |a| write_file(&r2, a))
            .title("Write file")
            .destructive()
            .idempotent(),
        Tool::new("list_dir", move |a| list_dir(&r3, a))
            .title("List directory")
            .read_only()
            .idempotent(),
        Tool::new("search", move |a| search(&r4, a))
            .title("Search files")
            .read_only()
            .idempotent(),
    ]
}

/// What `list-tools` returns.
pub fn descriptors() -> Vec<Descriptor> {
    wasm_mcp_guest::descriptors(&tools(Path::new("/")))
}

/// Runs tool `name`; returns the result object as JSON text.
pub fn call(root: &Path, name: &str, args_json: &str) -> Result<String, ToolErr> {
    wasm_mcp_guest::call(&tools(root), name, args_json)
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

fn max_line_limit() -> u64 {
    MAX_LINE_LIMIT
}

fn default_max_results() -> u64 {
    100
}

// ---------------------------------------------------------------- read_file

/// Read a text file of the worktree, by lines. `path` is relative to the
/// worktree root. Returns up to `line_limit` lines (default and maximum 1000)
/// starting at line `offset` (0-based, default 0). At most the first 2 MiB of
/// the file are read; `total_lines` counts the lines within that window and
/// `truncated` is true when the line limit or the 2 MiB cap cut the output.
/// `content` is also cut to at most 4 MiB as JSON text (escapes counted,
/// e.g. 6 bytes for a control character): after the last whole line that
/// fits, or inside a first line too long alone; `truncated` is then true.
/// Go on from line `start_line + lines_returned`. Bytes that are not valid
/// UTF-8 are replaced with U+FFFD (lossy conversion).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// File path, relative to the worktree root.
    path: String,
    /// First line to return, 0-based.
    #[serde(default)]
    offset: u64,
    /// Maximum number of lines to return.
    #[serde(default = "max_line_limit")]
    #[schemars(range(min = 1, max = MAX_LINE_LIMIT))]
    line_limit: u64,
}

// The result of `read_file`. Only its schema is built from it: the tool
// writes the same JSON itself, as it reads (`crate::window`). (A `//`
// comment: a doc comment would be published as the schema's description.)
#[derive(Serialize, JsonSchema)]
#[cfg_attr(not(test), allow(dead_code))]
pub struct ReadOut {
    path: String,
    content: String,
    start_line: u64,
    lines_returned: u64,
    total_lines: u64,
    size_bytes: u64,
    truncated: bool,
}

/// `ReadOut`'s fields after `content`, known once the file has been read.
#[derive(Serialize)]
struct ReadCounts {
    start_line: u64,
    lines_returned: u64,
    total_lines: u64,
    size_bytes: u64,
    truncated: bool,
}

fn read_file(root: &Path, a: ReadArgs) -> Result<Encoded<ReadOut>, ToolErr> {
    let limit = check_range("line_limit", a.line_limit, 1, MAX_LINE_LIMIT)?;
    let rel = normalize(&a.path)?;
    let full = resolve(root, &rel);
    let file = fs::File::open(&full).map_err(|e| ToolErr::io(&rel, &e))?;
    let meta = file.metadata().map_err(|e| ToolErr::io(&rel, &e))?;
    if meta.is_dir() {
        return Err(ToolErr::invalid(format!(
            "{rel} is a directory (use list_dir)"
        )));
    }
    // Sized up front for an unescaped file plus one chunk's worst-case
    // escaping (what `sonic-rs` reserves before it escapes a chunk): no
    // reallocation, and no copy, while the content is written, unless
    // escapes or U+FFFD replacements make it longer than that.
    let expected = meta.len().min(MAX_FILE_BYTES) as usize;
    let mut out = Vec::with_capacity(expected + 6 * window::CHUNK + 6 * rel.len() + 256);
    out.extend_from_slice(b"{\"path\":\"");
    window::escape_into(&mut out, &rel);
    out.extend_from_slice(b"\",\"content\":\"");
    let w = window::stream_window(
        file,
        window::CHUNK,
        MAX_FILE_BYTES,
        a.offset,
        limit,
        MAX_CONTENT_JSON_BYTES,
        &mut out,
    )
    .map_err(|e| ToolErr::io(&rel, &e))?;
    out.push(b'"');
    let counts = ReadCounts {
        start_line: a.offset,
        lines_returned: w.lines_returned,
        total_lines: w.total_lines,
        size_bytes: meta.len().max(w.bytes_read),
        truncated: w.capped || w.cut || a.offset.saturating_add(w.lines_returned) < w.total_lines,
    };
    // `{"start_line":…}` with its `{` made the `,` after `content`.
    let brace = out.len();
    sonic_rs::to_writer(&mut out, &counts)
        .map_err(|e| ToolErr::internal(format!("result of read_file: {e}")))?;
    out[brace] = b',';
    // SAFETY: every byte written is UTF-8: ASCII punctuation, and the
    // escaped text of `str`s.
    Ok(Encoded::new(unsafe { String::from_utf8_unchecked(out) }))
}

// --------------------------------------------------------------- write_file

/// Write a text file of the worktree, replacing it if it exists. `path` is
/// relative to the worktree root; `content` is at most 2 MiB (UTF-8 bytes).
/// Parent directories are created only when `create_dirs` is true. A path
/// naming a directory (ending in `/`) is refused. The worktree's `.git`
/// metadata is never writable.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// File path, relative to the worktree root.
    path: String,
    /// The new file content (at most 2 MiB).
    content: String,
    /// Create missing parent directories.
    #[serde(default)]
    create_dirs: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct WriteOut {
    path: String,
    bytes_written: u64,
    /// True if the file did not exist before.
    created: bool,
}

fn write_file(root: &Path, a: WriteArgs) -> Result<WriteOut, ToolErr> {
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
    // `normalize` drops a trailing `/` (and resolves a last `.` or `..`),
    // which would write a file where the path named a directory.
    if matches!(a.path.rsplit('/').next(), Some("" | "." | "..")) {
        return Err(ToolErr::invalid(format!(
            "{}: the path names a directory (it ends in `/`, `.` or `..`); a file cannot be written there",
            a.path
        )));
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
        check_parent(parent, &resolve(root, parent), a.create_dirs)?;
    }
    fs::write(&full, a.content.as_bytes()).map_err(|e| ToolErr::io(&rel, &e))?;
    Ok(WriteOut {
        path: rel,
        bytes_written: a.content.len() as u64,
        created: existing.is_none(),
    })
}

// ----------------------------------------------------------------- list_dir

/// List a directory of the worktree (default: the root), sorted by name, at
/// most 1000 entries. `kind` is file, dir, symlink (not followed) or other;
/// `size` is the file size in bytes (0 for non-files).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Directory path, relative to the worktree root.
    #[serde(default = "default_dot")]
    path: String,
}

#[derive(Serialize, JsonSchema)]
pub struct ListOut {
    path: String,
    entries: Vec<Entry>,
    truncated: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct Entry {
    name: String,
    kind: Kind,
    size: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// Whether directory `parent` (at `full`) can take a new file, made first
/// when `create` is set; else why not, in words that say which.
fn check_parent(parent: &str, full: &Path, create: bool) -> Result<(), ToolErr> {
    match fs::metadata(full) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(ToolErr::invalid(format!(
            "{parent} is a file, not a directory"
        ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
            fs::create_dir_all(full).map_err(|e| ToolErr::io(parent, &e))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(ToolErr::new(
            Code::NotFound,
            format!("parent directory {parent} does not exist (set create_dirs to create it)"),
        )),
        Err(e) => Err(ToolErr::io(parent, &e)),
    }
}

fn kind_of(ft: &fs::FileType) -> Kind {
    if ft.is_symlink() {
        Kind::Symlink
    } else if ft.is_dir() {
        Kind::Dir
    } else if ft.is_file() {
        Kind::File
    } else {
        Kind::Other
    }
}

fn list_dir(root: &Path, a: ListArgs) -> Result<ListOut, ToolErr> {
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
                let size = if kind == Kind::File {
                    ent.metadata().map(|m| m.len()).unwrap_or(0)
                } else {
                    0
                };
                (kind, size)
            }
            Err(_) => (Kind::Other, 0),
        };
        entries.push((name, kind, size));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let truncated = entries.len() > MAX_DIR_ENTRIES;
    entries.truncate(MAX_DIR_ENTRIES);
    let entries = entries
        .into_iter()
        .map(|(name, kind, size)| Entry { name, kind, size })
        .collect();
    Ok(ListOut {
        path: rel,
        entries,
        truncated,
    })
}

// ------------------------------------------------------------------- search

/// Search the worktree for a literal string (not a regex), recursively from
/// `path` (default: the root). Returns matching lines (1-based line numbers,
/// text cut at 500 characters), at most `max_results` (default 100, maximum
/// 1000; `truncated` is true when more were left out). Skips `.git`, files
/// over 2 MiB, binary files (containing a NUL byte) and symlinked
/// directories. `skipped` counts the files and directories not searched:
/// directories more than 64 levels below `path` (not entered), entries that
/// could not be read (e.g. no permission), files over 2 MiB, binary files.
/// A `path` that cannot be read is an error.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Literal text to find.
    #[schemars(length(min = 1))]
    pattern: String,
    /// File or directory to search, relative to the worktree root.
    #[serde(default = "default_dot")]
    path: String,
    /// Match case exactly.
    #[serde(default = "yes")]
    case_sensitive: bool,
    /// Most matches to return.
    #[serde(default = "default_max_results")]
    #[schemars(range(min = 1, max = MAX_SEARCH_RESULTS))]
    max_results: u64,
}

#[derive(Serialize, JsonSchema)]
pub struct SearchOut {
    matches: Vec<Match>,
    files_scanned: u64,
    truncated: bool,
    skipped: Skipped,
}

/// Files and directories not searched, by why (counted up to where the
/// search stopped, if `truncated`).
#[derive(Default, Serialize, JsonSchema)]
pub struct Skipped {
    /// Directories more than 64 levels below `path`: not entered, so what
    /// is in them is not counted.
    too_deep: u64,
    /// Directories and files that could not be listed or read (e.g. no
    /// permission).
    unreadable: u64,
    /// Files over 2 MiB.
    too_large: u64,
    /// Files containing a NUL byte.
    binary: u64,
}

fn yes() -> bool {
    true
}

#[derive(Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Match {
    pub path: String,
    #[schemars(range(min = 1))]
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
    skipped: Skipped,
}

impl Search<'_> {
    /// Searches file `rel`, `size` bytes long by its metadata. An error is
    /// the file's own (it could not be read); for a file in a walk the
    /// caller counts it.
    fn file(&mut self, rel: &str, size: u64) -> io::Result<()> {
        if size > MAX_FILE_BYTES {
            self.skipped.too_large += 1;
            return Ok(());
        }
        let file = fs::File::open(resolve(self.root, rel))?;
        let data = read_capped(file, size, MAX_FILE_BYTES + 1)?;
        if data.len() as u64 > MAX_FILE_BYTES {
            self.skipped.too_large += 1;
            return Ok(());
        }
        if is_binary(&data) {
            self.skipped.binary += 1;
            return Ok(());
        }
        self.files_scanned += 1;
        let text = String::from_utf8_lossy(&data);
        if !self.matcher.scan(rel, &text, &mut self.matches, self.max) {
            self.truncated = true;
        }
        Ok(())
    }

    /// Searches directory `rel`, `depth` levels below the search's `path`.
    /// An error is the directory's own (it could not be listed); entries
    /// that cannot be read are counted in `skipped` and passed over.
    fn dir(&mut self, rel: &str, depth: usize) -> io::Result<()> {
        let mut ents: Vec<(String, fs::FileType)> = Vec::new();
        for e in list(self.root, rel)? {
            match e.and_then(|e| Ok((e.file_name().into_string(), e.file_type()?))) {
                Ok((Ok(name), ft)) => ents.push((name, ft)),
                // A name that is not UTF-8 (no WASI path can name it: the
                // sandbox's listings leave it out), or an entry that could
                // not be read.
                Ok((Err(_), _)) | Err(_) => self.skipped.unreadable += 1,
            }
        }
        ents.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, ft) in ents {
            if self.truncated {
                return Ok(());
            }
            let child = join_rel(rel, &name);
            if ft.is_dir() {
                if name == ".git" {
                    continue;
                }
                if depth >= MAX_SEARCH_DEPTH {
                    self.skipped.too_deep += 1;
                } else if self.dir(&child, depth + 1).is_err() {
                    self.skipped.unreadable += 1;
                }
            } else if ft.is_file() || ft.is_symlink() {
                // Symlinks: files are followed (the sandbox polices the
                // target), directories are not. A dangling link (or a file
                // gone since it was listed) has nothing to search.
                let read = match fs::metadata(resolve(self.root, &child)) {
                    Ok(m) if m.is_file() => self.file(&child, m.len()),
                    Ok(_) => Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(e),
                };
                if read.is_err() {
                    self.skipped.unreadable += 1;
                }
            }
        }
        Ok(())
    }
}

/// At most `cap` bytes of `file`, which its metadata said is `size` bytes
/// long: asked for whole at first (one read and the one that finds its
/// end, for a file that did not change), then a chunk at a time.
fn read_capped(mut file: impl ReadChunk, size: u64, cap: u64) -> io::Result<Vec<u8>> {
    let mut data: Vec<u8> = Vec::new();
    let mut want = size.saturating_add(1).min(cap);
    while want > 0 {
        let chunk = file.read_chunk(want as usize)?;
        if chunk.is_empty() {
            break;
        }
        if data.is_empty() {
            data = chunk;
        } else {
            data.extend_from_slice(&chunk);
        }
        want = (cap - data.len() as u64).min(window::CHUNK as u64);
    }
    Ok(data)
}

/// The entries of directory `rel`, listed through `rel/.`: natively as in
/// the sandbox (whose listing opens `.` in the directory), a directory that
/// can be read but not entered (mode 600) cannot be listed, rather than
/// listed with every entry unreadable.
fn list(root: &Path, rel: &str) -> io::Result<fs::ReadDir> {
    fs::read_dir(resolve(root, rel).join("."))
}

fn search(root: &Path, a: SearchArgs) -> Result<SearchOut, ToolErr> {
    if a.pattern.is_empty() {
        return Err(ToolErr::invalid("`pattern` must not be empty"));
    }
    let max = check_range("max_results", a.max_results, 1, MAX_SEARCH_RESULTS)? as usize;
    let rel = normalize(&a.path)?;
    let meta = fs::metadata(resolve(root, &rel)).map_err(|e| ToolErr::io(&rel, &e))?;
    let mut s = Search {
        root,
        matcher: Matcher::new(&a.pattern, a.case_sensitive),
        max,
        matches: Vec::new(),
        files_scanned: 0,
        truncated: false,
        skipped: Skipped::default(),
    };
    if meta.is_dir() {
        s.dir(&rel, 0).map_err(|e| ToolErr::io(&rel, &e))?;
    } else if meta.is_file() {
        s.file(&rel, meta.len())
            .map_err(|e| ToolErr::io(&rel, &e))?;
    } else {
        return Err(ToolErr::invalid(format!(
            "{rel} is not a regular file or directory"
        )));
    }
    Ok(SearchOut {
        matches: s.matches,
        files_scanned: s.files_scanned,
        truncated: s.truncated,
        skipped: s.skipped,
    })
}

#[cfg(test)]
mod tests;
