//! ToolRegistry: the tool-call pipeline.
//!
//! Order, per call (see `ToolOutcome::stages`):
//! `parse` → `before:<hook>`… → `approval` → `validate_input` → `call` →
//! `validate_output` → `after:<hook>`…
//!
//! Any stage before `call` can stop the call; then no request is sent. Errors
//! meant for the model become `ToolOutcome::model_text` starting with `error:`.
//! Output-schema violations are *not* shown to the model: they are recorded in
//! `contract_violation` for recovery/audit and the result is withheld.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::run::policy::{Approval, ToolPolicy};
use crate::tools::faults::{CallFault, CallState};
use crate::tools::naming::Binding;
use crate::BoxFut;
use wasm_mcp_protocol::{CheckedSchema, Validation};

/// Max characters of tool output given to the model.
pub const MAX_MODEL_TEXT: usize = 64 * 1024;

/// What a handler produced when the tool ran (or the server answered).
#[derive(Debug, Clone, Default)]
pub struct HandlerOutput {
    /// `isError` from the server: the tool ran and reported failure.
    pub is_error: bool,
    /// Text for the model (content blocks converted; artifacts referenced).
    pub text: String,
    pub structured: Option<Value>,
    pub artifacts: Vec<PathBuf>,
    /// Refused content (policy `artifacts = "refuse"`), reported as an error.
    pub refused: Option<String>,
    pub attempts: u32,
}

/// The handler could not get an answer.
#[derive(Debug, Clone)]
pub struct HandlerFailure {
    pub fault: CallFault,
    pub attempts: u32,
}

pub trait ToolHandler: Send + Sync {
    fn call(&self, args: Map<String, Value>) -> BoxFut<'_, Result<HandlerOutput, HandlerFailure>>;
}

/// A registered tool.
#[derive(Clone)]
pub struct ToolSpec {
    pub local_name: String,
    pub description: String,
    pub parameters: Value,
    pub input_validator: Option<Arc<CheckedSchema>>,
    pub output_validator: Option<Arc<CheckedSchema>>,
    pub policy: ToolPolicy,
    /// Where the tool comes from (`None` for local tools).
    pub origin: Option<Binding>,
    /// Server hints (never used for decisions; shown to approvers).
    pub annotations: Option<Value>,
    pub handler: Arc<dyn ToolHandler>,
}

/// A tool definition as sent to the model.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// What hooks and approvers see.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCallInfo {
    pub session: String,
    pub local_name: String,
    pub origin: Option<Binding>,
    pub args: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum HookDecision {
    Continue,
    Deny(String),
}

pub trait ToolHook: Send + Sync {
    fn name(&self) -> &str;
    fn before_tool(&self, _call: &ToolCallInfo) -> HookDecision {
        HookDecision::Continue
    }
    fn after_tool(&self, _call: &ToolCallInfo, _outcome: &ToolOutcome) {}
}

pub struct ApprovalRequest<'a> {
    pub call: &'a ToolCallInfo,
    pub annotations: Option<&'a Value>,
}

/// Decides `approval = "ask"` tools.
pub trait Approver: Send + Sync {
    fn approve<'a>(&'a self, req: &'a ApprovalRequest<'a>) -> BoxFut<'a, bool>;
}

/// Offline approver: answers `ask` with a fixed, policy-given decision.
pub struct NonInteractiveApprover {
    pub approve_asks: bool,
}

impl Approver for NonInteractiveApprover {
    fn approve<'a>(&'a self, _req: &'a ApprovalRequest<'a>) -> BoxFut<'a, bool> {
        Box::pin(std::future::ready(self.approve_asks))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    BadArguments,
    UnknownTool,
    HookDenied,
    ApprovalDenied,
    InvalidArguments,
    ToolError,
    ContentRefused,
    Fault,
    Contract,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolOutcome {
    pub local_name: String,
    pub origin: Option<Binding>,
    pub model_text: String,
    pub error: Option<ErrorKind>,
    pub state: CallState,
    pub stages: Vec<String>,
    /// Output schema violation: for recovery/audit only, never sent to the model.
    pub contract_violation: Option<String>,
    pub fault: Option<String>,
    pub attempts: u32,
    pub artifacts: Vec<PathBuf>,
}

impl ToolOutcome {
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }
}

#[derive(Clone)]
pub struct ToolRegistry {
    session: String,
    tools: BTreeMap<String, Arc<ToolSpec>>,
    hooks: Vec<Arc<dyn ToolHook>>,
    approver: Arc<dyn Approver>,
}

fn error_text(msg: impl std::fmt::Display) -> String {
    format!("error: {msg}")
}

fn cap(mut s: String) -> String {
    if s.len() > MAX_MODEL_TEXT {
        let mut cut = MAX_MODEL_TEXT;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("\n[output truncated]");
    }
    s
}

impl ToolRegistry {
    pub fn new(approver: Arc<dyn Approver>) -> Self {
        Self {
            session: "root".into(),
            tools: BTreeMap::new(),
            hooks: Vec::new(),
            approver,
        }
    }

    /// A copy for one task session: same tools and hooks, independent from then on.
    pub fn fork(&self, session: &str) -> Self {
        let mut r = self.clone();
        r.session = session.to_string();
        r
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    pub fn register(&mut self, spec: ToolSpec) {
        self.tools.insert(spec.local_name.clone(), Arc::new(spec));
    }

    pub fn add_hook(&mut self, hook: Arc<dyn ToolHook>) {
        self.hooks.push(hook);
    }

    /// Replace all tools that came from MCP servers (origin set) at once.
    pub fn replace_remote_tools(&mut self, specs: Vec<ToolSpec>) {
        self.tools.retain(|_, s| s.origin.is_none());
        for s in specs {
            self.register(s);
        }
    }

    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    pub fn get(&self, local: &str) -> Option<&Arc<ToolSpec>> {
        self.tools.get(local)
    }

    pub fn tool_defs(&self) -> Vec<ToolDef> {
        self.tools
            .values()
            .map(|s| ToolDef {
                name: s.local_name.clone(),
                description: s.description.clone(),
                parameters: s.parameters.clone(),
            })
            .collect()
    }

    /// Run the whole pipeline for one call. `raw_args` is the model's JSON text.
    pub async fn invoke(&self, local: &str, raw_args: &str) -> ToolOutcome {
        let mut out = ToolOutcome {
            local_name: local.to_string(),
            origin: None,
            model_text: String::new(),
            error: None,
            state: CallState::NotSent,
            stages: Vec::new(),
            contract_violation: None,
            fault: None,
            attempts: 0,
            artifacts: Vec::new(),
        };
        let fail = |mut out: ToolOutcome, kind: ErrorKind, msg: String| {
            out.error = Some(kind);
            out.model_text = error_text(msg);
            out
        };

        // parse
        out.stages.push("parse".into());
        let Some(spec) = self.tools.get(local).cloned() else {
            return fail(
                out,
                ErrorKind::UnknownTool,
                format!("unknown tool `{local}`"),
            );
        };
        out.origin = spec.origin.clone();
        let args: Value = if raw_args.trim().is_empty() {
            Value::Object(Map::new())
        } else {
            match serde_json::from_str(raw_args) {
                Ok(v) => v,
                Err(e) => {
                    return fail(
                        out,
                        ErrorKind::BadArguments,
                        format!("arguments are not valid JSON: {e}"),
                    )
                }
            }
        };
        let Value::Object(args_obj) = args.clone() else {
            return fail(
                out,
                ErrorKind::BadArguments,
                "arguments must be a JSON object".into(),
            );
        };
        let info = ToolCallInfo {
            session: self.session.clone(),
            local_name: local.to_string(),
            origin: spec.origin.clone(),
            args,
        };

        // before_tool hooks
        for h in &self.hooks {
            out.stages.push(format!("before:{}", h.name()));
            if let HookDecision::Deny(why) = h.before_tool(&info) {
                let o = fail(
                    out,
                    ErrorKind::HookDenied,
                    format!("call blocked by {}: {why}", h.name()),
                );
                return self.after(&info, o);
            }
        }

        // permission / approval (policy decides; annotations are hints only)
        out.stages.push("approval".into());
        let approved = match spec.policy.approval {
            Approval::Auto => true,
            Approval::Deny => false,
            Approval::Ask => {
                let req = ApprovalRequest {
                    call: &info,
                    annotations: spec.annotations.as_ref(),
                };
                self.approver.approve(&req).await
            }
        };
        if !approved {
            let o = fail(
                out,
                ErrorKind::ApprovalDenied,
                format!("call to `{local}` was not approved"),
            );
            return self.after(&info, o);
        }

        // schema validation
        out.stages.push("validate_input".into());
        if let Some(v) = &spec.input_validator {
            let errors = bounded_errors(v, &info.args, |e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .await;
            if !errors.is_empty() {
                let o = fail(
                    out,
                    ErrorKind::InvalidArguments,
                    format!("invalid arguments for `{local}`: {}", errors.join("; ")),
                );
                return self.after(&info, o);
            }
        }

        // tools/call
        out.stages.push("call".into());
        let result = spec.handler.call(args_obj).await;
        let output = match result {
            Ok(o) => o,
            Err(f) => {
                out.attempts = f.attempts;
                out.state = f.fault.state();
                out.fault = Some(f.fault.to_string());
                let msg = match out.state {
                    CallState::Unknown => format!(
                        "{} — the call's outcome is unknown (it may or may not have taken effect); it was not retried",
                        f.fault
                    ),
                    _ => f.fault.to_string(),
                };
                let o = fail(out, ErrorKind::Fault, msg);
                return self.after(&info, o);
            }
        };
        out.attempts = output.attempts;
        out.state = CallState::Completed;
        out.artifacts = output.artifacts.clone();

        // output validation (only for non-error results)
        out.stages.push("validate_output".into());
        if output.is_error {
            let text = if output.text.is_empty() {
                "tool reported an error".to_string()
            } else {
                output.text
            };
            let o = fail(out, ErrorKind::ToolError, cap(text));
            return self.after(&info, o);
        }
        if let Some(why) = output.refused {
            let o = fail(out, ErrorKind::ContentRefused, why);
            return self.after(&info, o);
        }
        if let Some(v) = &spec.output_validator {
            let violation = match &output.structured {
                None => Some(
                    "structuredContent missing but the tool declares an outputSchema".to_string(),
                ),
                Some(s) => {
                    let errs = bounded_errors(v, s, |e| e.to_string()).await;
                    (!errs.is_empty()).then(|| errs.join("; "))
                }
            };
            if let Some(why) = violation {
                out.contract_violation = Some(why);
                let o = fail(
                    out,
                    ErrorKind::Contract,
                    format!("the result of `{local}` was withheld: it broke the tool's output contract (reported)"),
                );
                return self.after(&info, o);
            }
        }
        out.model_text = cap(match &output.structured {
            Some(s) => {
                let mut t = s.to_string();
                for a in &output.artifacts {
                    t.push_str(&format!("\n[artifact stored: {}]", a.display()));
                }
                t
            }
            None => output.text,
        });
        self.after(&info, out)
    }

    fn after(&self, info: &ToolCallInfo, mut out: ToolOutcome) -> ToolOutcome {
        for h in &self.hooks {
            out.stages.push(format!("after:{}", h.name()));
            h.after_tool(info, &out);
        }
        out
    }
}

/// Up to five validation errors of `value`, formatted by `fmt`; validated
/// within the shared budget (off the executor when it could be slow). A
/// budget overrun is one error saying so.
async fn bounded_errors(
    schema: &Arc<CheckedSchema>,
    value: &Value,
    fmt: fn(&jsonschema::ValidationError<'_>) -> String,
) -> Vec<String> {
    let validation = Validation::shared();
    let cost = validation.cost(schema, value);
    let (schema, value) = (schema.clone(), value.clone());
    let job = move || {
        if schema.is_valid(&value) {
            return Vec::new();
        }
        schema
            .iter_errors(&value)
            .take(5)
            .map(|e| fmt(&e))
            .collect()
    };
    validation
        .run(cost, job)
        .await
        .unwrap_or_else(|e| vec![e.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    struct Recorder {
        log: Arc<Mutex<Vec<String>>>,
        structured: Value,
    }
    impl ToolHandler for Recorder {
        fn call(
            &self,
            args: Map<String, Value>,
        ) -> BoxFut<'_, Result<HandlerOutput, HandlerFailure>> {
            self.log
                .lock()
                .unwrap()
                .push(format!("call {}", Value::Object(args)));
            let s = self.structured.clone();
            Box::pin(async move {
                Ok(HandlerOutput {
                    structured: Some(s),
                    attempts: 1,
                    ..Default::default()
                })
            })
        }
    }

    struct Hook {
        name: &'static str,
        log: Arc<Mutex<Vec<String>>>,
        deny: bool,
    }
    impl ToolHook for Hook {
        fn name(&self) -> &str {
            self.name
        }
        fn before_tool(&self, _c: &ToolCallInfo) -> HookDecision {
            self.log
                .lock()
                .unwrap()
                .push(format!("before {}", self.name));
            if self.deny {
                HookDecision::Deny("nope".into())
            } else {
                HookDecision::Continue
            }
        }
        fn after_tool(&self, _c: &ToolCallInfo, o: &ToolOutcome) {
            self.log
                .lock()
                .unwrap()
                .push(format!("after {} err={:?}", self.name, o.error));
        }
    }

    struct CountingApprover(AtomicUsize, bool);
    impl Approver for CountingApprover {
        fn approve<'a>(&'a self, _r: &'a ApprovalRequest<'a>) -> BoxFut<'a, bool> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::ready(self.1))
        }
    }

    fn spec(log: &Arc<Mutex<Vec<String>>>, approval: Approval, structured: Value) -> ToolSpec {
        let input =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let output = json!({"type": "object", "required": ["ok"]});
        let limits = wasm_mcp_protocol::SchemaLimits::default();
        ToolSpec {
            local_name: "t".into(),
            description: "test".into(),
            input_validator: Some(Arc::new(CheckedSchema::compile(&input, &limits).unwrap())),
            parameters: input,
            output_validator: Some(Arc::new(CheckedSchema::compile(&output, &limits).unwrap())),
            policy: ToolPolicy {
                approval,
                ..Default::default()
            },
            origin: None,
            annotations: None,
            handler: Arc::new(Recorder {
                log: log.clone(),
                structured,
            }),
        }
    }

    fn registry(
        log: &Arc<Mutex<Vec<String>>>,
        approval: Approval,
        deny_hook: bool,
        ok: bool,
    ) -> ToolRegistry {
        let mut r = ToolRegistry::new(Arc::new(NonInteractiveApprover {
            approve_asks: false,
        }));
        r.register(spec(
            log,
            approval,
            if ok {
                json!({"ok": 1})
            } else {
                json!({"bad": 1})
            },
        ));
        r.add_hook(Arc::new(Hook {
            name: "h1",
            log: log.clone(),
            deny: false,
        }));
        r.add_hook(Arc::new(Hook {
            name: "h2",
            log: log.clone(),
            deny: deny_hook,
        }));
        r
    }

    #[tokio::test]
    async fn pipeline_order() {
        let log = Arc::new(Mutex::new(vec![]));
        let r = registry(&log, Approval::Auto, false, true);
        let o = r.invoke("t", r#"{"n": 3}"#).await;
        assert_eq!(
            o.stages,
            [
                "parse",
                "before:h1",
                "before:h2",
                "approval",
                "validate_input",
                "call",
                "validate_output",
                "after:h1",
                "after:h2"
            ]
        );
        assert!(!o.is_error(), "{}", o.model_text);
        assert_eq!(o.model_text, r#"{"ok":1}"#);
        assert_eq!(o.state, CallState::Completed);
        assert_eq!(
            *log.lock().unwrap(),
            [
                "before h1",
                "before h2",
                "call {\"n\":3}",
                "after h1 err=None",
                "after h2 err=None"
            ]
        );
    }

    #[tokio::test]
    async fn stops_before_call() {
        let log = Arc::new(Mutex::new(vec![]));
        // invalid args: no call, error text for the model
        let r = registry(&log, Approval::Auto, false, true);
        let o = r.invoke("t", r#"{"n": "x"}"#).await;
        assert_eq!(o.error, Some(ErrorKind::InvalidArguments));
        assert!(
            o.model_text.starts_with("error: invalid arguments"),
            "{}",
            o.model_text
        );
        assert_eq!(o.state, CallState::NotSent);
        assert!(!o.stages.contains(&"call".to_string()));
        // bad JSON
        assert_eq!(
            r.invoke("t", "{n:").await.error,
            Some(ErrorKind::BadArguments)
        );
        assert_eq!(
            r.invoke("t", "[1]").await.error,
            Some(ErrorKind::BadArguments)
        );
        assert_eq!(
            r.invoke("nope", "{}").await.error,
            Some(ErrorKind::UnknownTool)
        );
        // hook denial stops before approval
        let r = registry(&log, Approval::Auto, true, true);
        let o = r.invoke("t", r#"{"n": 1}"#).await;
        assert_eq!(o.error, Some(ErrorKind::HookDenied));
        assert!(!o.stages.contains(&"approval".to_string()));
        // policy deny / ask → non-interactive deny
        for a in [Approval::Deny, Approval::Ask] {
            let r = registry(&log, a, false, true);
            let o = r.invoke("t", r#"{"n": 1}"#).await;
            assert_eq!(o.error, Some(ErrorKind::ApprovalDenied));
        }
        assert!(
            !log.lock().unwrap().iter().any(|l| l.starts_with("call")),
            "no request was ever sent"
        );
    }

    #[tokio::test]
    async fn ask_goes_to_approver_and_contract_violation_is_withheld() {
        let log = Arc::new(Mutex::new(vec![]));
        let approver = Arc::new(CountingApprover(AtomicUsize::new(0), true));
        let mut r = ToolRegistry::new(approver.clone());
        r.register(spec(&log, Approval::Ask, json!({"bad": "secret-value"})));
        let o = r.invoke("t", r#"{"n": 1}"#).await;
        assert_eq!(approver.0.load(Ordering::SeqCst), 1);
        assert_eq!(o.error, Some(ErrorKind::Contract));
        assert!(o.contract_violation.as_deref().unwrap().contains("ok"));
        assert!(
            !o.model_text.contains("secret-value"),
            "violating content not shown"
        );
        assert_eq!(o.state, CallState::Completed);
    }

    #[tokio::test]
    async fn fork_is_independent() {
        let log = Arc::new(Mutex::new(vec![]));
        let base = registry(&log, Approval::Auto, false, true);
        let mut a = base.fork("task-a");
        a.replace_remote_tools(vec![]);
        let mut extra = spec(&log, Approval::Auto, json!({"ok": 1}));
        extra.local_name = "u".into();
        a.register(extra);
        assert_eq!(a.session(), "task-a");
        assert_eq!(a.names(), ["t", "u"]);
        assert_eq!(base.names(), ["t"], "base unchanged");
        assert_eq!(base.tool_defs()[0].name, "t");
    }
}
