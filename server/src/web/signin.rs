//! Signing in to the web view: a token pasted once becomes a web session, kept in the
//! database (every server over it knows it) and named by a random secret in an HttpOnly,
//! SameSite=Strict cookie; only the secret's sha256 is stored. Each request resolves its
//! cookie to a `Viewer`, checked again against the token (a revoked token's sessions end at
//! once), and carries the viewer into the API's own calls, so the token's role and project
//! scope apply to every page exactly as to gRPC.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::Form;
use axum::extract::{FromRequestParts, State};
use axum::response::{IntoResponse, Redirect, Response};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};
use tonic::transport::server::TcpConnectInfo;

use super::Web;
use super::render::{self, Chrome};
use crate::auth::{Caller, Principal};
use crate::error::Error;
use crate::limits::rate::Origin;
use crate::store::Store;
use crate::store::model::{WebSessionRow, WebSessionWrite};

const COOKIE: &str = "baton_web";
/// With TLS the cookie is `Secure` and bound to this host (the `__Host-` prefix).
const SECURE_COOKIE: &str = "__Host-baton_web";
/// The header htmx sends the CSRF token in (set on the page's body).
pub const CSRF_HEADER: &str = "x-baton-csrf";

/// Web sessions looked up less than `auth::TTL` ago, by the hash of their secret.
#[derive(Default)]
pub struct SessionCache(Mutex<HashMap<String, (Option<WebSessionRow>, Instant)>>);

impl SessionCache {
    #[allow(clippy::option_option, reason = "a cached answer that the session does not exist is an answer")]
    fn get(&self, hash: &str) -> Option<Option<WebSessionRow>> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (row, at) = map.get(hash)?;
        (at.elapsed() < crate::auth::TTL).then(|| row.clone())
    }

    fn put(&self, hash: String, row: Option<WebSessionRow>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() > 10_000 {
            map.retain(|_, (_, at)| at.elapsed() < crate::auth::TTL);
        }
        map.insert(hash, (row, Instant::now()));
    }
}

/// A signed-in browser.
#[derive(Clone)]
pub struct Viewer {
    pub who: Principal,
    caller: Caller,
    /// The CSRF token of this web session (derived from its secret; in every page).
    pub csrf: String,
    secret_hash: String,
    conn: Option<TcpConnectInfo>,
}

impl Viewer {
    /// A request to the API on this viewer's behalf.
    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.extensions_mut().insert(self.caller.clone());
        if let Some(conn) = &self.conn {
            request.extensions_mut().insert(conn.clone());
        }
        request
    }

    pub fn chrome(&self, project: Option<&str>) -> Chrome {
        Chrome::of(&self.who, &self.csrf, project)
    }

    /// Whether a state-changing request carries this session's CSRF token (in the header
    /// htmx sends, or a form's `_csrf` field).
    pub fn check_csrf(&self, headers: &HeaderMap, field: Option<&str>) -> Result<(), render::WebError> {
        let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).or(field).unwrap_or_default();
        if constant_time_eq(sent.as_bytes(), self.csrf.as_bytes()) {
            Ok(())
        } else {
            Err(render::WebError::Forbidden(
                "this form is missing its security token (it may come from another site, or from a page opened \
                 before you signed in again): reload the page and try again"
                    .into(),
            ))
        }
    }

    /// Whether this is still the same signed-in caller (a live stream checks it as it runs).
    pub async fn still_signed_in<S: Store>(&self, web: &Web<S>) -> bool {
        matches!(resolve(web, &self.secret_hash, self.caller.clone()).await, Ok(Some((who, ..))) if who.same_as(&self.who))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn csrf_of(secret: &str) -> String {
    sha256_hex(&format!("baton-web-csrf\0{secret}"))[..32].to_owned()
}

fn cookie_secret(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE || *name == SECURE_COOKIE)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|v| !v.is_empty() && v.len() <= 128)
}

fn connect_info(parts: &Parts) -> Option<TcpConnectInfo> {
    let ext = &parts.extensions;
    ext.get::<TcpConnectInfo>().cloned().or_else(|| {
        ext.get::<tonic::transport::server::TlsConnectInfo<TcpConnectInfo>>().map(|i| i.get_ref().clone())
    })
}

fn origin_of(conn: Option<&TcpConnectInfo>) -> Origin {
    Origin::of(conn.and_then(TcpConnectInfo::remote_addr).map(|a| a.ip()))
}

/// The web session of a secret's hash and who it is now (`None`: signed out, expired, or its
/// token no longer valid).
async fn resolve<S: Store>(
    web: &Web<S>,
    secret_hash: &str,
    caller: Caller,
) -> Result<Option<(Principal, Caller, Option<String>)>, Error> {
    let row = if let Some(row) = web.sessions.get(secret_hash) {
        row
    } else {
        let row = web.api.store.web_session(secret_hash.to_owned(), crate::core::time::now_us()).await?;
        web.sessions.put(secret_hash.to_owned(), row.clone());
        row
    };
    let Some(row) = row else { return Ok(None) };
    let caller = Caller::signed_in(row.token_hash, caller.origin());
    match web.api.auth.identify(&caller, false).await {
        Ok((who, token_id)) => Ok(Some((who, caller, token_id))),
        Err(Error::Unauthenticated(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Why a request has no viewer: it is sent to the sign-in page (htmx is told to go there).
pub struct SignIn {
    htmx: bool,
}

impl IntoResponse for SignIn {
    fn into_response(self) -> Response {
        if self.htmx {
            let mut response = StatusCode::UNAUTHORIZED.into_response();
            response.headers_mut().insert("hx-redirect", HeaderValue::from_static("/signin"));
            response
        } else {
            Redirect::to("/signin").into_response()
        }
    }
}

impl<S: Store> FromRequestParts<Web<S>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, web: &Web<S>) -> Result<Self, Response> {
        let htmx = parts.headers.contains_key("hx-request");
        let Some(secret) = cookie_secret(&parts.headers) else {
            return Err(SignIn { htmx }.into_response());
        };
        let conn = connect_info(parts);
        let secret_hash = sha256_hex(&secret);
        let anonymous = Caller::signed_in(None, origin_of(conn.as_ref()));
        match resolve(web, &secret_hash, anonymous).await {
            // A page (or a live stream) counts as one request against its token's rate,
            // however many calls it makes.
            Ok(Some((who, caller, token_id))) => match web.api.auth.count(&who, token_id.as_deref()) {
                Ok(()) => Ok(Self { who, caller, csrf: csrf_of(&secret), secret_hash, conn }),
                Err(e) => Err(render::WebError::from(e).into_response()),
            },
            Ok(None) => Err(SignIn { htmx }.into_response()),
            Err(e) => Err(render::WebError::from(e).into_response()),
        }
    }
}

#[derive(askama::Template)]
#[template(path = "signin.html")]
struct SignInPage {
    chrome: Chrome,
    open: bool,
    error: String,
}

/// Whether this hub has no tokens (anyone who reaches it may use it).
async fn hub_is_open<S: Store>(web: &Web<S>) -> Result<bool, Error> {
    Ok(matches!(
        web.api.auth.identify(&Caller::signed_in(None, Origin::of(None)), false).await,
        Ok((Principal::Open, _))
    ))
}

pub async fn page<S: Store>(State(web): State<Web<S>>) -> Response {
    match hub_is_open(&web).await {
        Ok(open) => render::page(&SignInPage { chrome: Chrome::signed_out(), open, error: String::new() }),
        Err(e) => render::WebError::from(e).into_response(),
    }
}

#[derive(serde::Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    token: String,
}

/// Signs in with a token (or, on a hub with no tokens, without one). Failures count against
/// the client's address like any other failed authentication.
pub async fn sign_in<S: Store>(
    State(web): State<Web<S>>,
    parts: Parts,
    Form(form): Form<SignInForm>,
) -> Response {
    let conn = connect_info(&parts);
    let origin = origin_of(conn.as_ref());
    let token = form.token.trim();
    let caller = if token.is_empty() {
        Caller::signed_in(None, origin)
    } else {
        Caller::with_secret(token.to_owned(), origin)
    };
    let refused = |status: StatusCode, message: String| {
        let page = SignInPage { chrome: Chrome::signed_out(), open: false, error: message };
        (status, render::page(&page)).into_response()
    };
    let who = match web.api.auth.identify(&caller, true).await {
        Ok((who, _)) => who,
        Err(Error::Unauthenticated(_)) if token.is_empty() => {
            return refused(StatusCode::UNAUTHORIZED, "paste your Baton access token to sign in".into());
        }
        Err(Error::Unauthenticated(message)) => return refused(StatusCode::UNAUTHORIZED, message),
        Err(e @ Error::ResourceExhausted(_)) => return refused(StatusCode::TOO_MANY_REQUESTS, e.to_string()),
        Err(e) => return render::WebError::from(e).into_response(),
    };
    let token_hash = match who {
        Principal::Open => None,
        Principal::Token { .. } => caller.token_hash(),
    };
    match start(&web, token_hash).await {
        Ok(secret) => {
            let mut response = Redirect::to("/").into_response();
            let cookie = web.cookie(&secret, web.session_ttl.as_secs());
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Err(e) => render::WebError::from(e).into_response(),
    }
}

/// Stores a new web session; returns its secret.
async fn start<S: Store>(web: &Web<S>, token_hash: Option<String>) -> Result<String, Error> {
    let secret = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let now_us = crate::core::time::now_us();
    let ttl_us = i64::try_from(web.session_ttl.as_micros()).unwrap_or(i64::MAX);
    let store = &web.api.store;
    store.write_web_session(WebSessionWrite::Expire { now_us }).await?;
    store
        .write_web_session(WebSessionWrite::Create {
            secret_hash: sha256_hex(&secret),
            token_hash,
            created_us: now_us,
            expires_us: now_us.saturating_add(ttl_us),
        })
        .await?;
    Ok(secret)
}

#[derive(serde::Deserialize)]
pub struct SignOutForm {
    #[serde(default, rename = "_csrf")]
    csrf: String,
}

pub async fn sign_out<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    headers: HeaderMap,
    Form(form): Form<SignOutForm>,
) -> Response {
    if let Err(e) = viewer.check_csrf(&headers, Some(&form.csrf)) {
        return e.into_response();
    }
    let write = WebSessionWrite::Delete { secret_hash: viewer.secret_hash.clone() };
    if let Err(e) = web.api.store.write_web_session(write).await {
        return render::WebError::from(e).into_response();
    }
    web.sessions.put(viewer.secret_hash, None);
    let mut response = Redirect::to("/signin").into_response();
    if let Ok(value) = HeaderValue::from_str(&web.cookie("", 0)) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

impl<S: Store> Web<S> {
    fn cookie(&self, secret: &str, max_age: u64) -> String {
        let (name, secure) = if self.secure { (SECURE_COOKIE, "; Secure") } else { (COOKIE, "") };
        format!("{name}={secret}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
    }
}

/// Shared by the handlers: a viewer's cache entry.
pub type Sessions = Arc<SessionCache>;
