//! Embeds what `wasm-mcp new` writes into the binary, so an installed
//! `wasm-mcp` scaffolds projects without this repository: the plugin
//! templates (`templates/<lang>/…`), the tool contract (`wit/tool.wit`), the
//! Rust guest SDK (`plugins/wasm-mcp-guest`), the lock file its versions were
//! tested with (`plugins/Cargo.lock`) and the guest toolchain script
//! (`scripts/wasm-guest-env.sh`). Generates `$OUT_DIR/embedded.rs`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Build outputs and caches that must never be embedded.
const SKIP: &[&str] = &[
    "target",
    "node_modules",
    ".cache",
    ".toolchain",
    "__pycache__",
    ".venv",
];

fn main() {
    let host = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = host.parent().unwrap();
    let mut files = Vec::new();
    for (group, rel) in [
        ("templates", "templates"),
        ("wit", "wit"),
        ("sdk", "plugins/wasm-mcp-guest"),
    ] {
        let dir = root.join(rel);
        println!("cargo:rerun-if-changed={}", dir.display());
        walk(&dir, &dir, &mut |rel, abs| files.push((group, rel, abs)));
    }
    for (group, rel) in [
        ("lock", "plugins/Cargo.lock"),
        ("scripts", "scripts/wasm-guest-env.sh"),
    ] {
        let abs = root.join(rel);
        println!("cargo:rerun-if-changed={}", abs.display());
        let name = abs.file_name().unwrap().to_string_lossy().into_owned();
        files.push((group, name, abs));
    }
    files.sort();
    let mut out = String::from("pub static FILES: &[EmbeddedFile] = &[\n");
    for (group, rel, abs) in files {
        writeln!(
            out,
            "    EmbeddedFile {{ group: {group:?}, path: {rel:?}, bytes: include_bytes!({:?}) }},",
            abs.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("embedded.rs");
    std::fs::write(dest, out).unwrap();
}

/// Regular files under `dir` (symlinks followed), as `/`-separated paths
/// relative to `base`, skipping build outputs and `*.wasm`.
fn walk(base: &Path, dir: &Path, found: &mut dyn FnMut(String, PathBuf)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if SKIP.contains(&name.as_str()) || name.ends_with(".wasm") {
            continue;
        }
        if meta.is_dir() {
            walk(base, &path, found);
        } else if meta.is_file() {
            let rel = path.strip_prefix(base).unwrap();
            let rel: Vec<_> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            found(rel.join("/"), path);
        }
    }
}
