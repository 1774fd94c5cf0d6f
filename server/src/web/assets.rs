//! The web view's static files, embedded in the binary: htmx and its SSE extension (pinned,
//! vendored under server/assets/ with their licenses), our script and stylesheet. Answered
//! with an ETag so a browser revalidates cheaply and never keeps a stale copy.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};

struct Asset {
    name: &'static str,
    mime: &'static str,
    body: &'static [u8],
    etag: String,
}

const FILES: [(&str, &str, &[u8]); 5] = [
    (
        "htmx-2.0.11.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/htmx-2.0.11.min.js"),
    ),
    (
        "htmx-ext-sse-2.2.4.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/htmx-ext-sse-2.2.4.min.js"),
    ),
    ("baton.js", "text/javascript; charset=utf-8", include_bytes!("../../assets/baton.js")),
    ("baton.css", "text/css; charset=utf-8", include_bytes!("../../assets/baton.css")),
    ("favicon.svg", "image/svg+xml", include_bytes!("../../assets/favicon.svg")),
];

static ASSETS: LazyLock<Vec<Asset>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|(name, mime, body)| Asset {
            name,
            mime,
            body,
            etag: format!("\"{}\"", &hex::encode(Sha256::digest(body))[..16]),
        })
        .collect()
});

pub async fn serve(Path(name): Path<String>, headers: HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let etag = HeaderValue::from_str(&asset.etag).unwrap_or(HeaderValue::from_static("\"\""));
    let cache = (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if headers.get(header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes() == asset.etag.as_bytes()) {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag), cache]).into_response();
    }
    let mime = (header::CONTENT_TYPE, HeaderValue::from_static(asset.mime));
    ([mime, (header::ETAG, etag), cache], asset.body).into_response()
}
