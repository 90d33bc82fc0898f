//! Why a token was refused: a stable kind (named in tests/vectors/jwt.json) and a message
//! for the caller.

/// What went wrong, stable across versions (the vectors and the docs name these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Not three base64url parts, or a header or claims that are not JSON objects.
    Malformed,
    /// The header names an algorithm that is never accepted (`none`, or an unknown one).
    UnsupportedAlgorithm,
    /// No configured key verifies the token's algorithm (and `kid`).
    NoKey,
    /// The token names a `kid` that no key of the JWKS has (a JWKS URL is refetched then).
    UnknownKid,
    /// The signature does not match.
    BadSignature,
    /// `exp` is past, beyond the leeway.
    Expired,
    /// `nbf` is ahead, beyond the leeway.
    NotYetValid,
    /// `exp`, or `iss`/`aud` when an issuer/audience is set, is missing.
    MissingClaim,
    /// `exp` or `nbf` is not a number of seconds.
    BadDate,
    /// `iss` is not the configured issuer.
    WrongIssuer,
    /// `aud` is not (or does not contain) the configured audience.
    WrongAudience,
    /// Any other failure of verification.
    Invalid,
    /// The settings themselves are unusable (an empty secret, a JWKS that is not one).
    Settings,
}

impl ErrorKind {
    /// The kind's name in tests/vectors/jwt.json.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Malformed => "malformed",
            ErrorKind::UnsupportedAlgorithm => "unsupported_algorithm",
            ErrorKind::NoKey => "no_key",
            ErrorKind::UnknownKid => "unknown_kid",
            ErrorKind::BadSignature => "bad_signature",
            ErrorKind::Expired => "expired",
            ErrorKind::NotYetValid => "not_yet_valid",
            ErrorKind::MissingClaim => "missing_claim",
            ErrorKind::BadDate => "bad_date",
            ErrorKind::WrongIssuer => "wrong_issuer",
            ErrorKind::WrongAudience => "wrong_audience",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Settings => "settings",
        }
    }
}

/// A refused token (or unusable settings): its kind and a message for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Why, in words (without the token).
    pub message: String,
}

impl JwtError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> JwtError {
        JwtError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for JwtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JwtError {}
