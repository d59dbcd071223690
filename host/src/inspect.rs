//! `wasm-mcp inspect`: what a component is, what it imports, whether this
//! host can run it, and the tools it would publish.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker, LinkerInstance, ResourceType};
use wasmtime::Engine;

use crate::cache::ComponentCache;
use crate::catalog::{Catalog, Rejection};
use crate::plugin::{read_component, Compiled, LoadError, Plugin};
use crate::sandbox::{Sandbox, StoreState};
use crate::trust::{Admitted, TrustPolicy};

/// The tool interface every plugin must export.
pub const TOOL_EXPORT: &str = "wasm-mcp:tool/tool@0.1.0";

/// An import this host does not provide (or provides with another type).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct MissingImport {
    pub name: String,
    pub why: String,
}

/// Everything `inspect` reports.
#[derive(Debug, Serialize)]
pub struct Report {
    pub path: String,
    pub size_bytes: usize,
    pub sha256: String,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    pub missing_imports: Vec<MissingImport>,
    /// More imports are missing than the [`MAX_MISSING_IMPORTS`] named.
    pub missing_imports_cut: bool,
    /// Why the host cannot run it; `None` when it can.
    pub cannot_run: Option<String>,
    /// The tools as `tools/list` would publish them (MCP `Tool` objects).
    pub tools: Vec<serde_json::Value>,
    /// Tools the host would refuse, with the reason.
    pub refused_tools: Vec<Refused>,
}

#[derive(Debug, Serialize)]
pub struct Refused {
    pub tool: Option<String>,
    pub reason: String,
}

impl From<Rejection> for Refused {
    fn from(r: Rejection) -> Self {
        Refused {
            tool: r.tool,
            reason: r.reason,
        }
    }
}

/// Inspects the component at `path`. Errors only when the file is not a
/// compilable component (unreadable, core module, not wasm, truncated);
/// everything else is in the report.
pub async fn inspect(sandbox: &Sandbox, cache: &ComponentCache, path: &Path) -> Result<Report> {
    let bytes = read_component(path)?;
    let compiled = Compiled::new(sandbox, cache, path, &bytes).await?;
    let engine = sandbox.engine();
    let ty = compiled.component.component_type();
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    let (missing_imports, missing_imports_cut) =
        missing_imports(sandbox.linker(), engine, &compiled.component);
    let mut report = Report {
        path: path.display().to_string(),
        size_bytes: bytes.len(),
        sha256: compiled.digest.clone(),
        imports,
        exports,
        missing_imports,
        missing_imports_cut,
        cannot_run: None,
        tools: Vec::new(),
        refused_tools: Vec::new(),
    };
    report.cannot_run = if !report.missing_imports.is_empty() {
        let names: Vec<&str> = report
            .missing_imports
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        let more = if report.missing_imports_cut {
            ", and more (not checked)"
        } else {
            ""
        };
        Some(format!(
            "imports this host does not provide: {}{more}",
            names.join(", ")
        ))
    } else if !report.exports.iter().any(|e| e == TOOL_EXPORT) {
        Some(format!("does not export {TOOL_EXPORT}"))
    } else {
        None
    };
    if report.cannot_run.is_none() {
        let admitted = TrustPolicy::server_rights(sandbox).admit(path, &bytes, &compiled.digest)?;
        list_tools(sandbox, compiled, admitted, &mut report).await;
    }
    Ok(report)
}

async fn list_tools(
    sandbox: &Sandbox,
    compiled: Compiled,
    admitted: Admitted,
    report: &mut Report,
) {
    let plugin = match Plugin::from_compiled(sandbox, compiled, admitted).await {
        Ok(p) => p,
        Err(e @ (LoadError::Refused(_) | LoadError::Busy(_))) => {
            report.cannot_run = Some(format!("{e:#}"));
            return;
        }
    };
    let catalog = Catalog::build(1, &[plugin], None);
    report.tools = catalog
        .tools()
        .map(|t| serde_json::to_value(&t.tool).unwrap_or_default())
        .collect();
    report.refused_tools = catalog.rejections.into_iter().map(Refused::from).collect();
}

/// Missing imports [`missing_imports`] names, at most.
pub const MAX_MISSING_IMPORTS: usize = 64;

/// The component's imports `linker` cannot satisfy, each with the reason.
/// wasmtime's type check stops at the first unsatisfied import; each one
/// found is stubbed in a scratch copy of the linker and the check re-run,
/// so they are named one round each, up to [`MAX_MISSING_IMPORTS`]: every
/// round type-checks the whole component, so the work grows with the
/// square of the count (3,000 missing imports took 0.5 s; a hostile file's
/// tens of thousands, minutes). `true` with them: there are more.
pub fn missing_imports(
    linker: &Linker<StoreState>,
    engine: &Engine,
    component: &Component,
) -> (Vec<MissingImport>, bool) {
    let ty = component.component_type();
    let imports: Vec<(String, ComponentItem)> = ty
        .imports(engine)
        .map(|(n, i)| (n.to_string(), i.ty))
        .collect();
    let mut probe = linker.clone();
    probe.allow_shadowing(true);
    let mut missing = Vec::new();
    for _ in 0..=imports.len() {
        let Err(e) = probe.instantiate_pre(component) else {
            break;
        };
        if missing.len() == MAX_MISSING_IMPORTS {
            return (missing, true);
        }
        let headline = e.to_string();
        let Some((name, item)) = imports
            .iter()
            .find(|(n, _)| headline.contains(&format!("`{n}`")))
        else {
            missing.push(MissingImport {
                name: "?".into(),
                why: format!("{e:#}"),
            });
            break;
        };
        let why = why_missing(&e);
        missing.push(MissingImport {
            name: name.clone(),
            why,
        });
        if stub(&mut probe.root(), name, item, engine).is_err() {
            break;
        }
    }
    (missing, false)
}

/// Why an import failed wasmtime's type check, from the error's causes
/// (below its headline): an item the host lacks ("... implementation is
/// missing": the whole interface, e.g. `wasi:http`, or one of its members)
/// or one it has with another type.
fn why_missing(e: &wasmtime::Error) -> String {
    let causes: Vec<String> = e.chain().skip(1).map(|c| c.to_string()).collect();
    let absent = causes
        .last()
        .is_some_and(|c| c.ends_with("implementation is missing"));
    let kind = if absent {
        "not provided by this host"
    } else {
        "provided with another type"
    };
    format!("{kind}: {}", causes.join(": "))
}

/// Defines `name` in `li` with the type `item` expects, every function a trap.
fn stub(
    li: &mut LinkerInstance<'_, StoreState>,
    name: &str,
    item: &ComponentItem,
    engine: &Engine,
) -> wasmtime::Result<()> {
    struct Stub;
    match item {
        ComponentItem::ComponentFunc(_) => {
            li.func_new(name, |_, _, _, _| Err(wasmtime::Error::msg("stub")))?;
        }
        ComponentItem::Resource(_) => {
            li.resource(name, ResourceType::host::<Stub>(), |_, _| Ok(()))?;
        }
        ComponentItem::ComponentInstance(inst) => {
            let mut sub = li.instance(name)?;
            for (n, child) in inst.exports(engine) {
                stub(&mut sub, n, &child.ty, engine)?;
            }
        }
        ComponentItem::Type(_) => {}
        _ => return Err(wasmtime::Error::msg(format!("cannot stub {name}"))),
    }
    Ok(())
}

/// How many times its compact form (plus 64 KiB) pretty JSON may grow
/// before it is given up for the compact form: indentation is paid per
/// line, and a schema of small items nested 32 deep (within the schema
/// limits) pretty-prints ~30× larger: 256 such tools, ~1 GiB.
const MAX_PRETTY_GROWTH: usize = 4;

/// `value` as indented JSON for a person, or compact where indenting would
/// grow it more than [`MAX_PRETTY_GROWTH`] times (the writing stops there).
pub fn pretty_or_compact<T: serde::Serialize + ?Sized>(value: &T) -> String {
    let compact = serde_json::to_string(value).unwrap_or_default();
    let mut out = Bounded {
        buf: Vec::new(),
        limit: compact.len().saturating_mul(MAX_PRETTY_GROWTH) + (64 << 10),
    };
    match serde_json::to_writer_pretty(&mut out, value) {
        Ok(()) => String::from_utf8(out.buf).unwrap_or(compact),
        Err(_) => compact,
    }
}

/// Bytes written up to a limit; the write past it fails.
struct Bounded {
    buf: Vec<u8>,
    limit: usize,
}

impl std::io::Write for Bounded {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + bytes.len() > self.limit {
            return Err(std::io::Error::other("over the limit"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The report as text for a person.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!("component  {} ({} bytes)", r.path, r.size_bytes));
    line(format!("sha256     {}", r.sha256));
    match &r.cannot_run {
        None => line("runnable   yes: this host can run it".into()),
        Some(why) => line(format!("runnable   NO: {why}")),
    }
    line(format!("imports    ({})", r.imports.len()));
    for i in &r.imports {
        match r.missing_imports.iter().find(|m| &m.name == i) {
            Some(m) => line(format!("  {i}  MISSING: {}", m.why)),
            None => line(format!("  {i}")),
        }
    }
    if r.missing_imports_cut {
        line(format!(
            "  … more imports MISSING, not checked (named up to {MAX_MISSING_IMPORTS})"
        ));
    }
    line(format!("exports    {}", r.exports.join(", ")));
    line(format!("tools      ({})", r.tools.len()));
    for t in &r.tools {
        line(pretty_or_compact(t));
    }
    for t in &r.refused_tools {
        let name = t.tool.as_deref().unwrap_or("(plugin)");
        line(format!("refused    {name}: {}", t.reason));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn pretty_json_gives_way_to_compact_where_indenting_explodes() {
        let plain = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let pretty = serde_json::to_string_pretty(&plain).unwrap();
        assert_eq!(pretty_or_compact(&plain), pretty);
        // 30,000 small items 28 arrays deep (a 60 KiB schema within the
        // schema limits): each on its own line, indented ~60 spaces.
        let mut deep = Value::Array(vec![json!(0); 30_000]);
        for _ in 0..28 {
            deep = Value::Array(vec![deep]);
        }
        let hostile = json!({"type": "object", "enum": [deep]});
        let compact = serde_json::to_string(&hostile).unwrap();
        let pretty = serde_json::to_string_pretty(&hostile).unwrap();
        assert!(pretty.len() > 20 * compact.len(), "{}", pretty.len());
        assert_eq!(pretty_or_compact(&hostile), compact);
    }
}
