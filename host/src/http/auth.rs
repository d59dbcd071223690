//! Authentication of HTTP requests: a static bearer token (from a file or an
//! environment variable) and/or OAuth 2.1 resource-server validation of JWT
//! access tokens against a local JWKS file (signature, `iss`, `aud`, `exp`,
//! `nbf`; asymmetric algorithms only, the key's own `alg` when it names one).
//!
//! A verified request carries a [`Grant`]: the static token grants every
//! tool; a JWT grants the scopes in its `scope` (space-separated) or `scp`
//! (array) claim, checked against the per-tool scopes of the OAuth config.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use axum::http::{header, HeaderMap};
use jsonwebtoken::errors::ErrorKind as JwtErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Shortest static token accepted (a guessable token is no protection).
pub const MIN_TOKEN_LEN: usize = 16;

/// Longest bearer token read, in bytes. Access tokens are a few KiB (Entra
/// ID's with group claims reach ~8 KiB); a 480 KB token whose header was
/// 40,000 tiny objects cost ~15 ms of parsing before any signature check,
/// and 16 clients with no valid token slowed every other client ~100×
/// (a helper's find).
pub const MAX_TOKEN_BYTES: usize = 16 << 10;
/// Clock skew tolerated on `exp` / `nbf`, in seconds.
const LEEWAY_SECS: u64 = 30;

/// The OAuth resource-server configuration (`--oauth-config FILE`, TOML).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// Required `iss` of every token; also the advertised authorization server.
    pub issuer: String,
    /// Required `aud` (this resource's identifier, usually its URL).
    pub audience: String,
    /// JWKS file with the issuer's public keys (relative to the config file).
    pub jwks: PathBuf,
    /// Tool name → scope a token needs to call it. Tools not listed need none.
    #[serde(default)]
    pub tool_scopes: BTreeMap<String, String>,
}

impl OAuthConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading OAuth config {}", path.display()))?;
        let mut cfg: OAuthConfig =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        if cfg.jwks.is_relative() {
            cfg.jwks = path.parent().unwrap_or(Path::new(".")).join(&cfg.jwks);
        }
        Ok(cfg)
    }

    /// Every scope some tool needs.
    pub fn scopes(&self) -> BTreeSet<String> {
        self.tool_scopes.values().cloned().collect()
    }
}

/// What a verified token may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// The static token: every tool.
    All,
    /// A JWT: the tools whose scope is in this set (and unscoped tools).
    Scopes(BTreeSet<String>),
}

impl Grant {
    pub fn has(&self, scope: &str) -> bool {
        match self {
            Grant::All => true,
            Grant::Scopes(s) => s.contains(scope),
        }
    }
}

/// Who made a request, as far as sessions go: a 2025-11-25 session is
/// used only by the principal that made it (the spec's SHOULD: session ids
/// bound to who the user is; a valid token of another subject that learnt
/// the id could otherwise call, listen and end the session in its name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The static token, or no authentication: one principal.
    Operator,
    /// A JWT's subject (`sub`, required by RFC 9068), by its digest: a
    /// refreshed token of the same subject goes on using its sessions.
    Subject([u8; 32]),
    /// A JWT without a subject, by the token's own digest: only that
    /// token goes on using its sessions.
    Token([u8; 32]),
}

/// A request's verified credentials: what it may do and who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub grant: Grant,
    pub principal: Principal,
}

impl Verified {
    fn operator() -> Self {
        Verified {
            grant: Grant::All,
            principal: Principal::Operator,
        }
    }
}

/// Why a request is not authenticated (401).
#[derive(Debug, PartialEq, Eq)]
pub enum AuthError {
    /// No `Authorization: Bearer` credentials at all.
    Missing,
    /// Credentials were given and are not valid; the reason is for the client.
    Invalid(String),
}

/// The configured verifiers; with none, every request passes.
#[derive(Default)]
pub struct Authenticator {
    token_digest: Option<[u8; 32]>,
    jwt: Option<JwtVerifier>,
}

impl Authenticator {
    pub fn new(token: Option<String>, oauth: Option<&OAuthConfig>) -> Result<Self> {
        let token_digest = token
            .map(|t| check_token(&t).map(|()| digest(&t)))
            .transpose()?;
        let jwt = oauth.map(JwtVerifier::load).transpose()?;
        Ok(Authenticator { token_digest, jwt })
    }

    pub fn is_enabled(&self) -> bool {
        self.token_digest.is_some() || self.jwt.is_some()
    }

    /// Check the request's bearer credentials.
    pub fn verify(&self, headers: &HeaderMap) -> Result<Verified, AuthError> {
        if !self.is_enabled() {
            return Ok(Verified::operator());
        }
        let token = bearer(headers)?;
        if let Some(d) = &self.token_digest {
            if constant_time_eq(&digest(token), d) {
                return Ok(Verified::operator());
            }
        }
        match &self.jwt {
            Some(jwt) => jwt.verify(token),
            None => Err(AuthError::Invalid("invalid token".into())),
        }
    }
}

/// Read a static token from a file (trailing newline trimmed).
pub fn token_from_file(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading token file {}", path.display()))?;
    Ok(text.trim_end_matches(['\r', '\n']).to_string())
}

/// Read a static token from an environment variable.
pub fn token_from_env(name: &str) -> Result<String> {
    std::env::var(name).with_context(|| format!("environment variable {name} is not set"))
}

fn check_token(t: &str) -> Result<()> {
    ensure!(
        t.len() >= MIN_TOKEN_LEN,
        "the bearer token must be at least {MIN_TOKEN_LEN} characters"
    );
    ensure!(
        t.bytes().all(|b| b.is_ascii_graphic()),
        "the bearer token must be printable ASCII without spaces"
    );
    ensure!(
        t.len() <= MAX_TOKEN_BYTES,
        "the bearer token must be at most {MAX_TOKEN_BYTES} bytes"
    );
    Ok(())
}

fn digest(t: &str) -> [u8; 32] {
    Sha256::digest(t.as_bytes()).into()
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of the one `Authorization: Bearer <token>` header.
fn bearer(headers: &HeaderMap) -> Result<&str, AuthError> {
    let mut all = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = all.next() else {
        return Err(AuthError::Missing);
    };
    if all.next().is_some() {
        return Err(AuthError::Invalid("several Authorization headers".into()));
    }
    let text = value
        .to_str()
        .map_err(|_| AuthError::Invalid("Authorization is not text".into()))?;
    match text.split_once(' ') {
        Some((_, token)) if token.len() > MAX_TOKEN_BYTES => Err(AuthError::Invalid(format!(
            "token longer than {MAX_TOKEN_BYTES} bytes"
        ))),
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() => {
            Ok(token.trim())
        }
        _ => Err(AuthError::Invalid(
            "Authorization must be `Bearer <token>`".into(),
        )),
    }
}

/// JWT validation against a fixed key set.
struct JwtVerifier {
    issuer: String,
    audience: String,
    keys: Vec<(Jwk, DecodingKey)>,
}

/// The scope claims: `scope` (RFC 8693 / RFC 9068: a space-separated
/// string) and `scp` (Microsoft Entra ID's string, Okta's and others'
/// array), each taken in either form: a token with `scp` as a string was
/// refused outright (a helper's find).
#[derive(Deserialize)]
struct Claims {
    /// Any JSON (a StringOrURI by RFC 7519; read as given, never refused
    /// for its type): only its digest is kept.
    #[serde(default)]
    sub: Option<serde_json::Value>,
    #[serde(default)]
    scope: Option<ScopeClaim>,
    #[serde(default)]
    scp: Option<ScopeClaim>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScopeClaim {
    Spaced(String),
    Listed(Vec<String>),
}

impl ScopeClaim {
    fn scopes(self) -> Vec<String> {
        match self {
            ScopeClaim::Spaced(s) => s.split_ascii_whitespace().map(str::to_owned).collect(),
            ScopeClaim::Listed(v) => v,
        }
    }
}

impl JwtVerifier {
    fn load(cfg: &OAuthConfig) -> Result<Self> {
        let text = std::fs::read_to_string(&cfg.jwks)
            .with_context(|| format!("reading JWKS {}", cfg.jwks.display()))?;
        let set: JwkSet = serde_json::from_str(&text)
            .with_context(|| format!("parsing JWKS {}", cfg.jwks.display()))?;
        let mut keys = Vec::new();
        for jwk in set.keys {
            if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
                bail!(
                    "JWKS {}: symmetric (oct) keys are not accepted",
                    cfg.jwks.display()
                );
            }
            let key = DecodingKey::from_jwk(&jwk)
                .with_context(|| format!("JWKS {}: unusable key", cfg.jwks.display()))?;
            keys.push((jwk, key));
        }
        ensure!(!keys.is_empty(), "JWKS {} has no keys", cfg.jwks.display());
        Ok(JwtVerifier {
            issuer: cfg.issuer.clone(),
            audience: cfg.audience.clone(),
            keys,
        })
    }

    fn verify(&self, token: &str) -> Result<Verified, AuthError> {
        let invalid = |m: &str| AuthError::Invalid(m.to_string());
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| invalid("malformed token or unsupported algorithm"))?;
        if names_critical_extensions(token) {
            return Err(invalid(
                "the header names critical extensions (crit), none of which is understood here",
            ));
        }
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(invalid("symmetric algorithms are not accepted"));
        }
        let (jwk, key) = self
            .key_for(header.kid.as_deref())
            .ok_or_else(|| invalid("unknown signing key"))?;
        if let Some(ka) = jwk.common.key_algorithm {
            if format!("{ka:?}") != format!("{:?}", header.alg) {
                return Err(invalid("algorithm does not match the key"));
            }
        }
        let mut v = Validation::new(header.alg);
        v.set_issuer(&[&self.issuer]);
        v.set_audience(&[&self.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        v.validate_nbf = true;
        v.leeway = LEEWAY_SECS;
        let data = jsonwebtoken::decode::<Claims>(token, key, &v).map_err(|e| {
            invalid(match e.kind() {
                JwtErrorKind::ExpiredSignature => "token expired",
                JwtErrorKind::ImmatureSignature => "token not yet valid",
                JwtErrorKind::InvalidAudience => "wrong audience",
                JwtErrorKind::InvalidIssuer => "wrong issuer",
                JwtErrorKind::InvalidSignature => "bad signature",
                JwtErrorKind::MissingRequiredClaim(_) => "missing exp, iss or aud",
                _ => "invalid token",
            })
        })?;
        let principal = match &data.claims.sub {
            Some(sub) => Principal::Subject(digest(&sub.to_string())),
            None => Principal::Token(digest(token)),
        };
        Ok(Verified {
            grant: Grant::Scopes(scopes(data.claims)),
            principal,
        })
    }

    fn key_for(&self, kid: Option<&str>) -> Option<&(Jwk, DecodingKey)> {
        match kid {
            Some(kid) => self
                .keys
                .iter()
                .find(|(j, _)| j.common.key_id.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
    }
}

fn scopes(c: Claims) -> BTreeSet<String> {
    [c.scope, c.scp]
        .into_iter()
        .flatten()
        .flat_map(ScopeClaim::scopes)
        .collect()
}

/// Whether the token's header names `crit` extensions: none is understood
/// here, so such a token must be refused (RFC 7515 §4.1.11); the JWT
/// library does not read the parameter.
fn names_critical_extensions(token: &str) -> bool {
    use base64::Engine;
    let Some(encoded) = token.split('.').next() else {
        return false;
    };
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(encoded) else {
        return false;
    };
    // Only `crit` is read; the rest is skipped, not built into values.
    #[derive(Deserialize)]
    struct Critical {
        #[serde(default)]
        crit: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Critical>(&bytes).is_ok_and(|header| header.crit.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn scopes_of(claims: serde_json::Value) -> Vec<String> {
        scopes(serde_json::from_value(claims).unwrap())
            .into_iter()
            .collect()
    }

    /// `scope` and `scp` each as a space-separated string or an array (a
    /// string `scp`, as Microsoft Entra ID issues it, refused the token).
    #[test]
    fn scope_claims_are_read_in_either_form() {
        use serde_json::json;
        let both = ["a".to_string(), "b".to_string()];
        assert_eq!(scopes_of(json!({"scope": "a b"})), both);
        assert_eq!(scopes_of(json!({"scope": ["a", "b"]})), both);
        assert_eq!(scopes_of(json!({"scp": "a b"})), both);
        assert_eq!(scopes_of(json!({"scp": ["b", "a"]})), both);
        assert_eq!(scopes_of(json!({"scope": "a", "scp": ["b"]})), both);
        assert!(scopes_of(json!({})).is_empty());
    }

    /// A header naming `crit` extensions is refused (RFC 7515 §4.1.11):
    /// none is understood here.
    #[test]
    fn critical_extensions_are_noticed() {
        use base64::Engine;
        let token = |header: &str| {
            let h = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(header);
            format!("{h}.e30.c2ln")
        };
        assert!(names_critical_extensions(&token(
            r#"{"alg":"RS256","crit":["exp"],"exp":1}"#
        )));
        assert!(!names_critical_extensions(&token(
            r#"{"alg":"RS256","kid":"k"}"#
        )));
        assert!(!names_critical_extensions("not a token"));
    }

    fn with_auth(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn static_token_is_checked() {
        let a = Authenticator::new(Some("0123456789abcdef-secret".into()), None).unwrap();
        assert_eq!(
            a.verify(&with_auth("Bearer 0123456789abcdef-secret")),
            Ok(Verified::operator())
        );
        assert_eq!(a.verify(&HeaderMap::new()), Err(AuthError::Missing));
        for bad in [
            "Bearer 0123456789abcdef-secreT",
            "Bearer 0123456789abcdef-secret2",
            "Basic 0123456789abcdef-secret",
            "Bearer ",
            "0123456789abcdef-secret",
        ] {
            assert!(
                matches!(a.verify(&with_auth(bad)), Err(AuthError::Invalid(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_long_token_is_refused_unread() {
        let a = Authenticator::new(Some("0123456789abcdef-secret".into()), None).unwrap();
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        match a.verify(&with_auth(&long)) {
            Err(AuthError::Invalid(why)) => assert!(why.contains("longer than"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(Authenticator::new(Some("a".repeat(MAX_TOKEN_BYTES + 1)), None).is_err());
    }

    #[test]
    fn short_or_odd_tokens_are_refused_at_start() {
        assert!(Authenticator::new(Some("short".into()), None).is_err());
        assert!(Authenticator::new(Some("has a space in it, long".into()), None).is_err());
    }
}
