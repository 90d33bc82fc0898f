//! What a delivery sends: the JSON body and its signature header (docs/triggers.md,
//! "Deliveries"). Pure.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt::Write as _;

use crate::pg::triggers::Claimed;

/// The signature header's name.
pub const SIGNATURE_HEADER: &str = "x-docstore-signature";

/// The body of a delivery: `{"trigger", "changeId", "event", "path", "params", "before",
/// "after", "commitTime"}`, the documents as the HTTP API renders them (or null).
pub fn body(c: &Claimed) -> String {
    let text = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    format!(
        "{{\"trigger\":{},\"changeId\":{},\"event\":{},\"path\":{},\"params\":{},\"before\":{},\"after\":{},\"commitTime\":\"{}\"}}",
        text(&c.trigger),
        text(&c.change_id),
        text(&c.event),
        text(&c.path),
        c.params,
        c.before.as_deref().unwrap_or("null"),
        c.after.as_deref().unwrap_or("null"),
        c.commit_time.to_rfc3339(),
    )
}

/// `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`, the secret's UTF-8 bytes
/// the key.
pub fn signature(secret: &str, unix_seconds: u64, body: &str) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        // HMAC takes a key of any length.
        Err(_) => return format!("t={unix_seconds},v1="),
    };
    mac.update(unix_seconds.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    let digest = mac.finalize().into_bytes();
    let mut out = format!("t={unix_seconds},v1=");
    for byte in digest {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_hmac_sha256_of_time_dot_body() {
        // Computed independently: python's hmac.new(b"key", b"1700000000.{}", sha256).
        assert_eq!(
            signature("key", 1_700_000_000, "{}"),
            "t=1700000000,v1=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae"
        );
    }
}
