//! RFC 9728 OAuth 2.0 Protected Resource Metadata, served at
//! `/.well-known/oauth-protected-resource` (and the path-inserted form
//! `/.well-known/oauth-protected-resource/mcp`), and the `WWW-Authenticate`
//! challenges that point at it (RFC 6750 §3, MCP authorization spec).

use serde_json::{json, Value};

use super::auth::{AuthError, OAuthConfig};

/// Path of the metadata document (without the resource path suffix).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";
/// The MCP endpoint's path.
pub const MCP_PATH: &str = "/mcp";

/// This resource's identity as seen by clients.
#[derive(Clone, Debug)]
pub struct Resource {
    /// The MCP endpoint URL, e.g. `http://127.0.0.1:8080/mcp`.
    pub url: String,
    /// Where its metadata is, e.g. `http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp`;
    /// `None` without `--oauth-config`: a static token has no authorization
    /// server to name, and metadata naming none sent the MCP Inspector into
    /// an OAuth flow that could not succeed instead of asking for the token
    /// (a helper's find). The challenges are then plain `Bearer` ones.
    pub metadata_url: Option<String>,
}

impl Resource {
    /// `base` is `scheme://authority` without a trailing slash; `oauth`:
    /// whether an authorization server is configured.
    pub fn new(base: &str, oauth: bool) -> Self {
        let base = base.trim_end_matches('/');
        Resource {
            url: format!("{base}{MCP_PATH}"),
            metadata_url: oauth.then(|| format!("{base}{WELL_KNOWN}{MCP_PATH}")),
        }
    }

    /// `, resource_metadata="…"` when there is metadata, else nothing.
    fn pointer(&self) -> String {
        self.metadata_url
            .as_ref()
            .map(|url| format!(", resource_metadata=\"{url}\""))
            .unwrap_or_default()
    }

    /// The metadata document.
    pub fn document(&self, oauth: Option<&OAuthConfig>) -> Value {
        let mut doc = json!({
            "resource": self.url,
            "bearer_methods_supported": ["header"],
            "resource_name": "wasm-mcp",
        });
        if let Some(o) = oauth {
            doc["authorization_servers"] = json!([o.issuer]);
            doc["scopes_supported"] = json!(o.scopes());
        }
        doc
    }

    /// `WWW-Authenticate` for a 401.
    pub fn challenge(&self, e: &AuthError) -> String {
        match e {
            AuthError::Missing => match &self.metadata_url {
                Some(url) => format!("Bearer resource_metadata=\"{url}\""),
                None => "Bearer".to_string(),
            },
            AuthError::Invalid(reason) => format!(
                "Bearer error=\"invalid_token\", error_description=\"{}\"{}",
                quoted(reason),
                self.pointer()
            ),
        }
    }

    /// `WWW-Authenticate` for a 403 on a tool whose scope the token lacks.
    pub fn insufficient_scope(&self, scope: &str) -> String {
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\"{}",
            quoted(scope),
            self.pointer()
        )
    }
}

/// Text safe inside a quoted-string (no quotes, backslashes or controls).
fn quoted(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() && *c != '"' && *c != '\\')
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_challenges() {
        let r = Resource::new("http://127.0.0.1:8080/", true);
        assert_eq!(r.url, "http://127.0.0.1:8080/mcp");
        assert_eq!(
            r.challenge(&AuthError::Missing),
            "Bearer resource_metadata=\"http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp\""
        );
        assert!(r
            .challenge(&AuthError::Invalid("bad \"x\"".into()))
            .contains("error_description=\"bad x\""));
        assert_eq!(r.document(None)["resource"], "http://127.0.0.1:8080/mcp");
        let token_only = Resource::new("http://127.0.0.1:8080", false);
        assert_eq!(token_only.challenge(&AuthError::Missing), "Bearer");
        let invalid = token_only.challenge(&AuthError::Invalid("expired".into()));
        assert_eq!(
            invalid,
            "Bearer error=\"invalid_token\", error_description=\"expired\""
        );
        assert!(!token_only
            .insufficient_scope("s")
            .contains("resource_metadata"));
    }
}
