//! `tools/list` discovery with hard limits and schema checks.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientRequest, ListToolsRequest, ListToolsResult, PaginatedRequestParams};
use serde::Deserialize;
use serde_json::Value;
use wasm_mcp_protocol::MissingType;

use crate::mcp::connection::ConnectionHandle;
use crate::run::policy::ServerPolicy;
use crate::tools::faults::CallFault;
use crate::tools::naming::{local_name, Binding};
use crate::tools::tool::Tool;
use wasm_mcp_protocol::{CheckedSchema, SchemaBudget, SchemaLimits, SchemaUse};

pub const MAX_PAGES: usize = 100;
pub const MAX_TOOLS: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("tools/list request failed: {0}")]
    Request(#[from] CallFault),
    #[error("malformed tools/list result: {0}")]
    Malformed(String),
    #[error("duplicate tool name `{0}`")]
    DuplicateName(String),
    #[error("server repeated cursor `{0}`")]
    RepeatedCursor(String),
    #[error("more than {MAX_PAGES} tools/list pages")]
    TooManyPages,
    #[error("more than {MAX_TOOLS} tools")]
    TooManyTools,
    #[error("tool `{tool}`: inputSchema is not a JSON object schema")]
    NonObjectInputSchema { tool: String },
    #[error("tool `{tool}`: outputSchema is not a JSON object schema")]
    NonObjectOutputSchema { tool: String },
    #[error("tool `{tool}`: invalid {which} schema: {message}")]
    InvalidSchema {
        tool: String,
        which: &'static str,
        message: String,
    },
    #[error("allowed tools missing on server: {0:?}")]
    MissingAllowedTools(Vec<String>),
}

/// A `tools/list` entry as the server sent it, read leniently (schemas kept as
/// raw JSON) so a broken entry is reported by name, or skipped when not exposed.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedTool {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub input_schema: Value,
    #[serde(default)]
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub annotations: Option<Value>,
    /// `execution` (2025-11-25): `taskSupport` says whether the tool can,
    /// or must, be called as a task.
    #[serde(default)]
    pub execution: Option<Value>,
}

impl ListedTool {
    /// The tool must be called as a task (`execution.taskSupport = "required"`).
    fn requires_task(&self) -> bool {
        self.execution
            .as_ref()
            .and_then(|e| e.get("taskSupport"))
            .and_then(Value::as_str)
            == Some("required")
    }
}

/// A `tools/list` entry that could not be read as a tool.
#[derive(Debug, Clone)]
pub struct BrokenEntry {
    /// Its `name`, when that at least is a string.
    pub name: Option<String>,
    pub error: String,
}

/// Every entry of every page, readable or not.
#[derive(Debug, Default)]
pub struct Listing {
    pub tools: Vec<ListedTool>,
    pub broken: Vec<BrokenEntry>,
}

/// A listed tool that is not exposed, and why. Recorded in the trace.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SkippedTool {
    pub name: String,
    pub reason: String,
}

/// What discovery keeps from one server.
#[derive(Debug, Default)]
pub struct Selection {
    pub tools: Vec<Tool>,
    pub skipped: Vec<SkippedTool>,
}

/// Split one `tools/list` result into rmcp's typed [`ListToolsResult`]
/// (without its tools) and the raw tool entries, read one by one so a broken
/// entry is reported with its own error (and an unexposed one can be skipped).
fn split_page(v: Value) -> Result<(ListToolsResult, Vec<Value>), DiscoveryError> {
    let Value::Object(mut obj) = v else {
        return Err(DiscoveryError::Malformed("result is not an object".into()));
    };
    let Some(Value::Array(entries)) = obj.insert("tools".into(), Value::Array(Vec::new())) else {
        return Err(DiscoveryError::Malformed("missing `tools` array".into()));
    };
    let page = serde_json::from_value(Value::Object(obj))
        .map_err(|e| DiscoveryError::Malformed(e.to_string()))?;
    Ok((page, entries))
}

/// Fetch every page of `tools/list`.
pub async fn list_all(
    conn: &ConnectionHandle,
    timeout: Duration,
) -> Result<Listing, DiscoveryError> {
    let mut listing = Listing::default();
    let mut count = 0usize;
    let mut seen_cursors = HashSet::new();
    let mut cursor: Option<String> = None;
    for page in 0.. {
        if page >= MAX_PAGES {
            return Err(DiscoveryError::TooManyPages);
        }
        let params = cursor
            .clone()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let req = ClientRequest::ListToolsRequest(match params {
            Some(p) => ListToolsRequest::with_param(p),
            None => ListToolsRequest::default(),
        });
        let (page, entries) = split_page(conn.request(req, timeout).await?)?;
        for t in entries {
            count += 1;
            if count > MAX_TOOLS {
                return Err(DiscoveryError::TooManyTools);
            }
            let name = t.get("name").and_then(Value::as_str).map(str::to_string);
            match serde_json::from_value::<ListedTool>(t) {
                Ok(tool) => listing.tools.push(tool),
                Err(e) => listing.broken.push(BrokenEntry {
                    name,
                    error: e.to_string(),
                }),
            }
        }
        // An empty cursor ends the list, as the official SDKs read it (a
        // server sending `"nextCursor": ""` was refused as repeating it).
        let Some(c) = page.next_cursor.filter(|c| !c.is_empty()) else {
            break;
        };
        if !seen_cursors.insert(c.clone()) {
            return Err(DiscoveryError::RepeatedCursor(c));
        }
        cursor = Some(c);
    }
    Ok(listing)
}

/// The client accepts an object schema without `"type"` (the server does not).
fn is_object_schema(v: &Value) -> bool {
    wasm_mcp_protocol::is_object_schema(v, MissingType::Allow)
}

/// Which discovery of a server this is. The policy's allowed tools must
/// all be there at the first; at a later one (after `list_changed` or a
/// reconnect) one that went away is skipped with a reason, and the run goes
/// on with the others: the run failed when its own server's hot reload
/// removed one allowed tool (a helper's find).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discovery {
    First,
    Again,
}

/// Apply policy and checks to a listing: broken entries the policy would
/// expose refuse the server, naming the tool; the others are skipped.
pub fn select_listing(
    policy: &ServerPolicy,
    listing: Listing,
    when: Discovery,
) -> Result<Selection, DiscoveryError> {
    let mut skipped = Vec::new();
    for b in listing.broken {
        match b.name {
            Some(name) if policy.is_exposed(&name) => {
                return Err(DiscoveryError::Malformed(format!(
                    "tool `{name}`: {}",
                    b.error
                )))
            }
            name => skipped.push(SkippedTool {
                name: name.unwrap_or_else(|| "(no name)".into()),
                reason: format!("unreadable tools/list entry: {}", b.error),
            }),
        }
    }
    let mut selection = select(policy, listing.tools, when)?;
    skipped.append(&mut selection.skipped);
    selection.skipped = skipped;
    Ok(selection)
}

/// Apply policy and checks to the readable tools.
///
/// Limits are checked over the whole listing; everything else only for the
/// tools the policy exposes. A problem confined to a tool that is not exposed
/// (a duplicate name, a schema the client cannot compile) skips that tool;
/// the same problem with an exposed tool refuses the server. Tools that must
/// be called as tasks are skipped: the harness does not make task calls.
pub fn select(
    policy: &ServerPolicy,
    raw: Vec<ListedTool>,
    when: Discovery,
) -> Result<Selection, DiscoveryError> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for t in &raw {
        *counts.entry(t.name.as_str()).or_default() += 1;
    }
    let missing: Vec<String> = policy
        .required_tools()
        .into_iter()
        .filter(|t| !counts.contains_key(*t))
        .map(str::to_string)
        .collect();
    let mut out = Selection::default();
    if !missing.is_empty() {
        if when == Discovery::First {
            return Err(DiscoveryError::MissingAllowedTools(missing));
        }
        out.skipped
            .extend(missing.into_iter().map(|name| SkippedTool {
                reason: "allowed by the policy, and no longer on the server".into(),
                name,
            }));
    }
    let duplicates: HashSet<String> = counts
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(name, _)| name.to_string())
        .collect();
    let mut budget = SchemaBudget::PER_SOURCE;
    for t in raw {
        if !policy.is_exposed(&t.name) {
            if duplicates.contains(&t.name) && !out.skipped.iter().any(|s| s.name == t.name) {
                out.skipped.push(SkippedTool {
                    reason: "duplicate tool name (not exposed by policy)".into(),
                    name: t.name,
                });
            }
            continue;
        }
        if duplicates.contains(&t.name) {
            return Err(DiscoveryError::DuplicateName(t.name));
        }
        if t.requires_task() {
            out.skipped.push(SkippedTool {
                reason: "execution.taskSupport is \"required\": the harness does not make task-augmented calls".into(),
                name: t.name,
            });
            continue;
        }
        out.tools.push(build_tool(policy, t, &mut budget)?);
    }
    Ok(out)
}

/// An exposed tool, its schemas compiled within the limits, their regular
/// expressions charged to the server's `regexes`.
fn build_tool(
    policy: &ServerPolicy,
    t: ListedTool,
    budget: &mut SchemaBudget,
) -> Result<Tool, DiscoveryError> {
    if !is_object_schema(&t.input_schema) {
        return Err(DiscoveryError::NonObjectInputSchema { tool: t.name });
    }
    let input_validator = compile_schema(&t.name, SchemaUse::Arguments, &t.input_schema, budget)?;
    let output_validator = match &t.output_schema {
        None | Some(Value::Null) => None,
        Some(s) if !is_object_schema(s) => {
            return Err(DiscoveryError::NonObjectOutputSchema { tool: t.name })
        }
        Some(s) => Some(compile_schema(&t.name, SchemaUse::Results, s, budget)?),
    };
    let description = wasm_mcp_protocol::cap_description(
        t.description
            .as_deref()
            .or(t.title.as_deref())
            .unwrap_or(""),
    );
    Ok(Tool {
        local_name: local_name(&policy.id, &t.name),
        binding: Some(Binding {
            server_id: policy.id.clone(),
            remote_name: t.name,
        }),
        description,
        input_schema: t.input_schema,
        output_schema: t.output_schema.filter(|v| !v.is_null()),
        input_validator: Some(input_validator),
        output_validator,
        annotations: t.annotations,
    })
}

/// Compile a server's schema within the [`SchemaLimits`] (size, depth,
/// `$ref` expansion, local references only, regexes by count and weight),
/// so compiling and validating against it are bounded; its regexes are
/// charged to `regexes`, the server's budget.
fn compile_schema(
    tool: &str,
    schema_use: SchemaUse,
    schema: &Value,
    budget: &mut SchemaBudget,
) -> Result<Arc<CheckedSchema>, DiscoveryError> {
    let which = schema_use.side();
    CheckedSchema::compile_within(schema, &SchemaLimits::default(), schema_use, budget)
        .map(Arc::new)
        .map_err(|e| DiscoveryError::InvalidSchema {
            tool: tool.into(),
            which,
            message: e.to_string(),
        })
}

/// `list_all` + `select_listing`.
pub async fn discover(
    conn: &ConnectionHandle,
    policy: &ServerPolicy,
    when: Discovery,
) -> Result<Selection, DiscoveryError> {
    let listing = list_all(conn, policy.request_timeout()).await?;
    select_listing(policy, listing, when)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::policy::Policy;
    use serde_json::json;

    fn policy(allowed: &[&str]) -> ServerPolicy {
        let toml = format!(
            "[[servers]]\nid='ws'\ncommand='x'\nargs=['--worktree','{{worktree}}']\nallowed_tools={allowed:?}\ndenied_tools=['secret']\n"
        );
        Policy::from_toml(&toml).unwrap().servers.remove(0)
    }

    /// The first discovery of a server (its allowed tools must be there).
    fn select(p: &ServerPolicy, raw: Vec<ListedTool>) -> Result<Selection, DiscoveryError> {
        super::select(p, raw, Discovery::First)
    }

    fn select_listing(p: &ServerPolicy, l: Listing) -> Result<Selection, DiscoveryError> {
        super::select_listing(p, l, Discovery::First)
    }

    /// After `list_changed`, an allowed tool that went away is skipped
    /// with its reason; the first discovery refuses the server for it.
    #[test]
    fn an_allowed_tool_gone_at_a_later_discovery_is_skipped() {
        let p = policy(&["a", "b"]);
        let listed = || vec![raw("a", obj())];
        assert!(matches!(
            select(&p, listed()),
            Err(DiscoveryError::MissingAllowedTools(m)) if m == ["b"]
        ));
        let again = super::select(&p, listed(), Discovery::Again).unwrap();
        assert_eq!(again.tools.len(), 1);
        assert_eq!(again.skipped.len(), 1);
        assert_eq!(again.skipped[0].name, "b");
        assert!(again.skipped[0].reason.contains("no longer on the server"));
    }

    fn raw(name: &str, schema: Value) -> ListedTool {
        serde_json::from_value(json!({"name": name, "description": "d", "inputSchema": schema}))
            .unwrap()
    }

    fn obj() -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    }

    #[test]
    fn filters_deny_first_and_builds_validators() {
        let p = policy(&["a", "secret"]);
        let got = select(
            &p,
            vec![raw("a", obj()), raw("b", obj()), raw("secret", obj())],
        )
        .unwrap();
        let names: Vec<_> = got.tools.iter().filter_map(|t| t.remote_name()).collect();
        assert_eq!(names, ["a"], "b unlisted, secret denied");
        let input = got.tools[0].input_validator.as_ref().unwrap();
        assert!(input.is_valid(&json!({"path": "x"})));
        assert!(!input.is_valid(&json!({"path": 3})));
    }

    #[test]
    fn errors() {
        let p = policy(&["a"]);
        assert!(matches!(
            select(&p, vec![raw("a", obj()), raw("a", obj())]),
            Err(DiscoveryError::DuplicateName(n)) if n == "a"
        ));
        assert!(matches!(
            select(&p, vec![raw("a", json!({"type": "string"}))]),
            Err(DiscoveryError::NonObjectInputSchema { .. })
        ));
        assert!(matches!(
            select(&p, vec![raw("a", json!(true))]),
            Err(DiscoveryError::NonObjectInputSchema { .. })
        ));
        assert!(matches!(
            select(
                &p,
                vec![raw(
                    "a",
                    json!({"type": "object", "properties": {"x": {"type": 12}}})
                )]
            ),
            Err(DiscoveryError::InvalidSchema { which: "input", .. })
        ));
        assert!(matches!(
            select(&p, vec![raw("z", obj())]),
            Err(DiscoveryError::MissingAllowedTools(m)) if m == ["a"]
        ));
        // Unexposed broken tool is ignored.
        assert!(select(&p, vec![raw("a", obj()), raw("junk", json!(5))]).is_ok());
    }

    /// Problems confined to tools the policy does not expose skip those
    /// tools (recorded), and task-only tools are never exposed.
    #[test]
    fn problems_of_unexposed_tools_skip_them_and_task_only_tools_are_hidden() {
        let p = policy(&["a", "t"]);
        let mut task_only = raw("t", obj());
        task_only.execution = Some(json!({"taskSupport": "required"}));
        let mut optional = raw("a", obj());
        optional.execution = Some(json!({"taskSupport": "optional"}));
        let dialect = json!({"$schema": "https://example.com/unknown-dialect", "type": "object"});
        let got = select(
            &p,
            vec![
                optional,
                task_only,
                raw("dup", obj()),
                raw("dup", obj()),
                raw("odd", dialect),
            ],
        )
        .unwrap();
        let names: Vec<_> = got.tools.iter().filter_map(|t| t.remote_name()).collect();
        assert_eq!(names, ["a"]);
        let skipped: Vec<_> = got.skipped.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(skipped, ["t", "dup"]);
        assert!(got.skipped[0].reason.contains("taskSupport"));
        // An exposed tool with the unknown dialect refuses the server.
        let p = policy(&["odd"]);
        let dialect = json!({"$schema": "https://example.com/unknown-dialect", "type": "object"});
        let err = select(&p, vec![raw("odd", dialect)]).unwrap_err();
        assert!(err.to_string().contains("odd"), "{err}");
        // Broken entries: skipped unless exposed.
        let listing = |name: &str| Listing {
            tools: vec![raw("a", obj()), raw("t", obj())],
            broken: vec![BrokenEntry {
                name: Some(name.into()),
                error: "invalid type: integer `5`, expected a string".into(),
            }],
        };
        let p = policy(&["a", "t"]);
        let got = select_listing(&p, listing("other")).unwrap();
        assert_eq!(got.tools.len(), 2);
        assert_eq!(got.skipped[0].name, "other");
        let err = select_listing(&p, listing("a")).unwrap_err();
        assert!(err.to_string().contains("tool `a`"), "{err}");
    }

    /// A `$ref` chain that would take 2^40 steps to validate is refused at
    /// discovery, promptly, naming the limit.
    #[test]
    fn schemas_over_the_limits_are_refused() {
        let p = policy(&["a"]);
        let mut defs = serde_json::Map::new();
        for i in 0..40 {
            let next = format!("#/$defs/a{}", i + 1);
            defs.insert(
                format!("a{i}"),
                json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert("a40".into(), json!({"type": "string"}));
        let chain =
            json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": defs});
        let started = std::time::Instant::now();
        let err = select(&p, vec![raw("a", chain)]).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(err.to_string().contains("$ref expansion limit"), "{err}");
        let mut t = raw("a", obj());
        t.output_schema = Some(json!({"type": "object", "properties": {"x": {"$ref": "#"}}}));
        let err = select(&p, vec![t]).unwrap_err();
        assert!(
            matches!(
                err,
                DiscoveryError::InvalidSchema {
                    which: "output",
                    ..
                }
            ),
            "{err}"
        );
    }

    /// A server's regexes are bounded in all, as a plugin's are on the
    /// server: five tools of 64 distinct patterns each (within the
    /// per-schema limit) are 320, over the 256 of one server's budget; the
    /// fifth tool's schema refuses the server, naming the budget. A heavy
    /// pattern is refused by its weight alone.
    #[test]
    fn a_server_s_regexes_are_bounded_in_all() {
        let names: Vec<String> = (0..5).map(|i| format!("t{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let p = policy(&refs);
        let patterned = |t: usize| {
            let props: serde_json::Map<String, Value> = (0..64)
                .map(|i| (format!("p{i}"), json!({"pattern": format!("^t{t}p{i}$")})))
                .collect();
            json!({"type": "object", "properties": props})
        };
        let tools = |n: usize| (0..n).map(|t| raw(&names[t], patterned(t))).collect();
        assert_eq!(
            select(&policy(&refs[..4]), tools(4)).unwrap().tools.len(),
            4
        );
        let err = select(&p, tools(5)).unwrap_err();
        assert!(
            err.to_string().contains("tool `t4`") && err.to_string().contains("regex budget"),
            "{err}"
        );
        let heavy = json!({"type": "object", "properties": {"a": {"pattern": "[\\s\\S]{10000}"}}});
        let err = select(&policy(&["a"]), vec![raw("a", heavy)]).unwrap_err();
        assert!(err.to_string().contains("regex weight limit"), "{err}");
    }

    #[test]
    fn description_capped() {
        let p = policy(&["a"]);
        let mut t = raw("a", obj());
        t.description = Some("é".repeat(5000));
        let got = select(&p, vec![t]).unwrap();
        assert_eq!(
            got.tools[0].description.chars().count(),
            wasm_mcp_protocol::MAX_DESCRIPTION
        );
    }
}
