//! The catalog: the validated, de-duplicated, allow-listed set of tools the
//! server publishes, built from the loaded plugins. Immutable once built;
//! a plugin change builds a new one with a higher version.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value};
use wasm_mcp_protocol::text::{display_clipped, SHOWN_TEXT_BYTES};
use wasm_mcp_protocol::{
    cap_description, check_schema_text, parse_object_schema, quoted_name, shown_name,
    valid_tool_name, CheckedSchema, SchemaBudget, SchemaError, SchemaLimits, SchemaUse,
    TOOL_NAME_RULE,
};

use crate::grants::Filesystem;
use crate::plugin::{Plugin, RawTool};

/// Tools one plugin may publish; the ones declared after are refused.
pub const MAX_TOOLS_PER_PLUGIN: usize = 256;
/// Tools the whole catalog may publish (the harness refuses a server with
/// more than 1000).
pub const MAX_TOOLS: usize = 1000;
/// Longest accepted title, in chars (a longer one refuses the tool).
pub const MAX_TITLE_CHARS: usize = 256;

/// One published tool.
pub struct CatalogTool {
    pub tool: Tool,
    pub plugin: Arc<Plugin>,
    pub input: Arc<CheckedSchema>,
    pub output: Option<Arc<CheckedSchema>>,
    /// The filesystem its calls get: the plugin's grant, lowered to
    /// read-only when the tool claims to be read-only.
    pub filesystem: Filesystem,
    /// Bytes of the tool's definition in a `tools/list` result.
    pub wire_bytes: usize,
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
    /// SHA-256 of the published tool definitions (hex): what clients see.
    fingerprint: String,
    /// Sorted by name: pagination order is stable.
    tools: BTreeMap<String, CatalogTool>,
    /// Tools of loaded plugins that an allowlist (`--allow`, a grant's
    /// `tools`) keeps unpublished: the plugin that declares each.
    hidden: BTreeMap<String, Arc<Plugin>>,
    pub rejections: Vec<Rejection>,
}

/// What the regular expressions of one plugin's schemas may cost in all
/// (their count and weight, see `wasm_mcp_protocol::schema_regex`), charged
/// in declaration order, allow-listed or not. Tools past it are refused.
pub const SCHEMA_BUDGET_PER_PLUGIN: SchemaBudget = SchemaBudget::PER_SOURCE;

/// One plugin's tools as built for the catalog, once per loaded plugin
/// (kept in [`Plugin`]): a rebuild after another plugin changes, or after
/// a grant's allowlist is applied, compiles none of its schemas again.
/// Holds no `Arc<Plugin>` (it lives inside the plugin).
pub struct PluginTools {
    /// The rejection of the tools past [`MAX_TOOLS_PER_PLUGIN`].
    over_cap: Option<Rejection>,
    /// The admitted tools, in declaration order.
    declared: Vec<Declared>,
}

/// One admitted declaration.
enum Declared {
    /// Its name breaks a rule of its own (invalid, or declared twice):
    /// reported whatever the allowlist says.
    Refused(Rejection),
    /// Its name, and the tool built from it or why it could not be (reported
    /// only when the tool would be published).
    Named(String, std::result::Result<BuiltTool, Rejection>),
}

/// A published tool without its plugin.
#[derive(Clone)]
struct BuiltTool {
    tool: Tool,
    input: Arc<CheckedSchema>,
    output: Option<Arc<CheckedSchema>>,
    filesystem: Filesystem,
    wire_bytes: usize,
}

impl PluginTools {
    /// Checks each admitted declaration's name, then builds it (title,
    /// schemas), the regexes charged to one [`SCHEMA_BUDGET_PER_PLUGIN`].
    fn build(plugin: &Plugin) -> PluginTools {
        let pname = plugin.path.display().to_string();
        let (admitted, over_cap) = within_tool_cap(&pname, &plugin.tools);
        let mut seen_here = std::collections::HashSet::new();
        let mut budget = SCHEMA_BUDGET_PER_PLUGIN;
        let declared = admitted
            .iter()
            .map(|raw| {
                let reject = |reason: String| Rejection {
                    plugin: pname.clone(),
                    tool: Some(shown_name(&raw.name).into_owned()),
                    reason: display_clipped(&reason, SHOWN_TEXT_BYTES),
                };
                // First: no other rule (and no log line) sees a name that
                // breaks this one, which may be megabytes long.
                if !valid_tool_name(&raw.name) {
                    let name = quoted_name(&raw.name);
                    return Declared::Refused(reject(format!(
                        "tool name {name} is not {TOOL_NAME_RULE}"
                    )));
                }
                if !seen_here.insert(raw.name.as_str()) {
                    return Declared::Refused(reject("declared twice by the same plugin".into()));
                }
                let built =
                    build_tool(raw, plugin, &mut budget).map_err(|e| reject(format!("{e:#}")));
                Declared::Named(raw.name.clone(), built)
            })
            .collect();
        PluginTools { over_cap, declared }
    }
}

/// Parse, check the [`SchemaLimits`] and compile one of a tool's schemas,
/// its regular expressions charged to `regexes`.
fn load_schema(
    text: &str,
    schema_use: SchemaUse,
    budget: &mut SchemaBudget,
) -> Result<(Map<String, Value>, Arc<CheckedSchema>)> {
    let what = format!("{}-schema", schema_use.side());
    let limits = SchemaLimits::default();
    check_schema_text(text, &limits).with_context(|| format!("{what} refused"))?;
    let obj = parse_object_schema(text, &what)?;
    if schema_use == SchemaUse::Arguments {
        wasm_mcp_protocol::header_params::check_header_annotations(&obj)
            .map_err(|e| anyhow::anyhow!("{what} refused: {e}"))?;
    }
    let schema = Value::Object(obj.clone());
    let checked = CheckedSchema::compile_within(&schema, &limits, schema_use, budget).map_err(
        |e| match e {
            SchemaError::Limit(_) => anyhow::anyhow!("{what} refused: {e}"),
            SchemaError::Invalid(_) => anyhow::anyhow!("{what} is {e}"),
        },
    )?;
    Ok((obj, Arc::new(checked)))
}

fn check_title(title: Option<&str>) -> Result<()> {
    let chars = title.map_or(0, |t| t.chars().count());
    if chars > MAX_TITLE_CHARS {
        bail!("title is {chars} chars, over the {MAX_TITLE_CHARS}-char title limit");
    }
    Ok(())
}

fn build_tool(raw: &RawTool, plugin: &Plugin, budget: &mut SchemaBudget) -> Result<BuiltTool> {
    check_title(raw.title.as_deref())?;
    let (input_schema, input) = load_schema(&raw.input_schema, SchemaUse::Arguments, budget)?;
    let (output_schema, output) = match &raw.output_schema {
        Some(text) => {
            let (obj, v) = load_schema(text, SchemaUse::Results, budget)?;
            (Some(obj), Some(v))
        }
        None => (None, None),
    };
    let description = cap_description(&raw.description);
    let filesystem = plugin.grant.filesystem_for(raw.read_only);
    let mut annotations = annotations_for(filesystem);
    annotations.title = raw.title.clone();
    let mut tool = Tool::new(raw.name.clone(), description, Arc::new(input_schema))
        .with_annotations(annotations);
    tool.meta = Some(provenance(plugin));
    if let Some(t) = &raw.title {
        tool = tool.with_title(t.clone());
    }
    if let Some(o) = output_schema {
        tool = tool.with_raw_output_schema(Arc::new(o));
    }
    let wire_bytes = serde_json::to_vec(&tool).map_or(usize::MAX, |b| b.len());
    Ok(BuiltTool {
        tool,
        input,
        output,
        filesystem,
        wire_bytes,
    })
}

/// The hints a client sees, from the rights the tool's calls really get,
/// never from the plugin's claims: without write access it is read-only
/// (so not destructive, and repeating it changes nothing); with write
/// access it may destroy and is not known to be idempotent, whatever the
/// plugin says; no tool has a network, so none is open-world.
pub fn annotations_for(filesystem: Filesystem) -> ToolAnnotations {
    let writes = filesystem.can_write();
    ToolAnnotations::new()
        .read_only(!writes)
        .destructive(writes)
        .idempotent(!writes)
        .open_world(false)
}

/// `_meta` of a published tool: which plugin (name, sha256) provides it.
fn provenance(plugin: &Plugin) -> rmcp::model::MetaObject {
    let mut meta = Map::new();
    meta.insert("wasm-mcp/plugin".into(), Value::String(plugin.name.clone()));
    meta.insert(
        "wasm-mcp/digest".into(),
        Value::String(plugin.digest.clone()),
    );
    rmcp::model::MetaObject(meta)
}

/// The tools of one plugin that fit [`MAX_TOOLS_PER_PLUGIN`] (declaration
/// order), and the rejection of the rest.
fn within_tool_cap<'a>(plugin: &str, raw: &'a [RawTool]) -> (&'a [RawTool], Option<Rejection>) {
    if raw.len() <= MAX_TOOLS_PER_PLUGIN {
        return (raw, None);
    }
    let rejection = Rejection {
        plugin: plugin.to_string(),
        tool: None,
        reason: format!(
            "plugin declares {} tools, over the limit of {MAX_TOOLS_PER_PLUGIN} per plugin: the last {} were refused",
            raw.len(),
            raw.len() - MAX_TOOLS_PER_PLUGIN
        ),
    };
    (&raw[..MAX_TOOLS_PER_PLUGIN], Some(rejection))
}

impl CatalogTool {
    fn of(b: BuiltTool, plugin: &Arc<Plugin>) -> CatalogTool {
        CatalogTool {
            tool: b.tool,
            plugin: plugin.clone(),
            input: b.input,
            output: b.output,
            filesystem: b.filesystem,
            wire_bytes: b.wire_bytes,
        }
    }
}

impl Catalog {
    /// Build from plugins in the given order (the first plugin defining a
    /// name wins). `allow`, when set, keeps only the listed tool names.
    pub fn build(version: u64, plugins: &[Arc<Plugin>], allow: Option<&[String]>) -> Catalog {
        Self::build_after(version, plugins, allow, None, &BTreeSet::new())
    }

    /// [`Catalog::build`] for a catalog that replaces `before`: a name
    /// published there keeps its plugin while that plugin still declares
    /// it, whatever the file order. A plugin dropped in later whose file
    /// name sorts first took over `read_file` and `write_file` (and their
    /// arguments) from the plugin that published them. A name whose plugin
    /// is in `failing` (its file is there, its new version failed to load)
    /// stays that plugin's, unserved, until the file loads or is removed:
    /// a half-written upgrade handed `read_file` and `write_file` to another
    /// loaded plugin until the server restarted (a helper's find).
    pub fn build_after(
        version: u64,
        plugins: &[Arc<Plugin>],
        allow: Option<&[String]>,
        before: Option<&Catalog>,
        failing: &BTreeSet<String>,
    ) -> Catalog {
        let owner_before = |name: &str| before.and_then(|c| c.get(name)).map(|t| &t.plugin.name);
        let mut tools: BTreeMap<String, CatalogTool> = BTreeMap::new();
        let mut hidden = BTreeMap::new();
        let mut rejections = Vec::new();
        for plugin in plugins {
            let built = plugin
                .built_tools
                .get_or_init(|| PluginTools::build(plugin));
            rejections.extend(built.over_cap.clone());
            for declared in &built.declared {
                let (name, tool) = match declared {
                    Declared::Refused(r) => {
                        rejections.push(r.clone());
                        continue;
                    }
                    Declared::Named(name, tool) => (name, tool),
                };
                let allowed = allow.is_none_or(|a| a.iter().any(|n| n == name));
                if !allowed || !plugin.grant.allows_tool(name) {
                    hidden.entry(name.clone()).or_insert_with(|| plugin.clone());
                    continue;
                }
                let reject = |reason: String| Rejection {
                    plugin: plugin.path.display().to_string(),
                    tool: Some(name.clone()),
                    reason,
                };
                if let Some(owner) = owner_before(name).filter(|o| failing.contains(*o)) {
                    rejections.push(reject(format!(
                        "name reserved for {owner}, which published it and whose file failed to load; it stays {owner}'s until that file loads or is removed"
                    )));
                    continue;
                }
                if let Some(holder) = tools.get(name) {
                    let holder_path = holder.plugin.path.display().to_string();
                    if owner_before(name) != Some(&plugin.name) {
                        rejections.push(reject(format!("name already provided by {holder_path}")));
                        continue;
                    }
                    // This plugin published it before: the other yields.
                    rejections.push(Rejection {
                        plugin: holder_path,
                        tool: Some(name.clone()),
                        reason: format!(
                            "name already published by {} (a name keeps its plugin)",
                            plugin.path.display()
                        ),
                    });
                    tools.remove(name);
                }
                if tools.len() >= MAX_TOOLS {
                    rejections.push(reject(format!(
                        "the catalog already holds {MAX_TOOLS} tools (the limit)"
                    )));
                    continue;
                }
                match tool {
                    Ok(t) => {
                        tools.insert(name.clone(), CatalogTool::of(t.clone(), plugin));
                    }
                    Err(r) => rejections.push(r.clone()),
                }
            }
        }
        hidden.retain(|name, _| !tools.contains_key(name));
        let defs: Vec<&Tool> = tools.values().map(|t| &t.tool).collect();
        let fingerprint = serde_json::to_string(&defs).unwrap_or_default();
        Catalog {
            version,
            fingerprint: crate::cache::sha256_hex(fingerprint.as_bytes()),
            tools,
            hidden,
            rejections,
        }
    }

    pub fn get(&self, name: &str) -> Option<&CatalogTool> {
        self.tools.get(name)
    }

    /// The plugin whose tool `name` an allowlist keeps unpublished.
    pub fn hidden(&self, name: &str) -> Option<&Arc<Plugin>> {
        self.hidden.get(name)
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

    /// How many plugins publish a tool whose calls may add to the worktree
    /// (what the disk shares count): not one whose grant lets it add
    /// nothing (shares of 0), which may still delete and rename.
    pub fn writers(&self) -> usize {
        let writing = self
            .tools()
            .filter(|t| t.filesystem.can_write() && t.plugin.grant.disk.may_add());
        let names: std::collections::BTreeSet<&str> =
            writing.map(|t| t.plugin.name.as_str()).collect();
        names.len()
    }

    /// A page of tool definitions starting at `offset`, and the offset of the
    /// next page if any.
    pub fn page(&self, offset: usize, size: usize) -> (Vec<Tool>, Option<usize>) {
        self.page_within(offset, size, usize::MAX)
    }

    /// Like [`Catalog::page`], but the page also stops before its tool
    /// definitions exceed `max_bytes` (it always holds at least one tool, and
    /// one tool is bounded by the title, description and schema caps).
    pub fn page_within(
        &self,
        offset: usize,
        size: usize,
        max_bytes: usize,
    ) -> (Vec<Tool>, Option<usize>) {
        let mut bytes = 0usize;
        let page: Vec<Tool> = self
            .tools
            .values()
            .skip(offset)
            .take(size)
            .take_while(|t| {
                let first = bytes == 0;
                bytes = bytes.saturating_add(t.wire_bytes.saturating_add(1));
                first || bytes <= max_bytes
            })
            .map(|t| t.tool.clone())
            .collect();
        let next = offset + page.len();
        (page, (next < self.tools.len()).then_some(next))
    }

    /// Names and schemas, for change detection: a reload that yields the
    /// same fingerprint does not notify clients.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// What a `tools/list` cursor names: the published list (its
    /// fingerprint's first 64 bits), not this process's count of reloads,
    /// so replicas with the same tools take each other's cursors and one
    /// with other tools refuses them as stale.
    pub fn list_id(&self) -> u64 {
        u64::from_str_radix(&self.fingerprint[..16], 16).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(name: &str) -> RawTool {
        RawTool {
            name: name.into(),
            title: None,
            description: String::new(),
            input_schema: r#"{"type":"object"}"#.into(),
            output_schema: None,
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        }
    }

    #[test]
    fn tools_past_the_per_plugin_cap_are_refused_in_declaration_order() {
        let few: Vec<RawTool> = (0..MAX_TOOLS_PER_PLUGIN)
            .map(|i| raw(&format!("t{i}")))
            .collect();
        let (kept, rejection) = within_tool_cap("p", &few);
        assert_eq!((kept.len(), rejection), (MAX_TOOLS_PER_PLUGIN, None));
        let many: Vec<RawTool> = (0..5000).map(|i| raw(&format!("t{i}"))).collect();
        let (kept, rejection) = within_tool_cap("p", &many);
        assert_eq!(kept.len(), MAX_TOOLS_PER_PLUGIN);
        assert_eq!(kept.last().unwrap().name, "t255");
        let reason = rejection.unwrap().reason;
        assert!(
            reason.contains("5000 tools, over the limit of 256"),
            "{reason}"
        );
    }

    #[test]
    fn titles_and_schemas_over_their_caps_are_refused_with_the_limit_named() {
        assert!(check_title(Some(&"é".repeat(MAX_TITLE_CHARS))).is_ok());
        let e = check_title(Some(&"x".repeat(10_000))).unwrap_err();
        assert!(e.to_string().contains("256-char title limit"), "{e}");
        let huge = format!(
            r#"{{"type":"object","description":"{}"}}"#,
            "x".repeat(100_000)
        );
        let empty = || SchemaBudget {
            subschemas: usize::MAX,
            patterns: 0,
            weight: 0,
        };
        let e = load_schema(&huge, SchemaUse::Arguments, &mut empty())
            .err()
            .unwrap();
        assert!(
            format!("{e:#}").contains("input-schema refused: schema is"),
            "{e:#}"
        );
        let cyclic = r##"{"type":"object","properties":{"x":{"$ref":"#"}}}"##;
        let e = load_schema(cyclic, SchemaUse::Results, &mut empty())
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("output-schema refused: `$ref` cycle"),
            "{e}"
        );
        assert!(load_schema(r#"{"type":"object"}"#, SchemaUse::Arguments, &mut empty()).is_ok());
        // An `x-mcp-header` that conforming 2026-07-28 clients drop the
        // tool for (they never showed it, and its calls were refused for a
        // header no client can send): refused at load, saying why.
        let bad =
            r#"{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Bad Name"}}}"#;
        let e = load_schema(bad, SchemaUse::Arguments, &mut empty())
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("input-schema refused: property `a`: x-mcp-header"),
            "{e}"
        );
    }

    /// A result is checked as the SDKs check it again (floating-point
    /// `multipleOf`); arguments by the exact rule.
    #[test]
    fn results_meet_the_clients_multiple_of() {
        let text = r#"{"type":"object","properties":{"price":{"multipleOf":0.01}}}"#;
        let value = serde_json::json!({"price": 19.99});
        let (_, results) =
            load_schema(text, SchemaUse::Results, &mut { SchemaBudget::UNLIMITED }).unwrap();
        let (_, arguments) =
            load_schema(text, SchemaUse::Arguments, &mut { SchemaBudget::UNLIMITED }).unwrap();
        assert!(!results.is_valid(&value));
        assert!(arguments.is_valid(&value));
    }

    /// A schema of `n` properties, each with its own `pattern`.
    fn patterned(n: usize, pattern: &str) -> String {
        let props: Map<String, Value> = (0..n)
            .map(|i| {
                (
                    format!("p{i}"),
                    serde_json::json!({"pattern": format!("{pattern}{i}")}),
                )
            })
            .collect();
        serde_json::json!({"type": "object", "properties": props}).to_string()
    }

    /// A plugin's subschemas are bounded in all, not only per schema: 256
    /// tools with two schemas of 1,600 properties each, inside every
    /// per-schema limit, held 1.5 GB compiled (a helper's find). Six such
    /// schemas fit a plugin's budget; the seventh is refused before it is
    /// compiled, and what is left stays for smaller ones.
    #[test]
    fn a_plugin_s_subschemas_are_bounded_in_all() {
        let props: serde_json::Map<String, Value> = (0..1600)
            .map(|i| (format!("p{i}"), serde_json::json!({"type": "string"})))
            .collect();
        let text = serde_json::json!({"type": "object", "properties": props}).to_string();
        let mut left = SCHEMA_BUDGET_PER_PLUGIN;
        for _ in 0..6 {
            load_schema(&text, SchemaUse::Arguments, &mut left).unwrap();
        }
        assert_eq!(left.subschemas, 10_000 - 6 * 1601);
        let e = load_schema(&text, SchemaUse::Arguments, &mut left)
            .err()
            .unwrap();
        assert!(
            format!("{e:#}").contains("1601 subschemas, over the 394 left"),
            "{e:#}"
        );
        load_schema(r#"{"type":"object"}"#, SchemaUse::Arguments, &mut left).unwrap();
        assert_eq!(left.subschemas, 393);
    }

    /// A plugin's regular expressions are bounded in all, not only per
    /// schema: one with 40 in each of five tools' schemas gets its first six
    /// schemas (240) compiled, the next refused before it is compiled.
    #[test]
    fn a_plugin_s_regexes_are_bounded_in_all() {
        let text = patterned(40, "^a+$");
        let mut left = SCHEMA_BUDGET_PER_PLUGIN;
        for _ in 0..6 {
            load_schema(&text, SchemaUse::Arguments, &mut left).unwrap();
        }
        assert_eq!(left.patterns, SCHEMA_BUDGET_PER_PLUGIN.patterns - 240);
        let e = load_schema(&text, SchemaUse::Arguments, &mut left)
            .err()
            .unwrap();
        assert!(
            format!("{e:#}").contains("40 regular expressions")
                && e.to_string().contains("16 regexes of weight"),
            "{e:#}"
        );
        // 64 in one schema is the most; 65 is refused whatever the budget.
        let mut unbudgeted = SchemaBudget::UNLIMITED;
        let e = load_schema(
            &patterned(65, "^a+$"),
            SchemaUse::Arguments,
            &mut unbudgeted,
        )
        .err()
        .unwrap();
        assert!(
            format!("{e:#}").contains("more than 64 regular expressions"),
            "{e:#}"
        );
    }
}
