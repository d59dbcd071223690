//! The Streamable HTTP way to a server: rmcp's client transport on a reqwest
//! client configured here. Only how bytes move differs from stdio; the
//! handshake, discovery and calls are [`super::connection`]'s.
//!
//! What a hostile endpoint meets:
//! * redirects are never followed (a 3xx is an error for that request), so
//!   neither the token nor a call goes to another origin;
//! * a JSON body or an SSE event over [`MAX_FRAME_BYTES`] (the stdio frame
//!   limit) is refused before it is decoded; garbage, non-JSON and 4xx/5xx
//!   answers are errors for their request, carrying only a bounded prefix;
//! * silence (no connect, no headers, an SSE stream that never ends) is cut
//!   by the connect timeout, the handshake timeout and each request's
//!   timeout in the connection;
//! * the bearer token comes from an env var of the harness process, read at
//!   each connect, sent as a header marked sensitive (reqwest never prints
//!   it); no error, log line or trace entry holds its value.

use std::time::Duration;

use reqwest_mcp::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::transport::StreamableHttpClientTransport;

use super::connection::{Conduit, ConnectError, Connector};
use super::frame_guard::MAX_FRAME_BYTES;
use crate::run::policy::HttpSpec;
use crate::BoxFut;

/// rmcp's transport on our reqwest client.
pub type HttpTransport = StreamableHttpClientTransport<reqwest_mcp::Client>;

/// Longest wait for a TCP connection to the server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest a cancellation (or reply) POST may take.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// Most bytes of a non-JSON error body kept for the message.
const MAX_ERROR_BODY_BYTES: usize = 4096;

/// Connects to a `url` server of the policy.
pub struct HttpConnector {
    pub server_id: String,
    pub spec: HttpSpec,
}

impl Connector for HttpConnector {
    fn open(&self) -> BoxFut<'_, Result<Conduit, ConnectError>> {
        Box::pin(async move {
            let token = match &self.spec.bearer_token_env {
                Some(var) => Some(bearer_token(&self.server_id, var)?),
                None => None,
            };
            let client = http_client(token.as_deref()).map_err(|e| ConnectError::Other {
                server: self.server_id.clone(),
                message: format!("HTTP client: {e}"),
            })?;
            Ok(Conduit::Http(StreamableHttpClientTransport::with_client(
                client,
                transport_config(&self.spec.url),
            )))
        })
    }
}

/// The same size bound as a stdio frame. A server that forgets our session
/// (restarted) is not silently re-initialized behind our back (no version
/// check, no rediscovery): the call fails, the connection ends as lost and
/// is reconnected and rediscovered at the next safe point, as a dead stdio
/// server is (see `session_forgotten`).
fn transport_config(url: &str) -> StreamableHttpClientTransportConfig {
    StreamableHttpClientTransportConfig::with_uri(url)
        .max_json_response_size(MAX_FRAME_BYTES)
        .max_sse_event_size(MAX_FRAME_BYTES)
        .max_error_response_size(MAX_ERROR_BODY_BYTES)
        .control_request_timeout(CONTROL_TIMEOUT)
        .reinit_on_expired_session(false)
}

/// Whether `e` says the server no longer knows our session (HTTP 404 on a
/// session request: it restarted, or expired the session). Every later
/// request would fail the same way, so the connection is over.
pub fn session_forgotten(e: &rmcp::transport::DynamicTransportError) -> bool {
    matches!(
        e.error
            .downcast_ref::<StreamableHttpError<reqwest_mcp::Error>>(),
        Some(StreamableHttpError::SessionExpired)
    )
}

/// The token in env var `var`; errors name the variable, never the value.
fn bearer_token(server: &str, var: &str) -> Result<String, ConnectError> {
    let problem = match std::env::var(var) {
        Ok(v) if v.trim().is_empty() => "is empty",
        Ok(v) if HeaderValue::from_str(&format!("Bearer {v}")).is_err() => {
            "holds characters not allowed in an HTTP header"
        }
        Ok(v) => return Ok(v),
        Err(std::env::VarError::NotPresent) => "is not set",
        Err(std::env::VarError::NotUnicode(_)) => "is not valid UTF-8",
    };
    Err(ConnectError::Token {
        server: server.into(),
        var: var.into(),
        problem,
    })
}

/// No redirects, no proxy from the environment, a connect timeout, and the
/// token (if any) as a sensitive default header.
fn http_client(token: Option<&str>) -> Result<reqwest_mcp::Client, reqwest_mcp::Error> {
    let mut headers = HeaderMap::new();
    if let Some(token) = token {
        let mut value =
            HeaderValue::from_str(&format!("Bearer {token}")).expect("checked by bearer_token");
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    reqwest_mcp::Client::builder()
        .redirect(reqwest_mcp::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT)
        .default_headers(headers)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_errors_name_the_variable_not_the_value() {
        let var = "WASM_AGENT_TEST_TOKEN_UNSET_7f3a";
        let e = bearer_token("remote", var).unwrap_err().to_string();
        assert!(
            e.contains(var) && e.contains("not set") && e.contains("remote"),
            "{e}"
        );
        let var = "WASM_AGENT_TEST_TOKEN_BAD_7f3a";
        std::env::set_var(var, "secret\nvalue-0123456789");
        let e = bearer_token("remote", var).unwrap_err().to_string();
        assert!(e.contains(var) && !e.contains("secret"), "{e}");
        std::env::set_var(var, "good-token-0123456789");
        assert_eq!(
            bearer_token("remote", var).unwrap(),
            "good-token-0123456789"
        );
    }

    #[test]
    fn the_token_header_is_never_printed() {
        let mut value = HeaderValue::from_static("Bearer s3cr3t-token-value");
        value.set_sensitive(true);
        assert!(!format!("{value:?}").contains("s3cr3t"));
    }
}
