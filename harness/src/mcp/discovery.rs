//! `tools/list` discovery with hard limits and schema checks.

use std::collections::HashSet;
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
use wasm_mcp_protocol::{CheckedSchema, SchemaLimits};

pub const MAX_PAGES: usize = 100;
pub const MAX_TOOLS: usize = 1000;
/// Longest description kept, in chars: the same cap the server applies.
pub use wasm_mcp_protocol::MAX_DESCRIPTION as MAX_DESCRIPTION_CHARS;

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
) -> Result<Vec<ListedTool>, DiscoveryError> {
    let mut tools = Vec::new();
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
            if tools.len() >= MAX_TOOLS {
                return Err(DiscoveryError::TooManyTools);
            }
            let raw: ListedTool = serde_json::from_value(t)
                .map_err(|e| DiscoveryError::Malformed(format!("tool entry: {e}")))?;
            tools.push(raw);
        }
        let Some(c) = page.next_cursor else { break };
        if !seen_cursors.insert(c.clone()) {
            return Err(DiscoveryError::RepeatedCursor(c));
        }
        cursor = Some(c);
    }
    Ok(tools)
}

/// The client accepts an object schema without `"type"` (the server does not).
fn is_object_schema(v: &Value) -> bool {
    wasm_mcp_protocol::is_object_schema(v, MissingType::Allow)
}

/// Apply policy and checks to a raw listing.
///
/// Duplicates and limits are checked over the whole listing; schema checks only
/// for tools the policy exposes (a broken tool that is never exposed does not
/// break the task).
pub fn select(policy: &ServerPolicy, raw: Vec<ListedTool>) -> Result<Vec<Tool>, DiscoveryError> {
    let mut names = HashSet::new();
    for t in &raw {
        if !names.insert(t.name.clone()) {
            return Err(DiscoveryError::DuplicateName(t.name.clone()));
        }
    }
    let missing: Vec<String> = policy
        .required_tools()
        .into_iter()
        .filter(|t| !names.contains(*t))
        .map(str::to_string)
        .collect();
    if !missing.is_empty() {
        return Err(DiscoveryError::MissingAllowedTools(missing));
    }
    let mut out = Vec::new();
    for t in raw {
        if !policy.is_exposed(&t.name) {
            continue;
        }
        if !is_object_schema(&t.input_schema) {
            return Err(DiscoveryError::NonObjectInputSchema { tool: t.name });
        }
        let input_validator = compile_schema(&t.name, "input", &t.input_schema)?;
        let output_validator = match &t.output_schema {
            None | Some(Value::Null) => None,
            Some(s) if !is_object_schema(s) => {
                return Err(DiscoveryError::NonObjectOutputSchema { tool: t.name })
            }
            Some(s) => Some(compile_schema(&t.name, "output", s)?),
        };
        let description = wasm_mcp_protocol::cap_description(
            t.description
                .as_deref()
                .or(t.title.as_deref())
                .unwrap_or(""),
        );
        out.push(Tool {
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
        });
    }
    Ok(out)
}

/// Compile a server's schema within the [`SchemaLimits`] (size, depth,
/// `$ref` expansion, local references only), so validating against it is
/// bounded.
fn compile_schema(
    tool: &str,
    which: &'static str,
    schema: &Value,
) -> Result<Arc<CheckedSchema>, DiscoveryError> {
    CheckedSchema::compile(schema, &SchemaLimits::default())
        .map(Arc::new)
        .map_err(|e| DiscoveryError::InvalidSchema {
            tool: tool.into(),
            which,
            message: e.to_string(),
        })
}

/// `list_all` + `select`.
pub async fn discover(
    conn: &ConnectionHandle,
    policy: &ServerPolicy,
) -> Result<Vec<Tool>, DiscoveryError> {
    let raw = list_all(conn, policy.request_timeout()).await?;
    select(policy, raw)
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
        let names: Vec<_> = got.iter().filter_map(|t| t.remote_name()).collect();
        assert_eq!(names, ["a"], "b unlisted, secret denied");
        let input = got[0].input_validator.as_ref().unwrap();
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

    #[test]
    fn description_capped() {
        let p = policy(&["a"]);
        let mut t = raw("a", obj());
        t.description = Some("é".repeat(5000));
        let got = select(&p, vec![t]).unwrap();
        assert_eq!(got[0].description.chars().count(), MAX_DESCRIPTION_CHARS);
    }
}
