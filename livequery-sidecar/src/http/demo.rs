//! `GET /demo`: a live demo page (docs/demo.md), the Firestore paper's restaurants: a city's
//! ten best rated, kept current by the browser's own `EventSource` on `:listen`.
//!
//! The page is one static HTML file with its script inline, compiled into the binary. It
//! holds no credentials: the reader gives a token in the form or the URL fragment
//! (`/demo#token=...`), and the page passes it as `?access_token=`, since EventSource
//! cannot set headers. Without one, the stream is the anonymous caller's.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The page.
pub const PAGE: &str = include_str!("demo.html");

/// What the page may do: its own inline script and style, and requests to this origin only
/// (the `:listen` stream); no frames, no forms posted anywhere, no referrer (a token in the
/// address bar never leaves in a `Referer`).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// `GET /demo`.
pub async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        PAGE,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_listens_and_embeds_no_key() {
        assert!(PAGE.contains("new EventSource("));
        assert!(PAGE.contains("access_token"));
        assert!(PAGE.contains("order by avgRating desc limit 10"));
        assert!(!PAGE.to_lowercase().contains("admin_key"));
        assert!(
            !PAGE.contains("innerHTML"),
            "document data is set as text only"
        );
    }
}
