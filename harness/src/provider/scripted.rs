//! Offline scripted provider, driven by the task file.
//!
//! Each step names a *remote* tool (resolved to its local name through the
//! round's name resolver) and arguments; after the last step the final
//! message is returned. The provider is stateless: it reads the conversation to
//! see which steps ran and what they returned, and fails the run when a result
//! does not match the step's expectation (`expect_error`, `expect_contains`).
//!
//! String values in `args` and the final message may reference earlier results
//! with `{{<step id>.<path>}}`: the path walks the JSON of that step's result
//! (object keys, array indexes, `len` for length). A tool result that is an
//! error starts with `error:`.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{ChatMessage, ChatProvider, ChatRequest, FunctionCall, ProviderError, ToolCall};
use crate::BoxFut;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptStep {
    /// Name for templates; defaults to `step<N>` (1-based).
    #[serde(default)]
    pub id: Option<String>,
    /// Remote tool name.
    pub tool: String,
    /// Server id; needed only when several servers expose `tool`.
    #[serde(default)]
    pub server: Option<String>,
    #[serde(default = "empty_obj")]
    pub args: Value,
    #[serde(default)]
    pub expect_error: bool,
    #[serde(default)]
    pub expect_contains: Option<String>,
}

fn empty_obj() -> Value {
    Value::Object(Map::new())
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(default)]
    pub steps: Vec<ScriptStep>,
    pub final_message: String,
}

pub struct ScriptedProvider {
    script: Script,
}

const ID_PREFIX: &str = "scripted-";

impl ScriptedProvider {
    pub fn new(script: Script) -> Self {
        Self { script }
    }

    fn step_id(&self, i: usize) -> String {
        self.script.steps[i]
            .id
            .clone()
            .unwrap_or_else(|| format!("step{}", i + 1))
    }

    fn next(&self, req: &ChatRequest<'_>) -> Result<ChatMessage, ProviderError> {
        // Results of steps that ran, in order.
        let mut results: Vec<(usize, String)> = Vec::new();
        for m in req.messages {
            if m.role != "tool" {
                continue;
            }
            if let Some(i) = m
                .tool_call_id
                .as_deref()
                .and_then(|id| id.strip_prefix(ID_PREFIX))
                .and_then(|n| n.parse::<usize>().ok())
            {
                results.push((i, m.content.clone().unwrap_or_default()));
            }
        }
        let mut values: HashMap<String, Value> = HashMap::new();
        for (i, text) in &results {
            let Some(step) = self.script.steps.get(*i) else {
                return Err(ProviderError::Script {
                    step: *i + 1,
                    message: "result for unknown step".into(),
                });
            };
            let is_error = text.starts_with("error:");
            if is_error != step.expect_error {
                return Err(ProviderError::Script {
                    step: i + 1,
                    message: if is_error {
                        format!("`{}` failed unexpectedly: {text}", step.tool)
                    } else {
                        format!("`{}` was expected to fail but succeeded", step.tool)
                    },
                });
            }
            if let Some(want) = &step.expect_contains {
                if !text.contains(want.as_str()) {
                    return Err(ProviderError::Script {
                        step: i + 1,
                        message: format!("result of `{}` does not contain {want:?}", step.tool),
                    });
                }
            }
            let v = serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()));
            values.insert(self.step_id(*i), v);
        }
        let idx = results.iter().map(|(i, _)| i + 1).max().unwrap_or(0);
        if idx != results.len() {
            return Err(ProviderError::Script {
                step: idx,
                message: "steps ran out of order".into(),
            });
        }
        if idx >= self.script.steps.len() {
            let text = render_str(&self.script.final_message, &values).map_err(|m| {
                ProviderError::Script {
                    step: idx + 1,
                    message: m,
                }
            })?;
            return Ok(ChatMessage {
                role: "assistant".into(),
                content: Some(text),
                ..Default::default()
            });
        }
        let step = &self.script.steps[idx];
        let err = |message: String| ProviderError::Script {
            step: idx + 1,
            message,
        };
        let local = req
            .names
            .local_for(step.server.as_deref(), &step.tool)
            .ok_or_else(|| {
                err(format!(
                    "tool `{}` is not in the catalog (or is ambiguous)",
                    step.tool
                ))
            })?;
        if !req.tools.iter().any(|t| t.local_name == local) {
            return Err(err(format!("tool `{local}` is not offered this round")));
        }
        let args = render(&step.args, &values).map_err(err)?;
        Ok(ChatMessage {
            role: "assistant".into(),
            content: None,
            tool_calls: Some(vec![ToolCall {
                id: format!("{ID_PREFIX}{idx}"),
                kind: "function".into(),
                function: FunctionCall {
                    name: local.to_string(),
                    arguments: args.to_string(),
                },
            }]),
            tool_call_id: None,
        })
    }
}

impl ChatProvider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn complete<'a>(
        &'a self,
        req: ChatRequest<'a>,
    ) -> BoxFut<'a, Result<ChatMessage, ProviderError>> {
        let r = self.next(&req);
        Box::pin(std::future::ready(r))
    }
}

fn render(v: &Value, vals: &HashMap<String, Value>) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => Value::String(render_str(s, vals)?),
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| render(x, vals))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| Ok((k.clone(), render(x, vals)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

fn render_str(s: &str, vals: &HashMap<String, Value>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 2..];
        let end = tail
            .find("}}")
            .ok_or_else(|| format!("unterminated template in {s:?}"))?;
        let expr = tail[..end].trim();
        let v = lookup(expr, vals)
            .ok_or_else(|| format!("template `{{{{{expr}}}}}` does not resolve"))?;
        match v {
            Value::String(t) => out.push_str(&t),
            other => out.push_str(&other.to_string()),
        }
        rest = &tail[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn lookup(expr: &str, vals: &HashMap<String, Value>) -> Option<Value> {
    let mut parts = expr.split('.');
    let mut cur = vals.get(parts.next()?)?.clone();
    for p in parts {
        cur = match (&cur, p) {
            (Value::Array(a), "len") => Value::from(a.len()),
            (Value::String(s), "len") => Value::from(s.chars().count()),
            (Value::Object(o), "len") if !o.contains_key("len") => Value::from(o.len()),
            (Value::Array(a), idx) => a.get(idx.parse::<usize>().ok()?)?.clone(),
            (Value::Object(o), key) => o.get(key)?.clone(),
            _ => return None,
        };
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates() {
        let mut vals = HashMap::new();
        vals.insert(
            "ls".to_string(),
            json!({"entries": [{"name": "a"}, {"name": "b"}], "n": 2}),
        );
        assert_eq!(
            render_str(
                "{{ls.entries.len}} / {{ls.entries.1.name}} / {{ls.n}}",
                &vals
            )
            .unwrap(),
            "2 / b / 2"
        );
        assert!(render_str("{{ls.nope}}", &vals).is_err());
        assert!(render_str("{{other.x}}", &vals).is_err());
        assert_eq!(
            render(&json!({"p": ["{{ls.entries.0.name}}"]}), &vals).unwrap(),
            json!({"p": ["a"]})
        );
    }
}
