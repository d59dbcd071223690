//! The tool-call pipeline ([`ToolPipeline`]): one function per stage.
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

use crate::run::policy::{Approval, AskDefault, ToolPolicy};
use crate::tools::faults::{CallFault, CallState};
use crate::tools::naming::Binding;
use crate::tools::tool::Tool;
use crate::BoxFut;
use wasm_mcp_protocol::text::truncate_marked;
use wasm_mcp_protocol::{CheckedSchema, ErrorKind as ServerErrorKind, Validation};

/// Max characters of tool output given to the model.
pub const MAX_MODEL_TEXT: usize = 64 * 1024;

/// What a handler produced when the tool ran (or the server answered).
#[derive(Debug, Clone, Default)]
pub struct HandlerOutput {
    /// `isError` from the server: the tool ran and reported failure.
    pub tool_error: Option<ToolErrorReport>,
    /// The text content blocks, for the model.
    pub text: String,
    /// `structuredContent` as sent (what `outputSchema` validates).
    pub structured: Option<Value>,
    /// The model's copy of `structured` when binary strings in it were
    /// stored as artifacts (each replaced by its reference).
    pub model_structured: Option<Value>,
    /// Non-text content stored as files; their references always reach the model.
    pub artifacts: Vec<Artifact>,
    /// Binary payloads past the per-result bound, neither stored nor shown.
    pub artifacts_withheld: usize,
    /// Refused content (policy `artifacts = "refuse"`), reported as an error.
    pub refused: Option<String>,
    pub attempts: u32,
}

/// The tool ran and reported failure (`isError: true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolErrorReport {
    /// The server's kind for it (`_meta[ERROR_KIND_META]`), when it names one.
    pub kind: Option<ServerErrorKind>,
}

/// Non-text content stored as a file instead of being shown to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub path: PathBuf,
    /// What the model sees in its place, e.g. `[image content stored as artifact …]`.
    pub reference: String,
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

/// A tool with what runs it: the policy's rules and the handler.
#[derive(Clone)]
pub struct RegisteredTool {
    pub tool: Arc<Tool>,
    pub policy: ToolPolicy,
    pub handler: Arc<dyn ToolHandler>,
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

/// Offline approver: answers `ask` with the policy's `ask_default`
/// (by default, deny).
#[derive(Debug, Clone, Copy, Default)]
pub struct NonInteractiveApprover {
    pub answer: AskDefault,
}

impl Approver for NonInteractiveApprover {
    fn approve<'a>(&'a self, _req: &'a ApprovalRequest<'a>) -> BoxFut<'a, bool> {
        Box::pin(std::future::ready(self.answer == AskDefault::Approve))
    }
}

/// Which stage (or answer) gave the model an error, in a word: the trace's
/// `error`. The server's own classification of a tool error is the
/// protocol's `ErrorKind` (`Failure::ToolError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
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

/// Why a call gave the model an error instead of a result. Each variant holds
/// exactly what it needs, so an outcome cannot, say, carry a fault and a
/// contract violation at once, or a call state that contradicts its error.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Stopped before the request (no request was sent).
    Stopped(FailureKind),
    /// The server answered and the tool reported an error (of the server's
    /// kind, when it names one: timeout, memory limit, ...).
    ToolError(Option<ServerErrorKind>),
    /// The server answered with content the policy refuses.
    ContentRefused,
    /// No answer (or a JSON-RPC error): see the fault.
    Fault(CallFault),
    /// The result broke the tool's output schema (audit only, never shown).
    Contract { violation: String },
}

impl Failure {
    pub fn kind(&self) -> FailureKind {
        match self {
            Failure::Stopped(k) => *k,
            Failure::ToolError(_) => FailureKind::ToolError,
            Failure::ContentRefused => FailureKind::ContentRefused,
            Failure::Fault(_) => FailureKind::Fault,
            Failure::Contract { .. } => FailureKind::Contract,
        }
    }
}

/// A stage ended the call: the failure and the text for the model.
struct Stop {
    failure: Failure,
    message: String,
}

impl Stop {
    fn before_call(kind: FailureKind, message: String) -> Self {
        Stop {
            failure: Failure::Stopped(kind),
            message,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ToolOutcome {
    pub local_name: String,
    pub origin: Option<Binding>,
    pub model_text: String,
    pub stages: Vec<String>,
    pub attempts: u32,
    pub artifacts: Vec<PathBuf>,
    /// How the call failed; `None` once it succeeded. The call state is
    /// derived from it, so the two cannot disagree.
    failure: Option<Failure>,
}

impl ToolOutcome {
    fn new(local: &str) -> Self {
        Self {
            local_name: local.to_string(),
            origin: None,
            model_text: String::new(),
            stages: Vec::new(),
            attempts: 0,
            artifacts: Vec::new(),
            failure: None,
        }
    }

    fn stage(&mut self, name: impl Into<String>) {
        self.stages.push(name.into());
    }

    fn stop(mut self, stop: Stop) -> Self {
        self.model_text = error_text(stop.message);
        self.failure = Some(stop.failure);
        self
    }

    pub fn is_error(&self) -> bool {
        self.failure.is_some()
    }

    pub fn failure(&self) -> Option<&Failure> {
        self.failure.as_ref()
    }

    pub fn error(&self) -> Option<FailureKind> {
        self.failure.as_ref().map(Failure::kind)
    }

    /// What is known about the call's effect, derived from how it ended:
    /// stopped before the request, not sent; a fault, as the fault says;
    /// otherwise the server answered.
    pub fn state(&self) -> CallState {
        match &self.failure {
            Some(Failure::Stopped(_)) => CallState::NotSent,
            Some(Failure::Fault(f)) => f.state(),
            _ => CallState::Completed,
        }
    }

    /// The server's own kind for a tool error (`_meta[ERROR_KIND_META]`).
    pub fn server_error_kind(&self) -> Option<ServerErrorKind> {
        match &self.failure {
            Some(Failure::ToolError(kind)) => *kind,
            _ => None,
        }
    }

    pub fn fault(&self) -> Option<&CallFault> {
        match &self.failure {
            Some(Failure::Fault(f)) => Some(f),
            _ => None,
        }
    }

    /// Output schema violation: for recovery/audit only, never sent to the model.
    pub fn contract_violation(&self) -> Option<&str> {
        match &self.failure {
            Some(Failure::Contract { violation }) => Some(violation),
            _ => None,
        }
    }
}

#[derive(Clone)]
pub struct ToolPipeline {
    session: String,
    tools: BTreeMap<String, Arc<RegisteredTool>>,
    hooks: Vec<Arc<dyn ToolHook>>,
    approver: Arc<dyn Approver>,
}

fn error_text(msg: impl std::fmt::Display) -> String {
    format!("error: {msg}")
}

/// Appended where model text was cut.
const TRUNCATED: &str = "\n[output truncated]";

fn cap(s: String) -> String {
    truncate_marked(s, MAX_MODEL_TEXT, TRUNCATED)
}

impl ToolPipeline {
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

    pub fn register(&mut self, entry: RegisteredTool) {
        self.tools
            .insert(entry.tool.local_name.clone(), Arc::new(entry));
    }

    pub fn add_hook(&mut self, hook: Arc<dyn ToolHook>) {
        self.hooks.push(hook);
    }

    /// Replace all tools that came from MCP servers (origin set) at once.
    pub fn replace_remote_tools(&mut self, entries: Vec<RegisteredTool>) {
        self.tools.retain(|_, e| e.tool.binding.is_none());
        for e in entries {
            self.register(e);
        }
    }

    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    pub fn get(&self, local: &str) -> Option<&Arc<RegisteredTool>> {
        self.tools.get(local)
    }

    /// The tools offered to the model, ordered by local name.
    pub fn tools(&self) -> Vec<Arc<Tool>> {
        self.tools.values().map(|e| e.tool.clone()).collect()
    }

    /// Run the whole pipeline for one call. `raw_args` is the model's JSON text.
    pub async fn invoke(&self, local: &str, raw_args: &str) -> ToolOutcome {
        let mut out = ToolOutcome::new(local);
        out.stage("parse");
        let (spec, info) = match self.parse(local, raw_args) {
            Ok(parsed) => parsed,
            Err(stop) => return out.stop(stop),
        };
        out.origin = spec.tool.binding.clone();
        if let Err(stop) = self.run_stages(&spec, &info, &mut out).await {
            out = out.stop(stop);
        }
        self.after(&info, out)
    }

    /// Every stage after `parse`, in order; the first `Stop` ends the call.
    async fn run_stages(
        &self,
        spec: &RegisteredTool,
        info: &ToolCallInfo,
        out: &mut ToolOutcome,
    ) -> Result<(), Stop> {
        self.before_hooks(info, out)?;
        out.stage("approval");
        self.approve(spec, info).await?;
        out.stage("validate_input");
        validate_input(spec, info).await?;
        out.stage("call");
        let output = call(spec, info, out).await?;
        out.stage("validate_output");
        out.model_text = check_output(spec, &info.local_name, output).await?;
        Ok(())
    }

    /// `parse`: the tool exists and the arguments are a JSON object.
    fn parse(
        &self,
        local: &str,
        raw_args: &str,
    ) -> Result<(Arc<RegisteredTool>, ToolCallInfo), Stop> {
        let spec = self.tools.get(local).cloned().ok_or_else(|| {
            Stop::before_call(FailureKind::UnknownTool, format!("unknown tool `{local}`"))
        })?;
        let args: Value = if raw_args.trim().is_empty() {
            Value::Object(Map::new())
        } else {
            serde_json::from_str(raw_args).map_err(|e| {
                Stop::before_call(
                    FailureKind::BadArguments,
                    format!("arguments are not valid JSON: {e}"),
                )
            })?
        };
        if !args.is_object() {
            return Err(Stop::before_call(
                FailureKind::BadArguments,
                "arguments must be a JSON object".into(),
            ));
        }
        let info = ToolCallInfo {
            session: self.session.clone(),
            local_name: local.to_string(),
            origin: spec.tool.binding.clone(),
            args,
        };
        Ok((spec, info))
    }

    /// `before:<hook>`: any hook may deny.
    fn before_hooks(&self, info: &ToolCallInfo, out: &mut ToolOutcome) -> Result<(), Stop> {
        for h in &self.hooks {
            out.stage(format!("before:{}", h.name()));
            if let HookDecision::Deny(why) = h.before_tool(info) {
                return Err(Stop::before_call(
                    FailureKind::HookDenied,
                    format!("call blocked by {}: {why}", h.name()),
                ));
            }
        }
        Ok(())
    }

    /// `approval`: the policy decides; annotations are hints for the approver only.
    async fn approve(&self, spec: &RegisteredTool, info: &ToolCallInfo) -> Result<(), Stop> {
        let approved = match spec.policy.approval {
            Approval::Auto => true,
            Approval::Deny => false,
            Approval::Ask => {
                let req = ApprovalRequest {
                    call: info,
                    annotations: spec.tool.annotations.as_ref(),
                };
                self.approver.approve(&req).await
            }
        };
        if approved {
            return Ok(());
        }
        Err(Stop::before_call(
            FailureKind::ApprovalDenied,
            format!("call to `{}` was not approved", info.local_name),
        ))
    }

    fn after(&self, info: &ToolCallInfo, mut out: ToolOutcome) -> ToolOutcome {
        for h in &self.hooks {
            out.stage(format!("after:{}", h.name()));
            h.after_tool(info, &out);
        }
        out
    }
}

/// `validate_input`: bad arguments go back to the model; no request is sent.
async fn validate_input(spec: &RegisteredTool, info: &ToolCallInfo) -> Result<(), Stop> {
    let Some(v) = &spec.tool.input_validator else {
        return Ok(());
    };
    bounded_validate(v, &info.args).await.map_err(|e| {
        Stop::before_call(
            FailureKind::InvalidArguments,
            format!("invalid arguments for `{}`: {e}", info.local_name),
        )
    })
}

/// Validate within the shared budget (off the executor when it could be
/// slow); errors in the protocol's one format, a budget overrun as one error.
async fn bounded_validate(schema: &Arc<CheckedSchema>, value: &Value) -> Result<(), String> {
    Validation::shared()
        .validate(None, schema, value.clone())
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// How many times a call whose outcome is unknown was sent, in words.
fn attempts_told(attempts: u32) -> String {
    match attempts {
        0 | 1 => "it was not retried".to_owned(),
        n => format!("it was sent {n} times (a read-only idempotent tool is re-sent once)"),
    }
}

/// `call`: the handler sends the request; a fault says what is known about its effect.
async fn call(
    spec: &RegisteredTool,
    info: &ToolCallInfo,
    out: &mut ToolOutcome,
) -> Result<HandlerOutput, Stop> {
    let args = info.args.as_object().cloned().unwrap_or_default();
    match spec.handler.call(args).await {
        Ok(output) => {
            out.attempts = output.attempts;
            out.artifacts = output.artifacts.iter().map(|a| a.path.clone()).collect();
            Ok(output)
        }
        Err(f) => {
            out.attempts = f.attempts;
            let message = match f.fault.state() {
                CallState::Unknown => format!(
                    "{} — the call's outcome is unknown (it may or may not have taken effect); {}",
                    f.fault,
                    attempts_told(f.attempts)
                ),
                _ => f.fault.to_string(),
            };
            Err(Stop {
                failure: Failure::Fault(f.fault),
                message,
            })
        }
    }
}

/// `validate_output`: the model gets the result, the tool's error, or (for a
/// broken output contract) a notice while the violation goes to the audit trail.
async fn check_output(
    spec: &RegisteredTool,
    local: &str,
    output: HandlerOutput,
) -> Result<String, Stop> {
    if let Some(report) = output.tool_error {
        let text = if output.text.is_empty() {
            "tool reported an error".to_string()
        } else {
            output.text
        };
        return Err(Stop {
            failure: Failure::ToolError(report.kind),
            message: cap(text),
        });
    }
    if let Some(why) = output.refused {
        return Err(Stop {
            failure: Failure::ContentRefused,
            message: why,
        });
    }
    if let Some(v) = &spec.tool.output_validator {
        let checked = match &output.structured {
            None => {
                Err("structuredContent missing but the tool declares an outputSchema".to_string())
            }
            Some(s) => bounded_validate(v, s).await,
        };
        if let Err(violation) = checked {
            return Err(Stop {
                failure: Failure::Contract { violation },
                message: format!("the result of `{local}` was withheld: it broke the tool's output contract (reported)"),
            });
        }
    }
    let body = match output
        .model_structured
        .as_ref()
        .or(output.structured.as_ref())
    {
        Some(s) => s.to_string(),
        None => output.text,
    };
    Ok(with_references(
        body,
        &output.artifacts,
        output.artifacts_withheld,
    ))
}

/// `body` capped for the model, then every artifact reference, which the
/// cap never cuts (there are at most `MAX_ARTIFACTS_PER_RESULT`), and how
/// many binary payloads were withheld past them.
fn with_references(body: String, artifacts: &[Artifact], withheld: usize) -> String {
    if artifacts.is_empty() && withheld == 0 {
        return cap(body);
    }
    let mut refs: Vec<String> = artifacts.iter().map(|a| a.reference.clone()).collect();
    if withheld > 0 {
        refs.push(format!(
            "[{withheld} more binary payloads withheld: at most {} are stored per result]",
            artifacts.len()
        ));
    }
    let refs = refs.join("\n");
    let room = MAX_MODEL_TEXT.saturating_sub(refs.len() + 1 + TRUNCATED.len());
    let mut text = truncate_marked(body, room, TRUNCATED);
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(&refs);
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_unknown_outcome_says_how_often_the_call_was_sent() {
        assert_eq!(super::attempts_told(1), "it was not retried");
        assert!(super::attempts_told(2).starts_with("it was sent 2 times"));
    }

    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    fn checked(schema: &Value) -> Arc<CheckedSchema> {
        Arc::new(
            CheckedSchema::compile(
                schema,
                &Default::default(),
                wasm_mcp_protocol::SchemaUse::Results,
            )
            .unwrap(),
        )
    }

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
                .push(format!("after {} err={:?}", self.name, o.error()));
        }
    }

    struct CountingApprover(AtomicUsize, bool);
    impl Approver for CountingApprover {
        fn approve<'a>(&'a self, _r: &'a ApprovalRequest<'a>) -> BoxFut<'a, bool> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::ready(self.1))
        }
    }

    fn spec(
        log: &Arc<Mutex<Vec<String>>>,
        approval: Approval,
        structured: Value,
    ) -> RegisteredTool {
        let input =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let output = json!({"type": "object", "required": ["ok"]});
        RegisteredTool {
            tool: Arc::new(Tool {
                local_name: "t".into(),
                binding: None,
                description: "test".into(),
                input_validator: Some(checked(&input)),
                input_schema: input,
                output_schema: Some(output.clone()),
                output_validator: Some(checked(&output)),
                annotations: None,
            }),
            policy: ToolPolicy {
                approval,
                ..Default::default()
            },
            handler: Arc::new(Recorder {
                log: log.clone(),
                structured,
            }),
        }
    }

    fn pipeline(
        log: &Arc<Mutex<Vec<String>>>,
        approval: Approval,
        deny_hook: bool,
        ok: bool,
    ) -> ToolPipeline {
        let mut r = ToolPipeline::new(Arc::new(NonInteractiveApprover::default()));
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
        let r = pipeline(&log, Approval::Auto, false, true);
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
        assert_eq!(o.state(), CallState::Completed);
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
        let r = pipeline(&log, Approval::Auto, false, true);
        let o = r.invoke("t", r#"{"n": "x"}"#).await;
        assert_eq!(o.error(), Some(FailureKind::InvalidArguments));
        assert!(
            o.model_text.starts_with("error: invalid arguments"),
            "{}",
            o.model_text
        );
        assert_eq!(o.state(), CallState::NotSent);
        assert!(!o.stages.contains(&"call".to_string()));
        // bad JSON
        assert_eq!(
            r.invoke("t", "{n:").await.error(),
            Some(FailureKind::BadArguments)
        );
        assert_eq!(
            r.invoke("t", "[1]").await.error(),
            Some(FailureKind::BadArguments)
        );
        assert_eq!(
            r.invoke("nope", "{}").await.error(),
            Some(FailureKind::UnknownTool)
        );
        // hook denial stops before approval
        let r = pipeline(&log, Approval::Auto, true, true);
        let o = r.invoke("t", r#"{"n": 1}"#).await;
        assert_eq!(o.error(), Some(FailureKind::HookDenied));
        assert!(!o.stages.contains(&"approval".to_string()));
        // policy deny / ask → non-interactive deny
        for a in [Approval::Deny, Approval::Ask] {
            let r = pipeline(&log, a, false, true);
            let o = r.invoke("t", r#"{"n": 1}"#).await;
            assert_eq!(o.error(), Some(FailureKind::ApprovalDenied));
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
        let mut r = ToolPipeline::new(approver.clone());
        r.register(spec(&log, Approval::Ask, json!({"bad": "secret-value"})));
        let o = r.invoke("t", r#"{"n": 1}"#).await;
        assert_eq!(approver.0.load(Ordering::SeqCst), 1);
        assert_eq!(o.error(), Some(FailureKind::Contract));
        assert!(o.contract_violation().unwrap().contains("ok"));
        assert!(
            !o.model_text.contains("secret-value"),
            "violating content not shown"
        );
        assert_eq!(o.state(), CallState::Completed);
    }

    #[tokio::test]
    async fn the_non_interactive_approver_answers_ask_with_ask_default() {
        let log = Arc::new(Mutex::new(vec![]));
        for (answer, approved) in [(AskDefault::Approve, true), (AskDefault::Deny, false)] {
            let mut r = ToolPipeline::new(Arc::new(NonInteractiveApprover { answer }));
            r.register(spec(&log, Approval::Ask, json!({"ok": 1})));
            let o = r.invoke("t", r#"{"n": 1}"#).await;
            assert_eq!(
                o.error().is_none(),
                approved,
                "{answer:?}: {}",
                o.model_text
            );
        }
    }

    #[tokio::test]
    async fn fork_is_independent() {
        let log = Arc::new(Mutex::new(vec![]));
        let base = pipeline(&log, Approval::Auto, false, true);
        let mut a = base.fork("task-a");
        a.replace_remote_tools(vec![]);
        let mut extra = spec(&log, Approval::Auto, json!({"ok": 1}));
        Arc::make_mut(&mut extra.tool).local_name = "u".into();
        a.register(extra);
        assert_eq!(a.session(), "task-a");
        assert_eq!(a.names(), ["t", "u"]);
        assert_eq!(base.names(), ["t"], "base unchanged");
        assert_eq!(base.tools()[0].local_name, "t");
    }
}
