//! `componentize <in.wasm> <out.wasm> [--adapter reactor|command|none] [--list-imports]`
//!
//! Turns a wasm32-wasip1 core module (built with wit-bindgen against
//! `wit/tool.wit`) into a WASI 0.2 component using the wasi preview1
//! adapter, validates it and checks that it exports the tool interface.
//! With `--adapter none` the module must import no preview1 function (its
//! WASI calls are all `wasi:*` 0.2 imports, e.g. through
//! `wasm_mcp_guest::fs`), and the component has no adapter instance.
//! An input that is already a component is only validated and copied.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
    WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};
use wit_component::{ComponentEncoder, DecodedWasm};
use wit_parser::{Resolve, WorldItem, WorldKey};

/// The interface every tool plugin must export.
pub const TOOL_INTERFACE: &str = "wasm-mcp:tool/tool@0.1.0";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adapter {
    Reactor,
    Command,
    /// No adapter: a module that imports preview1 functions is refused.
    None,
}

#[derive(Debug)]
struct Args {
    input: PathBuf,
    output: PathBuf,
    adapter: Adapter,
    list_imports: bool,
    /// The export the component must have (`--export`; the tool interface
    /// unless a foreign component, e.g. a peer host's, is being built).
    export: String,
}

const USAGE: &str = "usage: componentize <in.wasm> <out.wasm> [--adapter reactor|command|none] \
     [--export NAME] [--list-imports]";

fn parse_args(args: &[String]) -> Result<Args> {
    let mut pos = Vec::new();
    let mut adapter = Adapter::Reactor;
    let mut list_imports = false;
    let mut export = TOOL_INTERFACE.to_string();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--adapter" => {
                let v = it
                    .next()
                    .context("--adapter needs a value (reactor|command|none)")?;
                adapter = parse_adapter(v)?;
            }
            s if s.starts_with("--adapter=") => adapter = parse_adapter(&s["--adapter=".len()..])?,
            "--export" => export = it.next().context("--export needs a name")?.clone(),
            "--list-imports" => list_imports = true,
            "-h" | "--help" => bail!("{USAGE}"),
            s if s.starts_with("--") => bail!("unknown option {s}\n{USAGE}"),
            _ => pos.push(PathBuf::from(a)),
        }
    }
    let [input, output]: [PathBuf; 2] = pos
        .try_into()
        .map_err(|_| anyhow::anyhow!("expected exactly two paths\n{USAGE}"))?;
    Ok(Args {
        input,
        output,
        adapter,
        list_imports,
        export,
    })
}

fn parse_adapter(v: &str) -> Result<Adapter> {
    match v {
        "reactor" => Ok(Adapter::Reactor),
        "command" => Ok(Adapter::Command),
        "none" => Ok(Adapter::None),
        _ => bail!("--adapter must be `reactor`, `command` or `none`, not `{v}`"),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Module,
    Component,
}

fn kind_of(bytes: &[u8]) -> Result<Kind> {
    if bytes.len() < 8 || &bytes[0..4] != b"\0asm" {
        bail!("not a WebAssembly binary (missing `\\0asm` magic)");
    }
    if wasmparser::Parser::is_component(bytes) {
        Ok(Kind::Component)
    } else if wasmparser::Parser::is_core_wasm(bytes) {
        Ok(Kind::Module)
    } else {
        bail!("unsupported WebAssembly binary version/layer")
    }
}

/// What a validated tool component looks like from the outside.
#[derive(Debug)]
pub struct Summary {
    pub imports: Vec<String>,
    pub exports: Vec<String>,
}

fn item_names(resolve: &Resolve, items: &[(&WorldKey, &WorldItem)]) -> Vec<String> {
    items
        .iter()
        .map(|(key, item)| match (key, item) {
            (WorldKey::Interface(id), _) => resolve
                .id_of(*id)
                .unwrap_or_else(|| resolve.name_world_key(key)),
            (WorldKey::Name(n), WorldItem::Function(_)) => format!("func {n}"),
            (WorldKey::Name(n), WorldItem::Interface { id, .. }) => {
                resolve.id_of(*id).unwrap_or_else(|| n.clone())
            }
            (WorldKey::Name(n), WorldItem::Type { .. }) => format!("type {n}"),
        })
        .collect()
}

/// Validates `component` and checks it exports `export`: an interface id
/// (`ns:pkg/iface@ver`) or a world-level function (`func NAME`), as listed
/// in [`Summary::exports`].
fn check_component(component: &[u8], export: &str) -> Result<Summary> {
    let mut v = wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::default());
    v.validate_all(component)
        .context("the component does not validate")?;
    let decoded = wit_component::decode(component).context("cannot decode the component's WIT")?;
    let (resolve, world) = match decoded {
        DecodedWasm::Component(r, w) => (r, w),
        DecodedWasm::WitPackage(..) => bail!("input is a WIT package, not a component"),
    };
    let w = &resolve.worlds[world];
    let imports = item_names(&resolve, &w.imports.iter().collect::<Vec<_>>());
    let exports = item_names(&resolve, &w.exports.iter().collect::<Vec<_>>());
    if !exports.iter().any(|e| e == export) {
        let hint = if export == TOOL_INTERFACE {
            "; was it built with wit-bindgen against wit/tool.wit, world `tool-plugin`?"
        } else {
            ""
        };
        bail!(
            "the component does not export `{export}` (exports: [{}]){hint}",
            exports.join(", ")
        );
    }
    Ok(Summary { imports, exports })
}

/// Turns `input` (core module or component) into a validated tool component.
pub fn componentize(input: &[u8], adapter: Adapter) -> Result<(Vec<u8>, Summary)> {
    componentize_exporting(input, adapter, TOOL_INTERFACE)
}

/// Like [`componentize`], but the component must export `export` instead of
/// the tool interface (see [`check_component`]).
pub fn componentize_exporting(
    input: &[u8],
    adapter: Adapter,
    export: &str,
) -> Result<(Vec<u8>, Summary)> {
    let component = match kind_of(input)? {
        Kind::Component => input.to_vec(),
        Kind::Module => encode_module(input, adapter)?,
    };
    let summary = check_component(&component, export)?;
    Ok((component, summary))
}

fn encode_module(module: &[u8], adapter: Adapter) -> Result<Vec<u8>> {
    let adapter_bytes = match adapter {
        Adapter::Reactor => Some(WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER),
        Adapter::Command => Some(WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER),
        Adapter::None => {
            let p1 = preview1_imports(module)?;
            if !p1.is_empty() {
                bail!(
                    "--adapter none: the module imports wasi preview1 functions ({}), \
                     which only the adapter provides",
                    p1.join(", ")
                );
            }
            None
        }
    };
    let mut encoder = ComponentEncoder::default();
    let encoder = encoder.validate(true).module(module).context(
        "cannot read the core module (no `component-type` custom section? \
         it must be built with wit-bindgen)",
    )?;
    if let Some(bytes) = adapter_bytes {
        encoder
            .adapter(WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, bytes)
            .context("cannot load the wasi preview1 adapter")?;
    }
    encoder.encode().context("cannot encode the component")
}

/// The names of the functions `module` imports from wasi preview1.
fn preview1_imports(module: &[u8]) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        if let wasmparser::Payload::ImportSection(imports) = payload? {
            for import in imports.into_imports() {
                let import = import?;
                if import.module == WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME {
                    names.push(import.name.to_string());
                }
            }
        }
    }
    Ok(names)
}

fn run(args: &Args) -> Result<Summary> {
    let input = std::fs::read(&args.input)
        .with_context(|| format!("cannot read {}", args.input.display()))?;
    let (component, summary) = componentize_exporting(&input, args.adapter, &args.export)
        .with_context(|| format!("{}: not a valid tool plugin", args.input.display()))?;
    write_atomic(&args.output, &component)?;
    Ok(summary)
}

/// Writes `bytes` to `path` through a temporary file and a rename. Only a
/// regular file (or nothing) is ever replaced: a directory, symlink, device
/// node or FIFO at `path` (or at the temporary path) is refused untouched.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let tmp = path.with_extension("wasm.tmp");
    ensure_replaceable(path)?;
    ensure_replaceable(&tmp)?;
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    std::io::Write::write_all(&mut f, bytes)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    drop(f);
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Ok when `path` does not exist or is a regular file (not followed if it
/// is a symlink).
fn ensure_replaceable(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot inspect {}", path.display())),
        Ok(m) if m.file_type().is_file() => Ok(()),
        Ok(m) => bail!(
            "refusing to replace {}: not a regular file ({:?})",
            path.display(),
            m.file_type()
        ),
    }
}

/// The command line (`argv` without the program name): componentize,
/// report on stderr (imports on stdout with `--list-imports`).
pub fn cli(argv: &[String]) -> ExitCode {
    let result = parse_args(argv).and_then(|a| run(&a).map(|s| (a, s)));
    match result {
        Ok((a, s)) => {
            eprintln!(
                "componentize: {} ok ({} imports, exports {})",
                a.output.display(),
                s.imports.len(),
                s.exports.join(", ")
            );
            if a.list_imports {
                for i in &s.imports {
                    println!("{i}");
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("componentize: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn refuses_non_wasm_input() {
        let err = componentize(b"#!/bin/sh\necho hi\n", Adapter::Reactor).unwrap_err();
        assert!(
            format!("{err:#}").contains("not a WebAssembly binary"),
            "{err:#}"
        );
    }

    #[test]
    fn refuses_module_without_component_type_section() {
        // The smallest valid core module: magic + version 1, no sections.
        let empty = b"\0asm\x01\0\0\0";
        assert_eq!(kind_of(empty).unwrap(), Kind::Module);
        assert!(componentize(empty, Adapter::Reactor).is_err());
    }

    #[test]
    fn refuses_component_without_tool_export() {
        // The smallest valid component: magic + component layer, no sections.
        let empty = b"\0asm\x0d\0\x01\0";
        assert_eq!(kind_of(empty).unwrap(), Kind::Component);
        let err = componentize(empty, Adapter::Reactor).unwrap_err();
        assert!(format!("{err:#}").contains(TOOL_INTERFACE), "{err:#}");
    }

    /// A core module (with its `component-type` section) for a world that
    /// exports `read-file` as a plain function, like wassette's
    /// `examples/filesystem-rs`: not a tool plugin.
    fn foreign_module() -> Vec<u8> {
        let mut resolve = Resolve::default();
        let pkg = resolve
            .push_str(
                "fs.wit",
                "package component:fs;\nworld fs { export read-file: func(path: string) -> result<string, string>; }",
            )
            .unwrap();
        let world = resolve.select_world(&[pkg], Some("fs")).unwrap();
        let mut module =
            wit_component::dummy_module(&resolve, world, wit_parser::ManglingAndAbi::Standard32);
        wit_component::embed_component_metadata(
            &mut module,
            &resolve,
            world,
            wit_component::StringEncoding::UTF8,
            false,
        )
        .unwrap();
        module
    }

    #[test]
    fn a_foreign_component_needs_its_export_named() {
        let module = foreign_module();
        let err = componentize(&module, Adapter::Reactor).unwrap_err();
        assert!(format!("{err:#}").contains(TOOL_INTERFACE), "{err:#}");
        let (component, summary) =
            componentize_exporting(&module, Adapter::Reactor, "func read-file").unwrap();
        assert_eq!(kind_of(&component).unwrap(), Kind::Component);
        assert_eq!(summary.exports, ["func read-file"]);
        let err = componentize_exporting(&module, Adapter::Reactor, "func write-file").unwrap_err();
        assert!(format!("{err:#}").contains("`func write-file`"), "{err:#}");
    }

    #[test]
    fn without_the_adapter_a_module_must_not_import_preview1() {
        // A type (i32 x4 -> i32) and one import of it: preview1's fd_write.
        let mut m = b"\0asm\x01\0\0\0\x01\x09\x01\x60\x04\x7f\x7f\x7f\x7f\x01\x7f".to_vec();
        m.extend_from_slice(b"\x02\x23\x01\x16wasi_snapshot_preview1\x08fd_write\x00\x00");
        assert_eq!(preview1_imports(&m).unwrap(), ["fd_write"]);
        let err = componentize(&m, Adapter::None).unwrap_err();
        assert!(
            format!("{err:#}").contains("preview1 functions (fd_write)"),
            "{err:#}"
        );

        let module = foreign_module();
        assert!(preview1_imports(&module).unwrap().is_empty());
        let (component, summary) =
            componentize_exporting(&module, Adapter::None, "func read-file").unwrap();
        assert_eq!(kind_of(&component).unwrap(), Kind::Component);
        assert!(summary.imports.is_empty(), "{:?}", summary.imports);
    }

    #[test]
    fn only_regular_files_are_replaced() {
        let dir = std::env::temp_dir().join(format!("componentize-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a_dir")).unwrap();
        std::fs::write(dir.join("target.txt"), "keep").unwrap();
        std::os::unix::fs::symlink(dir.join("target.txt"), dir.join("link.wasm")).unwrap();
        let fifo = dir.join("fifo.wasm");
        let have_fifo = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        let mut refused = vec![dir.join("a_dir"), dir.join("link.wasm")];
        if have_fifo {
            refused.push(fifo);
        }
        for p in &refused {
            let err = write_atomic(p, b"new").unwrap_err();
            assert!(format!("{err:#}").contains("not a regular file"), "{err:#}");
        }
        assert!(dir.join("a_dir").is_dir());
        assert!(std::fs::symlink_metadata(dir.join("link.wasm"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(dir.join("target.txt")).unwrap(),
            "keep"
        );
        // A regular file (or nothing) is replaced.
        write_atomic(&dir.join("target.txt"), b"new").unwrap();
        write_atomic(&dir.join("fresh.wasm"), b"new").unwrap();
        assert_eq!(std::fs::read(dir.join("target.txt")).unwrap(), b"new");
        assert_eq!(std::fs::read(dir.join("fresh.wasm")).unwrap(), b"new");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parses_args() {
        let a = parse_args(&s(&["a.wasm", "b.wasm", "--adapter", "command"])).unwrap();
        assert_eq!(a.adapter, Adapter::Command);
        assert_eq!(a.input, PathBuf::from("a.wasm"));
        let a = parse_args(&s(&["a.wasm", "b.wasm"])).unwrap();
        assert_eq!(a.adapter, Adapter::Reactor);
        assert!(parse_args(&s(&["a.wasm"])).is_err());
        assert!(parse_args(&s(&["a", "b", "--adapter", "proxy"])).is_err());
        let a = parse_args(&s(&["a", "b", "--adapter=none"])).unwrap();
        assert_eq!(a.adapter, Adapter::None);
        assert!(parse_args(&s(&["a", "b", "--bogus"])).is_err());
        assert_eq!(a.export, TOOL_INTERFACE);
        let a = parse_args(&s(&["a", "b", "--export", "func read-file"])).unwrap();
        assert_eq!(a.export, "func read-file");
        assert!(parse_args(&s(&["a", "b", "--export"])).is_err());
    }
}
