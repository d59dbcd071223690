//! {{name}}: a tool plugin for wasm-mcp, written on the guest SDK.
//!
//! A tool is a typed function. Its argument type's doc comment is the
//! description the model sees; field doc comments describe the arguments;
//! the JSON Schemas are derived from the types. Each call runs in a fresh
//! sandbox whose only filesystem is the worktree, mounted at `/`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasm_mcp_guest::{Tool, ToolError};

/// Counts the lines, words and bytes of a text file of the worktree.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// File path, relative to the worktree root.
    pub path: String,
}

#[derive(Serialize, JsonSchema)]
pub struct Counts {
    pub path: String,
    pub lines: u64,
    pub words: u64,
    pub bytes: u64,
}

/// Largest file read, in bytes.
const MAX_BYTES: u64 = 4 << 20;

pub fn count(root: &std::path::Path, a: Args) -> Result<Counts, ToolError> {
    let rel = a.path.trim_start_matches('/');
    let meta = std::fs::metadata(root.join(rel)).map_err(|e| ToolError::io(rel, &e))?;
    if !meta.is_file() {
        return Err(ToolError::invalid(format!("{rel} is not a file")));
    }
    if meta.len() > MAX_BYTES {
        return Err(ToolError::too_large(format!("{rel} is over {MAX_BYTES} bytes")));
    }
    let data = std::fs::read(root.join(rel)).map_err(|e| ToolError::io(rel, &e))?;
    let text = String::from_utf8_lossy(&data);
    Ok(Counts {
        path: rel.to_string(),
        lines: text.lines().count() as u64,
        words: text.split_whitespace().count() as u64,
        bytes: data.len() as u64,
    })
}

pub fn tools() -> Vec<Tool> {
    vec![Tool::new("{{name}}", |a| count(std::path::Path::new("/"), a))
        .title("Count lines, words and bytes")
        .read_only()
        .idempotent()]
}

wasm_mcp_guest::export_tools!(tools());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_a_file() {
        let dir = std::env::temp_dir().join(format!("{{name}}-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), "one two\nthree\n").unwrap();
        let c = count(&dir, Args { path: "a.txt".into() }).unwrap();
        assert_eq!((c.lines, c.words, c.bytes), (2, 3, 14));
        assert!(count(&dir, Args { path: "nope".into() }).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
