//! `Host` and `Origin` checks (DNS-rebinding protection) for every HTTP
//! request, before authentication and before any body is read.
//!
//! * `Host` must name one of the allowed hosts (by name, any port): the
//!   loopback names, the bound IP, and `--allowed-host` entries. A page on
//!   `evil.example` whose name was rebound to 127.0.0.1 sends
//!   `Host: evil.example:PORT` and is refused. A request target in
//!   absolute form (`POST http://evil.example/mcp`) names the host itself
//!   (RFC 9112 §3.2.2: `Host` is then ignored), so its authority is checked
//!   the same way, besides `Host`.
//! * `Origin`, when present, must be one of the allowed origins exactly
//!   (scheme, host and port): by default the server's own loopback origins,
//!   plus `--allowed-origin` entries. Requests without `Origin` (non-browser
//!   clients) pass.

use std::net::SocketAddr;

use axum::http::{header, HeaderMap, StatusCode, Uri};

/// The allow-lists, fixed at start-up.
#[derive(Clone, Debug)]
pub struct OriginPolicy {
    hosts: Vec<String>,
    origins: Vec<String>,
}

/// Why a request was refused (always 403).
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Host(String),
    Origin(String),
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        StatusCode::FORBIDDEN
    }

    /// The refusal, naming the value by its head: a client without any
    /// token sent 500 KB `Host` headers, each logged whole (a helper's find).
    pub fn message(&self) -> String {
        let (what, value) = match self {
            Refusal::Host(h) => ("Host", h),
            Refusal::Origin(o) => ("Origin", o),
        };
        let shown = wasm_mcp_protocol::shown_name(value);
        match value.len() > shown.len() {
            true => format!(
                "Forbidden: {what} {shown:?} ({} bytes) is not allowed",
                value.len()
            ),
            false => format!("Forbidden: {what} {shown:?} is not allowed"),
        }
    }
}

const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

impl OriginPolicy {
    /// Loopback names and the bound address, plus the extra entries.
    pub fn new(bound: SocketAddr, extra_hosts: &[String], extra_origins: &[String]) -> Self {
        let bound_host = host_of_addr(bound);
        let mut hosts: Vec<String> = LOOPBACK_NAMES.iter().map(|s| s.to_string()).collect();
        hosts.push(bound_host.clone());
        hosts.extend(extra_hosts.iter().map(|h| h.to_ascii_lowercase()));
        let port = bound.port();
        let mut origins: Vec<String> = LOOPBACK_NAMES
            .iter()
            .chain(std::iter::once(&bound_host.as_str()))
            .map(|h| format!("http://{h}:{port}"))
            .collect();
        origins.extend(extra_origins.iter().map(|o| normalized(o)));
        OriginPolicy { hosts, origins }
    }

    /// Check one request's target and headers.
    pub fn check(&self, target: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = single_header(headers, header::HOST).ok_or(Refusal::Host(String::new()))?;
        self.check_host(&host)?;
        if let Some(authority) = target.authority() {
            self.check_host(authority.host())?;
        }
        match headers.get_all(header::ORIGIN).iter().count() {
            0 => Ok(()),
            1 => {
                let origin = single_header(headers, header::ORIGIN)
                    .ok_or(Refusal::Origin("<not text>".into()))?;
                let wanted = normalized(&origin);
                if self.origins.contains(&wanted) {
                    Ok(())
                } else {
                    Err(Refusal::Origin(origin))
                }
            }
            _ => Err(Refusal::Origin("<several>".into())),
        }
    }

    fn check_host(&self, authority: &str) -> Result<(), Refusal> {
        if self.hosts.iter().any(|h| *h == host_name(authority)) {
            Ok(())
        } else {
            Err(Refusal::Host(authority.to_string()))
        }
    }
}

/// The value of a header that must appear once, as text.
/// An origin as the allow-list compares it: no trailing `/`, lower case,
/// no default port (a browser never sends `https://x:443`: such a flag
/// never matched; a helper's find).
pub fn normalized(origin: &str) -> String {
    let o = origin.trim_end_matches('/').to_ascii_lowercase();
    for (scheme, port) in [("https://", ":443"), ("http://", ":80")] {
        if o.starts_with(scheme) && o.ends_with(port) {
            return o[..o.len() - port.len()].to_string();
        }
    }
    o
}

/// Whether `origin` can be an `--allowed-origin`: `scheme://host[:port]`
/// (a browser extension's `chrome-extension://id` too). Not `null`, which
/// every sandboxed iframe, `data:` URL and `file://` page sends (allowed,
/// any web site could call the tools), and no wildcard (it panicked the
/// CORS layer at start); a helper's finds.
pub fn check_allowed_origin(origin: &str) -> Result<(), &'static str> {
    let origin = origin.trim_end_matches('/');
    if origin.eq_ignore_ascii_case("null") {
        return Err("`null` is the origin of every sandboxed or local page: refused");
    }
    let Some((scheme, rest)) = origin.split_once("://") else {
        return Err("not an origin (scheme://host[:port])");
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let host_ok = !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']' | '_'));
    // `host[:port]`, the port a number a port can be (IPv6 hosts bracketed).
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, _)) if !h.ends_with(']') && h.contains(':') => (rest, None),
        Some((h, p)) => (h, Some(p)),
        None => (rest, None),
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0));
    let host_ok = host_ok && !host.is_empty() && !host.contains("..") && port_ok;
    match scheme_ok && host_ok {
        true => Ok(()),
        false => Err("not an origin (scheme://host[:port], no path and no wildcard)"),
    }
}

fn single_header(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    let mut all = headers.get_all(name).iter();
    let first = all.next()?;
    if all.next().is_some() {
        return None;
    }
    first.to_str().ok().map(str::to_owned)
}

/// `name[:port]` → lower-case name (`[v6]` keeps its brackets).
fn host_name(authority: &str) -> String {
    let a = authority.trim().to_ascii_lowercase();
    if let Some(end) = a.strip_prefix('[').and_then(|r| r.find(']')) {
        return a[..end + 2].to_string();
    }
    match a.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name.to_string(),
        _ => a,
    }
}

fn host_of_addr(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    /// What an `--allowed-origin` may be, and how it is compared (helpers'
    /// finds: `null` gave every sandboxed page CORS, `*` panicked the CORS
    /// layer, and a default port or a trailing `/` never matched a page).
    #[test]
    fn allowed_origins_are_origins_compared_as_browsers_send_them() {
        for ok in [
            "https://app.example.com",
            "http://localhost:5173",
            "https://App.Example.com/",
            "chrome-extension://abcdef",
            "http://[::1]:8080",
        ] {
            assert_eq!(check_allowed_origin(ok), Ok(()), "{ok}");
        }
        for bad in [
            "null",
            "*",
            "http://*.example.com",
            "app.example.com",
            "http://a.com:99999",
            "http://:80",
            "http://a..b",
            "https://a.com/path",
        ] {
            assert!(check_allowed_origin(bad).is_err(), "{bad}");
        }
        assert_eq!(
            normalized("https://App.Example.com:443/"),
            "https://app.example.com"
        );
        assert_eq!(normalized("http://x:80"), "http://x");
        assert_eq!(normalized("http://x:8080"), "http://x:8080");
    }

    fn mcp() -> Uri {
        Uri::from_static("/mcp")
    }

    #[test]
    fn an_absolute_form_target_is_checked_as_host() {
        let p = policy();
        let host = headers(&[(header::HOST, "127.0.0.1:8080")]);
        for ok in ["http://127.0.0.1:8080/mcp", "http://[::1]:8080/mcp", "/mcp"] {
            assert_eq!(p.check(&Uri::from_static(ok), &host), Ok(()), "{ok}");
        }
        for bad in ["http://evil.example/mcp", "http://evil.example:8080/mcp"] {
            assert!(p.check(&Uri::from_static(bad), &host).is_err(), "{bad}");
        }
    }

    fn policy() -> OriginPolicy {
        OriginPolicy::new("127.0.0.1:8080".parse().unwrap(), &[], &[])
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn loopback_host_and_own_origin_pass() {
        let p = policy();
        assert_eq!(
            p.check(&mcp(), &headers(&[(header::HOST, "127.0.0.1:8080")])),
            Ok(())
        );
        assert_eq!(
            p.check(
                &mcp(),
                &headers(&[
                    (header::HOST, "localhost:8080"),
                    (header::ORIGIN, "http://localhost:8080")
                ])
            ),
            Ok(())
        );
        assert_eq!(
            p.check(&mcp(), &headers(&[(header::HOST, "[::1]:8080")])),
            Ok(())
        );
    }

    #[test]
    fn rebinding_hosts_and_foreign_origins_are_refused() {
        let p = policy();
        for host in [
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "localhost.evil:8080",
            "",
        ] {
            assert!(
                p.check(&mcp(), &headers(&[(header::HOST, host)])).is_err(),
                "{host}"
            );
        }
        assert!(p.check(&mcp(), &HeaderMap::new()).is_err(), "no Host");
        assert!(p
            .check(
                &mcp(),
                &headers(&[
                    (header::HOST, "127.0.0.1:8080"),
                    (header::HOST, "evil.example")
                ])
            )
            .is_err());
        for origin in [
            "http://evil.example",
            "http://localhost:9999",
            "https://localhost:8080",
            "null",
        ] {
            let h = headers(&[(header::HOST, "127.0.0.1:8080"), (header::ORIGIN, origin)]);
            assert!(
                matches!(p.check(&mcp(), &h), Err(Refusal::Origin(_))),
                "{origin} passed"
            );
        }
    }

    #[test]
    fn extra_hosts_and_origins_are_allowed() {
        let p = OriginPolicy::new(
            "0.0.0.0:80".parse().unwrap(),
            &["mcp.example.com".into()],
            &["https://app.example.com/".into()],
        );
        let h = headers(&[
            (header::HOST, "MCP.example.com"),
            (header::ORIGIN, "https://app.example.com"),
        ]);
        assert_eq!(p.check(&mcp(), &h), Ok(()));
    }
}
