//! Pages from templates, and what every page shares: the chrome (who is signed in, the
//! CSRF token, the navigation), times as people read them, links, and errors as pages.

use askama::Template;
use axum::response::{Html, IntoResponse, Response};
use http::StatusCode;

use crate::auth::Principal;
use crate::core::access::Role;
use crate::error::Error;

/// What the frame of every page shows.
pub struct Chrome {
    /// Who is signed in ("" when signed out).
    pub who: String,
    pub role: &'static str,
    pub admin: bool,
    /// Signed in to a hub without tokens.
    pub open: bool,
    pub csrf: String,
    /// The project the page is about, for the navigation.
    pub project: Option<String>,
    /// A scoped token's one project.
    pub scope: Option<String>,
}

impl Chrome {
    pub fn of(who: &Principal, csrf: &str, project: Option<&str>) -> Self {
        let (name, role, scope) = match who {
            Principal::Open => (String::new(), Role::Admin, None),
            Principal::Token { name, role, project } => (name.clone(), *role, project.clone()),
        };
        let project = project.map(str::to_owned).or_else(|| scope.clone());
        Self {
            who: name,
            role: role.as_str(),
            admin: role == Role::Admin,
            open: matches!(who, Principal::Open),
            csrf: csrf.to_owned(),
            project,
            scope,
        }
    }

    pub fn signed_out() -> Self {
        Self {
            who: String::new(),
            role: "",
            admin: false,
            open: false,
            csrf: String::new(),
            project: None,
            scope: None,
        }
    }

    /// A link to a project's page.
    pub fn link(&self, path: &str) -> String {
        match &self.project {
            Some(project) => href(path, &[("project", project)]),
            None => path.to_owned(),
        }
    }
}

/// A path with its query, every value encoded.
pub fn href(path: &str, query: &[(&str, &str)]) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (k, v) in query.iter().filter(|(_, v)| !v.is_empty()) {
        out.append_pair(k, v);
    }
    let query = out.finish();
    if query.is_empty() { path.to_owned() } else { format!("{path}?{query}") }
}

/// The link to a list's next page (its `page` token after the list's own query), or "" when
/// there is none.
pub fn next_link(path: &str, query: &[(&str, &str)], token: &str) -> String {
    if token.is_empty() { String::new() } else { href(path, &[query, &[("page", token)]].concat()) }
}

/// A page, or the error page if it cannot be rendered.
pub fn page(template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => Html(html).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "web: a page could not be rendered");
            WebError::Internal.into_response()
        }
    }
}

/// A time as people read it: how long ago, and the UTC time.
pub struct When {
    pub ago: String,
    pub utc: String,
    /// For `<time datetime>`.
    pub iso: String,
}

impl When {
    pub fn of_us(us: i64) -> Self {
        if us <= 0 {
            return Self { ago: "never".into(), utc: String::new(), iso: String::new() };
        }
        let at = chrono::DateTime::from_timestamp_micros(us).unwrap_or_default();
        let now = chrono::Utc::now();
        Self {
            ago: ago(now.signed_duration_since(at)),
            utc: at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            iso: at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }

    pub fn of(ts: Option<&prost_types::Timestamp>) -> Self {
        Self::of_us(ts.map_or(0, crate::core::time::us))
    }
}

/// "just now", "5 min ago", "3 h ago", "2 days ago" (and "in 5 min" for a clock ahead).
fn ago(d: chrono::TimeDelta) -> String {
    let (s, future) = if d.num_seconds() < 0 { (-d.num_seconds(), true) } else { (d.num_seconds(), false) };
    let text = match s {
        0..=9 => return "just now".into(),
        10..=59 => format!("{s} s"),
        60..=3599 => format!("{} min", s / 60),
        3600..=86_399 => format!("{} h", s / 3600),
        86_400..=172_799 => "1 day".into(),
        _ => format!("{} days", s / 86_400),
    };
    if future { format!("in {text}") } else { format!("{text} ago") }
}

/// Bytes as people read them.
pub fn size(bytes: i64) -> String {
    let b = bytes.max(0) as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1_048_576 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{:.1} MiB", b / 1_048_576.0)
    }
}

/// Text cut to at most `max` characters, with an ellipsis when cut (a page shows a bounded
/// preview), its control characters made visible (`visible`).
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", visible(&text[..at])),
        None => visible(text),
    }
}

/// Control characters (a terminal escape's ESC, a bell…) shown as their Unicode control
/// pictures (␛, ␇), so stored text can neither hide in a page nor be copied out of it into
/// a terminal as an escape; line breaks and tabs stay.
pub fn visible(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}'),
            '\u{7f}' => '\u{2421}',
            c if c.is_control() => '\u{fffd}',
            c => c,
        })
        .collect()
}

/// An error, as a page with the right status.
#[derive(Debug)]
pub enum WebError {
    Status(tonic::Status),
    Forbidden(String),
    BadRequest(String),
    NotFound(String),
    Internal,
}

impl From<Error> for WebError {
    fn from(e: Error) -> Self {
        Self::Status(tonic::Status::from(e))
    }
}

impl From<tonic::Status> for WebError {
    fn from(s: tonic::Status) -> Self {
        Self::Status(s)
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    chrome: Chrome,
    status: u16,
    title: &'static str,
    message: String,
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        use tonic::Code;
        let (status, message) = match self {
            Self::Status(s) => {
                let status = match s.code() {
                    Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
                    Code::NotFound => StatusCode::NOT_FOUND,
                    Code::PermissionDenied => StatusCode::FORBIDDEN,
                    Code::Unauthenticated => StatusCode::UNAUTHORIZED,
                    Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
                    Code::FailedPrecondition | Code::Aborted | Code::AlreadyExists => StatusCode::CONFLICT,
                    Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
                    Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                };
                (status, s.message().to_owned())
            }
            Self::Forbidden(m) => (StatusCode::FORBIDDEN, m),
            Self::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            Self::NotFound(m) => (StatusCode::NOT_FOUND, m),
            Self::Internal => {
                (StatusCode::INTERNAL_SERVER_ERROR, "the server could not answer; its log says why".into())
            }
        };
        let body = ErrorPage {
            chrome: Chrome::signed_out(),
            status: status.as_u16(),
            title: status.canonical_reason().unwrap_or("Error"),
            message,
        };
        (status, page(&body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_people_say_them() {
        let d = chrono::TimeDelta::seconds;
        assert_eq!(ago(d(3)), "just now");
        assert_eq!(ago(d(42)), "42 s ago");
        assert_eq!(ago(d(5 * 60 + 3)), "5 min ago");
        assert_eq!(ago(d(3 * 3600)), "3 h ago");
        assert_eq!(ago(d(2 * 86_400 + 5)), "2 days ago");
        assert_eq!(ago(d(-300)), "in 5 min");
    }

    #[test]
    fn links_encode_their_values() {
        assert_eq!(
            href("/sessions", &[("project", "a b&c/d"), ("host", "")]),
            "/sessions?project=a+b%26c%2Fd"
        );
        assert_eq!(href("/", &[]), "/");
    }

    #[test]
    fn clip_cuts_on_characters() {
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("hi", 2), "hi");
    }

    #[test]
    fn control_characters_are_shown_not_kept() {
        assert_eq!(visible("\u{1b}[31mred\u{7}\n\tok\u{7f}\u{85}"), "␛[31mred␇\n\tok␡\u{fffd}");
    }
}
