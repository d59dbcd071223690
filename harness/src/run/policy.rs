//! Policy: the only source of MCP server launch configs and tool permissions.
//!
//! Two file shapes are accepted:
//! - TOML (`[[servers]]` tables, see `policy/default.toml`), and
//! - the common JSON `{"mcpServers": {"<id>": {"command": .., "args": [..]}}}` shape
//!   (camelCase or snake_case keys).
//!
//! The model can never choose a command, cwd or env: those come from here, with
//! `{worktree}`, `{runtime_dir}` and `{repo}` expanded by the harness.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Protocol version used when a server entry lists none.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-11-25";
const DEFAULT_TIMEOUT_MS: u64 = 30_000;

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid policy syntax: {0}")]
    Syntax(String),
    #[error("server `{server}`: {message}")]
    Invalid { server: String, message: String },
    #[error("policy: {0}")]
    Global(String),
    #[error("unknown placeholder `{{{0}}}` (known: worktree, runtime_dir, repo)")]
    UnknownPlaceholder(String),
    #[error("unterminated placeholder in `{0}`")]
    Unterminated(String),
    /// Any of the above, for a policy read from a file (names the file).
    #[error("policy {}: {error}", path.display())]
    File {
        path: PathBuf,
        error: Box<PolicyError>,
    },
}

/// How a tool call is approved. Annotations from the server are hints only;
/// this is what decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    Auto,
    Deny,
    /// Ask the approver; the non-interactive approver answers with `approver.ask_default`.
    #[default]
    Ask,
}

/// What to do with non-text content blocks (images, audio, embedded resources).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ArtifactMode {
    /// Decode and store as a file in the task's runtime dir; the model gets a reference.
    #[default]
    Store,
    /// Refuse: the model gets an error text instead of the content.
    Refuse,
}

/// Per-tool policy.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolPolicy {
    #[serde(default)]
    pub approval: Approval,
    /// Declared by the policy, not by the server's annotations.
    #[serde(default, alias = "readOnly")]
    pub read_only: bool,
    #[serde(default)]
    pub idempotent: bool,
}

impl ToolPolicy {
    /// Timeouts/disconnects are retried automatically only for tools the policy
    /// marks read-only *and* idempotent.
    pub fn retry_allowed(&self) -> bool {
        self.read_only && self.idempotent
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerPolicy {
    pub id: String,
    /// A child process speaking MCP over stdio. Exactly one of `command` and `url`.
    #[serde(default)]
    pub command: Option<String>,
    /// A Streamable HTTP endpoint (`http://host:port/mcp`).
    #[serde(default)]
    pub url: Option<String>,
    /// With `url`: the env var of the harness process holding the bearer
    /// token, read at connect time (never from the model, never logged).
    #[serde(default, alias = "bearerTokenEnv")]
    pub bearer_token_env: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Defaults to `{worktree}`.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The child's complete environment (plus `HOME` = runtime dir). Nothing is inherited.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default, alias = "allowedTools")]
    pub allowed_tools: Vec<String>,
    /// Wins over `allowed_tools`.
    #[serde(default, alias = "deniedTools")]
    pub denied_tools: Vec<String>,
    #[serde(default = "default_versions", alias = "protocolVersions")]
    pub protocol_versions: Vec<String>,
    #[serde(default = "default_timeout_ms", alias = "requestTimeoutMs")]
    pub request_timeout_ms: u64,
    #[serde(default)]
    pub artifacts: ArtifactMode,
    #[serde(default)]
    pub tools: BTreeMap<String, ToolPolicy>,
}

fn default_versions() -> Vec<String> {
    vec![DEFAULT_PROTOCOL_VERSION.to_string()]
}

/// The default allowlist of a JSON `mcpServers` entry: the versions this
/// client speaks (the newest is offered; a server may answer an older one).
pub const DESKTOP_PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// The first MCP version without the `initialize` handshake (stateless).
const STATELESS_FROM: &str = "2026-07-28";

fn desktop_versions() -> Vec<String> {
    DESKTOP_PROTOCOL_VERSIONS.map(String::from).to_vec()
}
fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

impl ServerPolicy {
    /// Deny-first exposure: listed in `allowed_tools` and not in `denied_tools`.
    pub fn is_exposed(&self, tool: &str) -> bool {
        !self.denied_tools.iter().any(|t| t == tool) && self.allowed_tools.iter().any(|t| t == tool)
    }

    /// Tools that must be present on the server (allowed and not denied).
    pub fn required_tools(&self) -> Vec<&str> {
        self.allowed_tools
            .iter()
            .filter(|t| self.is_exposed(t))
            .map(String::as_str)
            .collect()
    }

    pub fn tool_policy(&self, tool: &str) -> ToolPolicy {
        self.tools.get(tool).cloned().unwrap_or_default()
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    /// Where this server is, resolved for one task.
    pub fn endpoint(&self, ph: &Placeholders) -> Result<Endpoint, PolicyError> {
        match &self.url {
            Some(url) => Ok(Endpoint::Http(HttpSpec {
                url: url.clone(),
                bearer_token_env: self.bearer_token_env.clone(),
            })),
            None => self.launch_spec(ph).map(Endpoint::Command),
        }
    }

    /// Resolve the launch spec for one task. Relative commands containing a `/`
    /// are taken relative to the repo root.
    pub fn launch_spec(&self, ph: &Placeholders) -> Result<LaunchSpec, PolicyError> {
        let command = self
            .command
            .as_deref()
            .ok_or_else(|| PolicyError::Invalid {
                server: self.id.clone(),
                message: "has a `url`, not a `command`: nothing to launch".into(),
            })?;
        let cmd = ph.expand(command)?;
        let program = if cmd.contains('/') && Path::new(&cmd).is_relative() {
            ph.repo.join(&cmd)
        } else {
            PathBuf::from(cmd)
        };
        let args = self
            .args
            .iter()
            .map(|a| ph.expand(a))
            .collect::<Result<Vec<_>, _>>()?;
        let cwd = PathBuf::from(ph.expand(self.cwd.as_deref().unwrap_or("{worktree}"))?);
        let mut env = BTreeMap::new();
        for (k, v) in &self.env {
            env.insert(k.clone(), ph.expand(v)?);
        }
        env.insert("HOME".into(), ph.runtime_dir.display().to_string());
        Ok(LaunchSpec {
            program,
            args,
            cwd,
            env,
        })
    }

    fn validate(&self) -> Result<(), PolicyError> {
        let bad = |message: String| PolicyError::Invalid {
            server: self.id.clone(),
            message,
        };
        if self.id.is_empty()
            || !self
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(bad("id must be non-empty [A-Za-z0-9_-]".into()));
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "give exactly one of `command` and `url`, not both".into()
                ))
            }
            (None, None) => {
                return Err(bad(
                    "needs `command` (a stdio child process) or `url` (Streamable HTTP)".into(),
                ))
            }
            (Some(command), None) => self.validate_command(command).map_err(bad)?,
            (None, Some(url)) => self.validate_url(url).map_err(bad)?,
        }
        // The server works in the task's worktree: its cwd is the worktree or
        // below it. Any command is accepted; args may use the placeholders.
        let cwd = self.cwd.as_deref().unwrap_or("{worktree}");
        if !(cwd == "{worktree}" || cwd.starts_with("{worktree}/")) {
            return Err(bad(format!(
                "cwd must be `{{worktree}}` or below it, not `{cwd}`"
            )));
        }
        if self.protocol_versions.is_empty() {
            return Err(bad("protocol_versions is empty".into()));
        }
        if let Some(v) = self
            .protocol_versions
            .iter()
            .find(|v| !is_protocol_version(v))
        {
            return Err(bad(format!(
                "protocol_versions: `{v}` is not an MCP version (YYYY-MM-DD)"
            )));
        }
        if self
            .protocol_versions
            .iter()
            .all(|v| v.as_str() >= STATELESS_FROM)
        {
            return Err(bad(format!(
                "protocol_versions: {:?} has no version with the `initialize` handshake, which is how \
                 this harness connects (one before {STATELESS_FROM}, e.g. 2025-11-25); such a server \
                 could never be connected",
                self.protocol_versions
            )));
        }
        if let Some(k) = self
            .env
            .keys()
            .find(|k| k.is_empty() || k.contains(['=', '\0']))
        {
            return Err(bad(format!("env: invalid variable name {k:?}")));
        }
        if self.request_timeout_ms == 0 {
            return Err(bad("request_timeout_ms must be > 0".into()));
        }
        for name in self.tools.keys() {
            if !self.allowed_tools.contains(name) {
                return Err(bad(format!(
                    "tools.{name} configured but `{name}` is not in allowed_tools"
                )));
            }
        }
        // Placeholders must be known even before a task exists.
        let probe = Placeholders {
            worktree: "/w".into(),
            runtime_dir: "/r".into(),
            repo: "/p".into(),
        };
        if let Some(c) = &self.command {
            probe.expand(c)?;
        }
        for a in &self.args {
            probe.expand(a)?;
        }
        if let Some(c) = &self.cwd {
            probe.expand(c)?;
        }
        for v in self.env.values() {
            probe.expand(v)?;
        }
        Ok(())
    }
}

impl ServerPolicy {
    fn validate_command(&self, command: &str) -> Result<(), String> {
        if command.trim().is_empty() {
            return Err("command is empty".into());
        }
        if self.bearer_token_env.is_some() {
            return Err("`bearer_token_env` applies to a `url` server, not a `command`".into());
        }
        Ok(())
    }

    /// The `url` form: an `http://` URL without credentials in it, and none
    /// of the child-process fields (they would be silently ignored).
    fn validate_url(&self, url: &str) -> Result<(), String> {
        let ignored = [
            ("args", !self.args.is_empty()),
            ("env", !self.env.is_empty()),
            ("cwd", self.cwd.is_some()),
        ];
        if let Some((field, _)) = ignored.iter().find(|(_, set)| *set) {
            return Err(format!(
                "`{field}` applies to a `command` server, not a `url` one"
            ));
        }
        check_http_url(url)?;
        if let Some(var) = &self.bearer_token_env {
            if var.is_empty() || var.contains(['=', '\0']) {
                return Err(format!("bearer_token_env: invalid variable name {var:?}"));
            }
        }
        Ok(())
    }
}

/// `url` must be `http://host[:port]/path`: no credentials (they would end
/// up in logs and traces; use `bearer_token_env`), no fragment. There is no
/// TLS in the client, so `https://` is refused here rather than at connect.
fn check_http_url(url: &str) -> Result<(), String> {
    let parsed = reqwest_mcp::Url::parse(url).map_err(|e| format!("url `{url}`: {e}"))?;
    if parsed.scheme() != "http" {
        return Err(format!(
            "url scheme `{}` unsupported (only http://; put a TLS-terminating proxy on loopback for https)",
            parsed.scheme()
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(
            "url must not carry credentials; name the token's env var in `bearer_token_env`".into(),
        );
    }
    if parsed.host().is_none() || parsed.fragment().is_some() {
        return Err(format!("url `{url}` needs a host and no fragment"));
    }
    Ok(())
}

/// Where a server is: a child process to spawn, or an HTTP endpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    Command(LaunchSpec),
    Http(HttpSpec),
}

/// A Streamable HTTP server: its URL and the env var naming its token.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSpec {
    pub url: String,
    pub bearer_token_env: Option<String>,
}

/// A fully resolved child process spec.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: BTreeMap<String, String>,
}

/// An MCP protocol version: a date, `YYYY-MM-DD`.
fn is_protocol_version(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
}

/// How `approval = "ask"` is decided.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ApproverMode {
    /// No human: `ask` resolves to `ask_default`.
    #[default]
    NonInteractive,
}

/// What `ask` resolves to without a human.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AskDefault {
    #[default]
    Deny,
    Approve,
}

/// Answer of the non-interactive approver to `approval = "ask"`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ApproverPolicy {
    /// `"non-interactive"` (the only built-in mode).
    #[serde(default)]
    pub mode: ApproverMode,
    /// `"deny"` (default) or `"approve"`.
    #[serde(default)]
    pub ask_default: AskDefault,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub servers: Vec<ServerPolicy>,
    pub approver: ApproverPolicy,
    pub max_rounds: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlPolicy {
    #[serde(default)]
    servers: Vec<ServerPolicy>,
    #[serde(default)]
    approver: ApproverPolicy,
    #[serde(default = "default_rounds")]
    max_rounds: usize,
}

fn default_rounds() -> usize {
    16
}

/// JSON `mcpServers` entry: the id is the map key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct JsonServer {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default, alias = "bearer_token_env")]
    bearer_token_env: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// `"stdio"` (with `command`) or `"http"` / `"streamable-http"` (with `url`).
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default, alias = "allowed_tools")]
    allowed_tools: Vec<String>,
    #[serde(default, alias = "denied_tools")]
    denied_tools: Vec<String>,
    /// Desktop client files never list versions; their servers may answer
    /// with an older one, which desktop clients accept too.
    #[serde(default = "desktop_versions", alias = "protocol_versions")]
    protocol_versions: Vec<String>,
    #[serde(default = "default_timeout_ms", alias = "request_timeout_ms")]
    request_timeout_ms: u64,
    #[serde(default)]
    artifacts: ArtifactMode,
    #[serde(default)]
    tools: BTreeMap<String, ToolPolicy>,
    /// Keys desktop MCP clients (Cline, Roo, Windsurf, Gemini CLI, ...)
    /// write, so their files load as they are. `disabled` servers are left
    /// out; `disabledTools` / `excludeTools` are denied. The client's own
    /// approvals and timeouts (`autoApprove`, `alwaysAllow`, `trust`,
    /// `timeout`, `includeTools`) are accepted and not used: this policy's
    /// `allowedTools` and `tools` decide.
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    disabled_tools: Vec<String>,
    #[serde(default)]
    exclude_tools: Vec<String>,
    #[serde(default)]
    transport_type: Option<String>,
    #[serde(default, rename = "autoApprove")]
    _auto_approve: Option<serde_json::Value>,
    #[serde(default, rename = "alwaysAllow")]
    _always_allow: Option<serde_json::Value>,
    #[serde(default, rename = "trust")]
    _trust: Option<serde_json::Value>,
    #[serde(default, rename = "timeout")]
    _timeout: Option<serde_json::Value>,
    #[serde(default, rename = "includeTools")]
    _include_tools: Option<serde_json::Value>,
    #[serde(default, rename = "description")]
    _description: Option<serde_json::Value>,
}

/// The `mcpServers` file; other top-level keys (a desktop client's own
/// settings in the same file) are ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonPolicy {
    mcp_servers: BTreeMap<String, JsonServer>,
    #[serde(default)]
    approver: Option<ApproverPolicy>,
    #[serde(default = "default_rounds", alias = "max_rounds")]
    max_rounds: usize,
}

impl Policy {
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        let parsed = if path.extension().is_some_and(|e| e == "json")
            || text.trim_start().starts_with('{')
        {
            Self::from_json(&text)
        } else {
            Self::from_toml(&text)
        };
        parsed.map_err(|error| PolicyError::File {
            path: path.to_owned(),
            error: Box::new(error),
        })
    }

    pub fn from_toml(text: &str) -> Result<Self, PolicyError> {
        let raw: TomlPolicy =
            toml::from_str(text).map_err(|e| PolicyError::Syntax(e.to_string()))?;
        Self::build(raw.servers, raw.approver, raw.max_rounds)
    }

    pub fn from_json(text: &str) -> Result<Self, PolicyError> {
        let raw: JsonPolicy =
            serde_json::from_str(text).map_err(|e| PolicyError::Syntax(e.to_string()))?;
        let mut servers = Vec::new();
        for (id, mut s) in raw.mcp_servers {
            if s.disabled {
                continue;
            }
            s.kind = s.kind.or(s.transport_type.take());
            s.denied_tools.append(&mut s.disabled_tools);
            s.denied_tools.append(&mut s.exclude_tools);
            if let Some(kind) = &s.kind {
                let fits = match kind.as_str() {
                    "stdio" => s.url.is_none(),
                    "http" | "streamable-http" | "streamableHttp" => s.command.is_none(),
                    _ => false,
                };
                if !fits {
                    return Err(PolicyError::Invalid {
                        server: id,
                        message: format!(
                            "transport type `{kind}` unsupported here (stdio with `command`, http with `url`)"
                        ),
                    });
                }
            }
            servers.push(ServerPolicy {
                id,
                command: s.command,
                url: s.url,
                bearer_token_env: s.bearer_token_env,
                args: s.args,
                cwd: s.cwd,
                env: s.env,
                allowed_tools: s.allowed_tools,
                denied_tools: s.denied_tools,
                protocol_versions: s.protocol_versions,
                request_timeout_ms: s.request_timeout_ms,
                artifacts: s.artifacts,
                tools: s.tools,
            });
        }
        Self::build(servers, raw.approver.unwrap_or_default(), raw.max_rounds)
    }

    fn build(
        servers: Vec<ServerPolicy>,
        approver: ApproverPolicy,
        max_rounds: usize,
    ) -> Result<Self, PolicyError> {
        if servers.is_empty() {
            return Err(PolicyError::Global("no servers configured".into()));
        }
        let mut ids = BTreeSet::new();
        for s in &servers {
            s.validate()?;
            if !ids.insert(s.id.clone()) {
                return Err(PolicyError::Global(format!(
                    "duplicate server id `{}`",
                    s.id
                )));
            }
        }
        if max_rounds == 0 {
            return Err(PolicyError::Global("max_rounds must be > 0".into()));
        }
        Ok(Self {
            servers,
            approver,
            max_rounds,
        })
    }

    pub fn server(&self, id: &str) -> Option<&ServerPolicy> {
        self.servers.iter().find(|s| s.id == id)
    }
}

/// Values substituted into `command`, `args`, `cwd` and `env` values.
#[derive(Debug, Clone)]
pub struct Placeholders {
    pub worktree: PathBuf,
    pub runtime_dir: PathBuf,
    pub repo: PathBuf,
}

impl Placeholders {
    /// Expand `{worktree}`, `{runtime_dir}`, `{repo}`; `{{`/`}}` are literal braces.
    pub fn expand(&self, s: &str) -> Result<String, PolicyError> {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(i) = rest.find(['{', '}']) {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                out.push(tail.as_bytes()[0] as char);
                rest = &tail[2..];
                continue;
            }
            if let Some(after) = tail.strip_prefix('}') {
                out.push('}');
                rest = after;
                continue;
            }
            let end = tail
                .find('}')
                .ok_or_else(|| PolicyError::Unterminated(s.to_string()))?;
            let name = &tail[1..end];
            let value = match name {
                "worktree" => &self.worktree,
                "runtime_dir" => &self.runtime_dir,
                "repo" => &self.repo,
                other => return Err(PolicyError::UnknownPlaceholder(other.to_string())),
            };
            out.push_str(&value.display().to_string());
            rest = &tail[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML: &str = r#"
max_rounds = 5
[approver]
ask_default = "deny"

[[servers]]
id = "ws"
command = "target/debug/wasm-mcp"
args = ["serve", "--worktree", "{worktree}", "--plugins", "{repo}/dist/plugins"]
env = { RUST_LOG = "warn", CACHE = "{runtime_dir}/cache" }
allowed_tools = ["read_file", "write_file", "search"]
denied_tools = ["search"]
request_timeout_ms = 1500

[servers.tools.write_file]
approval = "auto"
"#;

    fn ph() -> Placeholders {
        Placeholders {
            worktree: "/repo/.worktrees/t1".into(),
            runtime_dir: "/run/t1".into(),
            repo: "/repo".into(),
        }
    }

    #[test]
    fn toml_policy_resolves_launch_spec() {
        let p = Policy::from_toml(TOML).unwrap();
        assert_eq!(p.max_rounds, 5);
        let s = p.server("ws").unwrap();
        let spec = s.launch_spec(&ph()).unwrap();
        assert_eq!(spec.program, PathBuf::from("/repo/target/debug/wasm-mcp"));
        assert_eq!(
            spec.args,
            [
                "serve",
                "--worktree",
                "/repo/.worktrees/t1",
                "--plugins",
                "/repo/dist/plugins"
            ]
        );
        assert_eq!(spec.cwd, PathBuf::from("/repo/.worktrees/t1"));
        // Only listed env plus HOME.
        let keys: Vec<_> = spec.env.keys().cloned().collect();
        assert_eq!(keys, ["CACHE", "HOME", "RUST_LOG"]);
        assert_eq!(spec.env["HOME"], "/run/t1");
        assert_eq!(spec.env["CACHE"], "/run/t1/cache");
        assert_eq!(s.request_timeout(), Duration::from_millis(1500));
        assert_eq!(s.protocol_versions, [DEFAULT_PROTOCOL_VERSION]);
    }

    /// A server allowed only versions without the `initialize` handshake
    /// could never be connected (the harness connects with it): refused at
    /// load, where it failed every run at its connect (a helper's find).
    #[test]
    fn versions_without_a_handshake_alone_are_refused() {
        let with = |versions: &str| {
            let toml = TOML.replace(
                "request_timeout_ms = 1500",
                &format!("request_timeout_ms = 1500\nprotocol_versions = {versions}"),
            );
            Policy::from_toml(&toml).map(|_| ())
        };
        let e = with(r#"["2026-07-28"]"#).unwrap_err().to_string();
        assert!(
            e.contains("no version with the `initialize` handshake"),
            "{e}"
        );
        assert!(with(r#"["2026-07-28", "2025-11-25"]"#).is_ok());
    }

    #[test]
    fn deny_wins_over_allow_and_unlisted_is_hidden() {
        let p = Policy::from_toml(TOML).unwrap();
        let s = p.server("ws").unwrap();
        assert!(s.is_exposed("read_file"));
        assert!(!s.is_exposed("search"), "denied wins");
        assert!(!s.is_exposed("list_dir"), "unlisted is never exposed");
        assert_eq!(s.required_tools(), ["read_file", "write_file"]);
        assert_eq!(s.tool_policy("write_file").approval, Approval::Auto);
        assert_eq!(
            s.tool_policy("read_file").approval,
            Approval::Ask,
            "default is ask"
        );
    }

    #[test]
    fn json_mcp_servers_shape() {
        let json = r#"{"mcpServers": {"ws": {
            "type": "stdio",
            "command": "/bin/wasm-mcp",
            "args": ["serve", "--worktree", "{worktree}"],
            "env": {"A": "1"},
            "allowedTools": ["read_file"],
            "requestTimeoutMs": 250,
            "tools": {"read_file": {"approval": "auto", "read_only": true, "idempotent": true}}
        }}}"#;
        let p = Policy::from_json(json).unwrap();
        let s = p.server("ws").unwrap();
        assert_eq!(s.request_timeout_ms, 250);
        assert!(s.tool_policy("read_file").retry_allowed());
        let spec = s.launch_spec(&ph()).unwrap();
        assert_eq!(spec.program, PathBuf::from("/bin/wasm-mcp"));
        assert_eq!(spec.env.len(), 2);
    }

    #[test]
    fn rejects_bad_policies() {
        // Any server is accepted without a `--worktree` flag, but it must run in the worktree.
        let no_flag = TOML.replace("\"--worktree\", \"{worktree}\", ", "");
        assert!(Policy::from_toml(&no_flag).is_ok());
        for cwd in ["/tmp", "{repo}", "{runtime_dir}", "{worktree}x"] {
            let outside = TOML.replacen(
                "[servers.tools",
                &format!("cwd = \"{cwd}\"\n[servers.tools"),
                1,
            );
            assert!(
                matches!(Policy::from_toml(&outside), Err(PolicyError::Invalid { message, .. }) if message.contains("cwd")),
                "{cwd}"
            );
        }
        let unknown_ph = TOML.replace("{repo}/dist", "{home}/dist");
        assert!(matches!(
            Policy::from_toml(&unknown_ph),
            Err(PolicyError::UnknownPlaceholder(p)) if p == "home"
        ));
        let typo = TOML.replace("allowed_tools", "allowed_tool");
        assert!(matches!(
            Policy::from_toml(&typo),
            Err(PolicyError::Syntax(_))
        ));
        let dup = format!("{TOML}\n[[servers]]\nid = \"ws\"\ncommand = \"x\"\nargs = [\"--worktree\", \"{{worktree}}\"]\n");
        assert!(
            matches!(Policy::from_toml(&dup), Err(PolicyError::Global(m)) if m.contains("duplicate"))
        );
        let sse = r#"{"mcpServers": {"x": {"type": "sse", "command": "c", "args": ["--worktree", "{worktree}"]}}}"#;
        assert!(Policy::from_json(sse).is_err());
        assert!(matches!(
            Policy::from_json(sse),
            Err(PolicyError::Invalid { server, message }) if server == "x" && message.contains("sse")
        ));
        let stray_tool = TOML.replace("[servers.tools.write_file]", "[servers.tools.list_dir]");
        assert!(Policy::from_toml(&stray_tool).is_err());
        assert!(matches!(
            Policy::from_toml(&stray_tool),
            Err(PolicyError::Invalid { message, .. }) if message.contains("tools.list_dir")
        ));
        let bad_env = TOML.replace("RUST_LOG = ", "\"A=B\" = ");
        assert!(matches!(
            Policy::from_toml(&bad_env),
            Err(PolicyError::Invalid { message, .. }) if message.contains("env")
        ));
    }

    #[test]
    fn load_errors_name_the_file_and_field() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("bad-policy.toml");
        std::fs::write(
            &path,
            TOML.replace("request_timeout_ms = 1500", "request_timeout_ms = \"soon\""),
        )
        .unwrap();
        let msg = Policy::load(&path).unwrap_err().to_string();
        assert!(msg.contains("bad-policy.toml"), "{msg}");
        assert!(msg.contains("request_timeout_ms"), "{msg}");
        let path = d.path().join("bad-policy.json");
        std::fs::write(
            &path,
            r#"{"mcpServers": {"ws": {"command": "c", "args": [], "cwd": "/"}}}"#,
        )
        .unwrap();
        let msg = Policy::load(&path).unwrap_err().to_string();
        assert!(
            msg.contains("bad-policy.json") && msg.contains("cwd"),
            "{msg}"
        );
    }

    #[test]
    fn desktop_client_mcp_servers_json_is_accepted_as_written() {
        // Verbatim shape of a desktop client's config (no harness-specific keys).
        let json = r#"{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/username/Desktop"]
    },
    "notes": {
      "type": "stdio",
      "command": "python3",
      "args": ["server.py"],
      "env": {"NOTES_TOKEN": "abc"}
    }
  }
}"#;
        let p = Policy::from_json(json).unwrap();
        let fs = p.server("filesystem").unwrap();
        let spec = fs.launch_spec(&ph()).unwrap();
        assert_eq!(spec.program, PathBuf::from("npx"));
        assert_eq!(spec.cwd, ph().worktree, "runs in the worktree");
        assert!(
            fs.required_tools().is_empty(),
            "deny-first: nothing exposed unless allowed"
        );
        assert_eq!(p.server("notes").unwrap().env["NOTES_TOKEN"], "abc");
        // An older server's answer is accepted as desktop clients accept it.
        assert_eq!(fs.protocol_versions, DESKTOP_PROTOCOL_VERSIONS);
    }

    #[test]
    fn desktop_client_keys_are_accepted_and_only_narrow_exposure() {
        // Cline / Roo / Windsurf / Gemini CLI style entries, other settings at the top.
        let json = r#"{
  "theme": "dark",
  "mcpServers": {
    "fs": {
      "command": "node", "args": ["server.js", "{worktree}"],
      "disabled": false, "autoApprove": ["write_file"], "alwaysAllow": [],
      "timeout": 60, "transportType": "stdio", "trust": true,
      "allowedTools": ["read_file", "write_file"],
      "disabledTools": ["write_file"]
    },
    "off": {"command": "x", "disabled": true},
    "gem": {"command": "y", "excludeTools": ["rm"], "includeTools": ["ls"], "description": "d"}
  }
}"#;
        let p = Policy::from_json(json).unwrap();
        assert!(p.server("off").is_none(), "disabled servers are left out");
        let fs = p.server("fs").unwrap();
        assert!(fs.is_exposed("read_file"));
        assert!(!fs.is_exposed("write_file"), "disabledTools denies");
        assert_eq!(fs.tool_policy("read_file").approval, Approval::Ask);
        assert!(p
            .server("gem")
            .unwrap()
            .denied_tools
            .contains(&"rm".to_string()));
        let typo = json.replace("\"disabledTools\"", "\"disabledTool\"");
        assert!(
            Policy::from_json(&typo).is_err(),
            "unknown server keys still refused"
        );
        let sse = json.replace("\"transportType\": \"stdio\"", "\"transportType\": \"sse\"");
        assert!(Policy::from_json(&sse).is_err());
    }

    #[test]
    fn placeholder_escapes() {
        assert_eq!(ph().expand("{{x}} {repo}").unwrap(), "{x} /repo");
        assert!(matches!(
            ph().expand("{repo"),
            Err(PolicyError::Unterminated(_))
        ));
    }
}
