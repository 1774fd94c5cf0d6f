//! What every web route checks before its handler, and adds to every answer:
//! - the Host (or HTTP/2 authority) is one of the server's names, so that a page on another
//!   site whose name was rebound to this server's address (DNS rebinding) cannot read it. IP
//!   literals are always accepted: a rebinding attack needs a name;
//! - a state-changing request comes from the web view's own pages (the browser's
//!   `Sec-Fetch-Site`, else `Origin`); the handlers check the CSRF token as well;
//! - a strict Content-Security-Policy (scripts and styles only from the server's own
//!   assets: no inline script, no eval), no framing, no sniffing, no referrer, no caching of
//!   pages.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};

/// The names the web view answers to.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    names: Vec<String>,
}

impl Hosts {
    /// `localhost` and IP literals, plus these names (a port after a name is ignored).
    pub fn new(names: &[String]) -> Self {
        let names = names
            .iter()
            .map(|n| strip_port(n.trim()).to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect();
        Self { names }
    }

    /// Whether a Host header's value names this server.
    pub fn allow(&self, host: &str) -> bool {
        let name = strip_port(host).to_ascii_lowercase();
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        if bare.parse::<IpAddr>().is_ok() {
            return true;
        }
        name == "localhost" || name.ends_with(".localhost") || self.names.contains(&name)
    }
}

/// `name:port` → `name`; `[v6]:port` → `[v6]`; a bare IPv6 address stays whole.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The host a request was sent to: the HTTP/2 authority, else the Host header.
pub fn host_of<B>(request: &http::Request<B>) -> Option<String> {
    if let Some(authority) = request.uri().authority() {
        return Some(authority.as_str().to_owned());
    }
    request.headers().get(header::HOST)?.to_str().ok().map(str::to_owned)
}

/// Whether an unsafe request comes from a page of this server.
fn same_origin<B>(request: &http::Request<B>, host: &str) -> bool {
    let headers = request.headers();
    if let Some(site) = headers.get("sec-fetch-site") {
        return site.as_bytes() == b"same-origin";
    }
    match headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
        // Not a browser (curl, a script): the CSRF token still has to match.
        None => true,
        Some(origin) => {
            let rest = origin.strip_prefix("https://").or_else(|| origin.strip_prefix("http://"));
            rest.is_some_and(|o| o.eq_ignore_ascii_case(host))
        }
    }
}

pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The checks and headers above, around every web route.
pub async fn guard(State(hosts): State<Arc<Hosts>>, request: Request, next: Next) -> Response {
    let Some(host) = host_of(&request).filter(|h| hosts.allow(h)) else {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "this server does not answer to that host name: open it by its own name, or add the name to \
             baton-server --web-hosts",
        )
            .into_response();
    };
    let safe = matches!(*request.method(), Method::GET | Method::HEAD);
    if !safe && !same_origin(&request, &host) {
        return (StatusCode::FORBIDDEN, "refused: this request did not come from a page of this server")
            .into_response();
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_accept_own_names_and_addresses_only() {
        let hosts = Hosts::new(&["Baton.example.com:443".into()]);
        for ok in [
            "localhost",
            "localhost:7300",
            "127.0.0.1:7300",
            "[::1]:7300",
            "10.1.2.3",
            "baton.example.com",
            "BATON.example.com:8080",
            "app.localhost:1",
        ] {
            assert!(hosts.allow(ok), "{ok}");
        }
        for bad in
            ["evil.example", "baton.example.com.evil.example", "127.0.0.1.nip.io", "", "localhost.evil"]
        {
            assert!(!hosts.allow(bad), "{bad}");
        }
    }

    #[test]
    fn ports_are_stripped_from_names_only() {
        assert_eq!(strip_port("a:1"), "a");
        assert_eq!(strip_port("[::1]:1"), "[::1]");
        assert_eq!(strip_port("::1"), "::1");
        assert_eq!(strip_port("a"), "a");
    }
}
