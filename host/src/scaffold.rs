//! `wasm-mcp new`: a plugin project from an embedded template
//! (`templates/<lang>/`, `{{name}}` replaced), buildable with `./build.sh`
//! and testable with `./test.sh` (which calls the tool through
//! `wasm-mcp call`). Everything is embedded at build time (see
//! `host/build.rs`), so an installed binary needs no checkout.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// One embedded file: `group` is where it came from (`templates`, `wit`,
/// `sdk`, `lock`, `scripts`), `path` is `/`-separated, relative to it.
pub struct EmbeddedFile {
    pub group: &'static str,
    pub path: &'static str,
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

/// The placeholder replaced by the project name in template files.
pub const PLACEHOLDER: &str = "{{name}}";

/// Files every project gets besides its template: `(group, directory in
/// the project)`. The Rust SDK is copied (vendored) into the project as a
/// path dependency: it matches this host, builds offline and needs no
/// checkout of this repository; the lock file pins the versions it was
/// tested with.
fn extras(lang: &str) -> &'static [(&'static str, &'static str)] {
    match lang {
        "rust" => &[
            ("wit", "wit"),
            ("sdk", "vendor/wasm-mcp-guest"),
            ("lock", ""),
            ("scripts", ""),
        ],
        _ => &[("wit", "wit")],
    }
}

/// Languages whose template is in this build.
pub fn languages() -> BTreeSet<&'static str> {
    FILES
        .iter()
        .filter(|f| f.group == "templates")
        .filter_map(|f| f.path.split_once('/').map(|(lang, _)| lang))
        .collect()
}

/// A project name: also its tool name and its `.wasm` file name, so it
/// keeps to `[a-z][a-z0-9_-]{0,63}`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        bail!("invalid name {name:?}: use 1-64 of a-z 0-9 - _, starting with a letter");
    }
    Ok(())
}

/// Writes a new `lang` project called `name` into `dir` (created; must not
/// exist or be empty). Returns the files written.
pub fn new_project(name: &str, lang: &str, dir: &Path) -> Result<Vec<PathBuf>> {
    check_name(name)?;
    let langs = languages();
    if !langs.contains(lang) {
        let have: Vec<_> = langs.into_iter().collect();
        bail!(
            "--lang {lang}: not available in this build (templates: {})",
            have.join(", ")
        );
    }
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        bail!("{} exists and is not empty", dir.display());
    }
    let prefix = format!("{lang}/");
    let mut plan: Vec<(PathBuf, &EmbeddedFile)> = FILES
        .iter()
        .filter(|f| f.group == "templates")
        .filter_map(|f| {
            f.path
                .strip_prefix(&prefix)
                .map(|rel| (PathBuf::from(rel), f))
        })
        .collect();
    for (group, into) in extras(lang) {
        plan.extend(
            FILES
                .iter()
                .filter(|f| f.group == *group)
                .map(|f| (Path::new(into).join(f.path), f)),
        );
    }
    let mut written = Vec::new();
    for (rel, f) in plan {
        let dest = dir.join(&rel);
        write_file(&dest, f, name).with_context(|| format!("writing {}", dest.display()))?;
        written.push(dest);
    }
    Ok(written)
}

fn write_file(dest: &Path, f: &EmbeddedFile, name: &str) -> Result<()> {
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let bytes = match (f.group, std::str::from_utf8(f.bytes)) {
        ("templates", Ok(text)) => text.replace(PLACEHOLDER, name).into_bytes(),
        _ => f.bytes.to_vec(),
    };
    std::fs::write(dest, bytes)?;
    if dest.extension().is_some_and(|e| e == "sh") {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for bad in ["", "A", "1x", "a b", "a/b", "../x", "x.y", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["a", "csv-summary", "my_tool2", &"a".repeat(64)] {
            check_name(good).unwrap();
        }
    }

    #[test]
    fn rust_template_and_sdk_are_embedded() {
        assert!(languages().contains("rust"));
        for (group, path) in [
            ("sdk", "wit/tool.wit"),
            ("sdk", "src/lib.rs"),
            ("wit", "tool.wit"),
            ("lock", "Cargo.lock"),
            ("scripts", "wasm-guest-env.sh"),
            ("templates", "rust/build.sh"),
        ] {
            assert!(
                FILES.iter().any(|f| f.group == group && f.path == path),
                "{group}/{path}"
            );
        }
        assert!(!FILES.iter().any(|f| f.path.contains("target/")));
    }

    #[test]
    fn a_missing_language_is_reported_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("p");
        let e = new_project("p", "cobol", &dest).unwrap_err().to_string();
        assert!(e.contains("not available in this build"), "{e}");
        assert!(!dest.exists());
    }

    #[test]
    fn a_non_empty_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let e = new_project("p", "rust", dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("not empty"), "{e}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
            "mine"
        );
    }
}
