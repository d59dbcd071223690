//! The benchmark worktree's files and what `read_file` must return for them.

use std::path::Path;

use anyhow::Result;

/// A file of the benchmark worktree and its exact content.
pub struct FileCase {
    /// For tables: `small.txt (1.0 KiB)`.
    pub label: String,
    /// Path relative to the worktree.
    pub rel: String,
    pub content: String,
    pub lines: u64,
}

impl FileCase {
    /// `lines` lines of exactly `line_len` bytes (terminator included), ASCII.
    pub fn make(dir: &Path, rel: &str, lines: usize, line_len: usize) -> Result<FileCase> {
        let content = lines_of(lines, line_len);
        std::fs::write(dir.join(rel), &content)?;
        Ok(FileCase {
            label: format!("{rel} ({})", human_bytes(content.len())),
            rel: rel.to_string(),
            content,
            lines: lines as u64,
        })
    }

    pub fn bytes(&self) -> usize {
        self.content.len()
    }
}

/// `lines` numbered lines of `line_len` bytes each, `\n` included.
fn lines_of(lines: usize, line_len: usize) -> String {
    let mut content = String::with_capacity(lines * line_len);
    for i in 0..lines {
        let head = format!("{i:06} ");
        content.push_str(&head);
        for j in 0..line_len - head.len() - 1 {
            content.push((b'a' + ((i * 7 + j) % 26) as u8) as char);
        }
        content.push('\n');
    }
    content
}

/// `1.0 KiB`, `1.9 MB` (the labels the README's tables use).
pub fn human_bytes(n: usize) -> String {
    if n >= 1_000_000 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else if n >= 1000 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// `1 KiB`, `64 KiB`, `4 MiB` for exact binary sizes.
pub fn binary_bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_the_asked_shape() {
        let s = lines_of(512, 2048);
        assert_eq!(s.len(), 1 << 20);
        assert_eq!(s.lines().count(), 512);
        assert!(s.lines().all(|l| l.len() == 2047));
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(binary_bytes(1024), "1 KiB");
        assert_eq!(binary_bytes(4 << 20), "4 MiB");
        assert_eq!(binary_bytes(1000), "1000 B");
    }
}
