//! The catalog: the validated, de-duplicated, allow-listed set of tools the
//! server publishes, built from the loaded plugins. Immutable once built;
//! a plugin change builds a new one with a higher version.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{bail, Result};
use rmcp::model::{Tool, ToolAnnotations};
use wasm_mcp_protocol::{cap_description, compile_schema, parse_object_schema, valid_tool_name};

use crate::plugin::{Plugin, RawTool};

/// One published tool.
pub struct CatalogTool {
    pub tool: Tool,
    pub plugin: Arc<Plugin>,
    pub input: jsonschema::Validator,
    pub output: Option<jsonschema::Validator>,
}

/// Why a tool or plugin was left out (reported in the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub plugin: String,
    pub tool: Option<String>,
    pub reason: String,
}

pub struct Catalog {
    pub version: u64,
    /// Sorted by name: pagination order is stable.
    tools: BTreeMap<String, CatalogTool>,
    pub rejections: Vec<Rejection>,
}

fn build_tool(raw: &RawTool, plugin: &Arc<Plugin>) -> Result<CatalogTool> {
    if !valid_tool_name(&raw.name) {
        bail!("tool name {:?} is not [A-Za-z0-9_-]{{1,64}}", raw.name);
    }
    let input_schema = parse_object_schema(&raw.input_schema, "input-schema")?;
    let input = compile_schema(&input_schema, "input-schema")?;
    let (output_schema, output) = match &raw.output_schema {
        Some(text) => {
            let obj = parse_object_schema(text, "output-schema")?;
            let v = compile_schema(&obj, "output-schema")?;
            (Some(obj), Some(v))
        }
        None => (None, None),
    };
    let description = cap_description(&raw.description);
    let mut annotations = ToolAnnotations::new()
        .read_only(raw.read_only)
        .destructive(raw.destructive)
        .idempotent(raw.idempotent)
        .open_world(raw.open_world);
    annotations.title = raw.title.clone();
    let mut tool = Tool::new(raw.name.clone(), description, Arc::new(input_schema))
        .with_annotations(annotations);
    if let Some(t) = &raw.title {
        tool = tool.with_title(t.clone());
    }
    if let Some(o) = output_schema {
        tool = tool.with_raw_output_schema(Arc::new(o));
    }
    Ok(CatalogTool {
        tool,
        plugin: plugin.clone(),
        input,
        output,
    })
}

impl Catalog {
    /// Build from plugins in the given order (the first plugin defining a
    /// name wins). `allow`, when set, keeps only the listed tool names.
    pub fn build(version: u64, plugins: &[Arc<Plugin>], allow: Option<&[String]>) -> Catalog {
        let mut tools = BTreeMap::new();
        let mut rejections = Vec::new();
        for plugin in plugins {
            let pname = plugin.path.display().to_string();
            let mut seen_here = std::collections::HashSet::new();
            for raw in &plugin.tools {
                let reject = |reason: String| Rejection {
                    plugin: pname.clone(),
                    tool: Some(raw.name.clone()),
                    reason,
                };
                if !seen_here.insert(raw.name.clone()) {
                    rejections.push(reject("declared twice by the same plugin".into()));
                    continue;
                }
                if let Some(allow) = allow {
                    if !allow.iter().any(|a| a == &raw.name) {
                        continue;
                    }
                }
                if tools.contains_key(&raw.name) {
                    rejections.push(reject("name already provided by an earlier plugin".into()));
                    continue;
                }
                match build_tool(raw, plugin) {
                    Ok(t) => {
                        tools.insert(raw.name.clone(), t);
                    }
                    Err(e) => rejections.push(reject(format!("{e:#}"))),
                }
            }
        }
        Catalog {
            version,
            tools,
            rejections,
        }
    }

    pub fn get(&self, name: &str) -> Option<&CatalogTool> {
        self.tools.get(name)
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub fn tools(&self) -> impl Iterator<Item = &CatalogTool> {
        self.tools.values()
    }

    /// A page of tool definitions starting at `offset`, and the offset of the
    /// next page if any.
    pub fn page(&self, offset: usize, size: usize) -> (Vec<Tool>, Option<usize>) {
        let page: Vec<Tool> = self
            .tools
            .values()
            .skip(offset)
            .take(size)
            .map(|t| t.tool.clone())
            .collect();
        let next = offset + page.len();
        (page, (next < self.tools.len()).then_some(next))
    }

    /// Names and schemas, for change detection: a reload that yields the
    /// same fingerprint does not notify clients.
    pub fn fingerprint(&self) -> String {
        let defs: Vec<&Tool> = self.tools.values().map(|t| &t.tool).collect();
        crate::cache::sha256_hex(serde_json::to_string(&defs).unwrap_or_default().as_bytes())
    }
}
