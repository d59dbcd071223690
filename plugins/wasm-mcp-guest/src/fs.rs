//! The file system for tools, shaped like `std::fs` (the subset a tool
//! needs): natively it *is* `std::fs`, so a plugin's unit tests run over a
//! temp directory; in the component it calls the host's WASI 0.2
//! `wasi:filesystem` directly (through the `wasip2` crate's bindings).
//!
//! Why: `std::fs` on wasm32-wasip1 goes through the wasi preview1 adapter,
//! a second core instance with its own state, shims and one lowered import
//! per preview1 function the plugin uses. The product plugin's 15 preview1
//! imports cost about half of each instantiation (wasmtime 48, pooled:
//! 9.1 µs with the adapter, 4.1 µs for a component calling
//! `wasi:filesystem` alone). A plugin that uses this module for all of its
//! file I/O, and does not print, read the environment or unwind (build it
//! with `-Cpanic=immediate-abort`, as `scripts/build-plugins.sh` builds the
//! workspace plugin), has no preview1 imports left and no adapter.
//!
//! Paths are absolute (`/src/main.rs`) and resolved as wasi-libc resolves
//! them: against the preopened directory whose name is their longest
//! prefix. Errors are `std::io::Error`s with the same raw WASI error
//! numbers wasi-libc would give, so their kinds and messages are those of
//! `std::fs` on wasm32-wasip1.

#[cfg(not(target_arch = "wasm32"))]
pub use std::fs::{
    create_dir_all, metadata, read_dir, read_link, symlink_metadata, write, DirEntry, File,
    FileType, Metadata, ReadDir,
};

/// Reading a file a chunk at a time into buffers the reader hands out: in
/// the component each chunk is the buffer `wasi:filesystem`'s `read`
/// returned (`std::io::Read` would copy it once more into the caller's).
pub trait ReadChunk {
    /// At most `max` bytes (`max` > 0) from where the last chunk ended;
    /// empty only at the end of the file.
    fn read_chunk(&mut self, max: usize) -> std::io::Result<Vec<u8>>;
}

/// Natively any reader is read into a new buffer (a read that was
/// interrupted is retried).
#[cfg(not(target_arch = "wasm32"))]
impl<R: std::io::Read> ReadChunk for R {
    fn read_chunk(&mut self, max: usize) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; max];
        loop {
            match self.read(&mut buf) {
                Ok(n) => {
                    buf.truncate(n);
                    return Ok(buf);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(target_arch = "wasm32")]
mod wasi;
#[cfg(target_arch = "wasm32")]
pub use wasi::{
    create_dir_all, metadata, read_dir, read_link, symlink_metadata, write, DirEntry, File,
    FileType, Metadata, ReadDir,
};

/// Which preopen a path falls under, and the path relative to it (`.` for
/// the preopen itself), as wasi-libc's `find_relpath` picks: leading `/`s
/// are dropped from the path and from the preopens' names (and a name's
/// leading `./`, trailing `/`s, or a name `.`), so every path is taken from
/// `/` (wasi-libc's working directory); the preopen whose name is the
/// longest prefix of what is left at a component boundary wins, the later
/// one of equal names. `None` when no preopen holds `path` (the `ENOTCAPABLE`
/// of the wasi-libc this project builds with).
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn find_preopen<I>(names: I, path: &str) -> Option<(usize, String)>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let path = path.trim_start_matches('/');
    let mut best: Option<(usize, usize)> = None;
    for (i, name) in names.into_iter().enumerate() {
        let name = bare_name(name.as_ref());
        let under = name.is_empty()
            || path
                .strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        if under && best.is_none_or(|(_, len)| name.len() >= len) {
            best = Some((i, name.len()));
        }
    }
    let (i, len) = best?;
    let rel = path[len..].trim_start_matches('/');
    let rel = if rel.is_empty() { "." } else { rel };
    Some((i, rel.to_owned()))
}

/// A preopen's name as wasi-libc compares it: `/`, `.` and `./` are ``;
/// `/src/` and `./src` are `src`.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn bare_name(name: &str) -> &str {
    let name = name.strip_prefix("./").unwrap_or(name);
    let name = name.trim_start_matches('/').trim_end_matches('/');
    if name == "." {
        ""
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::find_preopen;

    #[test]
    fn a_path_falls_under_the_longest_preopen_at_a_component_boundary() {
        let names = ["/", "/src", "/src/gen", "/doc/"];
        let find = |p| find_preopen(names, p);
        let at = |i, rel: &str| Some((i, rel.to_owned()));
        assert_eq!(find("/"), at(0, "."));
        assert_eq!(find("/a.txt"), at(0, "a.txt"));
        assert_eq!(find("/src"), at(1, "."));
        assert_eq!(find("/src/."), at(1, "."));
        assert_eq!(find("/src/lib.rs"), at(1, "lib.rs"));
        assert_eq!(find("src/lib.rs"), at(1, "lib.rs"));
        assert_eq!(find("/srcs/lib.rs"), at(0, "srcs/lib.rs"));
        assert_eq!(find("/src/gen/x"), at(2, "x"));
        assert_eq!(find("/src/generated"), at(1, "generated"));
        assert_eq!(find("/doc/a"), at(3, "a"));
        assert_eq!(find("/doc"), at(3, "."));
        assert_eq!(find("//src//lib.rs"), at(1, "lib.rs"));
        assert_eq!(find("src"), at(1, "."));
        // Names as `wasmtime run --dir` gives them.
        let names = [".", "src", "./doc"];
        let find = |p| find_preopen(names, p);
        assert_eq!(find("/a"), at(0, "a"));
        assert_eq!(find("/src/a"), at(1, "a"));
        assert_eq!(find("doc"), at(2, "."));
        // The later of two equal names.
        assert_eq!(find_preopen(["/src", "/src/"], "/src/a"), at(1, "a"));
    }

    #[test]
    fn a_path_under_no_preopen_is_refused() {
        assert_eq!(find_preopen(["/src"], "/doc/a"), None);
        assert_eq!(find_preopen(["/src"], "/"), None);
        assert_eq!(find_preopen(["/src"], "/srcs"), None);
        assert_eq!(find_preopen(Vec::<String>::new(), "/a"), None);
    }
}
