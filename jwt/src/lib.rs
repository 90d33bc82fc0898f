//! The one JWT verifier of pg_docstore: SQL `docstore.authenticate(jwt)` and the sidecar's
//! `Authorization: Bearer <JWT>` make exactly these checks (docs/security.md):
//!
//! - a compact JWS of three base64url parts whose header names HS256 (verified with the
//!   shared secret) or RS256/RS384/RS512/PS256/ES256/ES384 (verified with a public key of
//!   the JWKS whose algorithm and, when the token names one, `kid` match); `none` and every
//!   other algorithm are refused, and the secret is never used for another algorithm nor a
//!   public key as an HMAC secret (no key confusion);
//! - `exp` required, `nbf` optional, both NumericDates (integer or fractional seconds),
//!   with a leeway either way ([`DEFAULT_LEEWAY_SECONDS`]);
//! - `iss` required and equal when an issuer is set; `aud` required and equal to (or, as an
//!   array, containing) the audience when one is set.
//!
//! Pure: no clock, no files, no network. The caller passes the time and the key set
//! ([`Keys`], built from [`Settings`]); the sidecar fetches JWKS URLs itself.

mod error;
mod keys;
mod verify;

#[cfg(any(test, feature = "vectors"))]
pub mod vectors;

pub use error::{ErrorKind, JwtError};
pub use keys::{Keys, Settings, DEFAULT_LEEWAY_SECONDS};
pub use verify::{verify, Lifetime};
