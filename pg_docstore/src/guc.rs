//! Settings: `docstore.database` selects the Firestore database of the session;
//! `docstore.auth` and `docstore.request` carry the caller's identity and request for the
//! rules (docs/rules.md).

use std::cell::RefCell;
use std::ffi::CString;
use std::rc::Rc;

use docstore_rules::eval::Auth;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

use crate::errors::DocstoreError;

pub use docstore_core::path::{is_valid_database_id, DATABASE_ID_RULE, DEFAULT_DATABASE};

static DATABASE: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"(default)"));
static AUTO_BUILD: GucSetting<bool> = GucSetting::<bool>::new(true);
static AUTH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static REQUEST: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static JWT_SECRET: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static JWT_JWKS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static JWT_ISSUER: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static JWT_AUDIENCE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static TRIGGER_URL_PREFIXES: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// Define the settings (from `_PG_init`, whenever the library is loaded).
///
/// `docstore.auth` and `docstore.request` are `SUSET`: only a superuser or a role granted
/// `SET` on them (`grant set on parameter docstore.auth to ...`) may change them. Setting them
/// before the library is loaded creates a placeholder; Postgres 15 re-checks a placeholder's
/// value against the rights of the role that set it when the library defines the setting, and
/// drops it with a warning when that role may not set it. With the extension in
/// `shared_preload_libraries` (as `make up` configures) there is never a placeholder.
pub fn init() {
    GucRegistry::define_string_guc(
        c"docstore.database",
        c"The docstore database of this session.",
        c"Several Firestore-style databases share one PostgreSQL database; this selects one. \
          '(default)' or 4-63 characters of lowercase letters, digits and hyphens starting with a letter.",
        &DATABASE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"docstore.auto_build_indexes",
        c"Whether the background workers build and drop this database's indexes by themselves.",
        c"Read by the index builder when it connects (set it per database with ALTER DATABASE ... \
          SET). Off: only CALL docstore.build_indexes() builds. Needs the extension in \
          shared_preload_libraries.",
        &AUTO_BUILD,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"docstore.auth",
        c"The authenticated caller of this request (JWT claims as JSON; null when unauthenticated).",
        c"Set by the sidecar for each request, read by the security rules. Only superusers and \
          roles granted SET on this parameter may change it.",
        &AUTH,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"docstore.request",
        c"The request being served (JSON: method, path, query limits, time).",
        c"Set by the sidecar for each request, read by the security rules. Only superusers and \
          roles granted SET on this parameter may change it.",
        &REQUEST,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"docstore.jwt_secret",
        c"The HS256 secret docstore.authenticate(jwt) verifies tokens with.",
        c"Set it in postgresql.conf or with ALTER SYSTEM (not ALTER DATABASE/ROLE SET, whose \
          values every role can read). Only superusers can see or change it.",
        &JWT_SECRET,
        GucContext::Suset,
        GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_string_guc(
        c"docstore.jwt_jwks",
        c"The JSON Web Key Set (public RSA and EC keys) docstore.authenticate(jwt) verifies RS256/ES256 tokens with.",
        c"The text of a JWKS document ({\"keys\": [...]}), e.g. the one the sidecar's --jwks-url \
          serves. Only superusers can change it.",
        &JWT_JWKS,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"docstore.jwt_issuer",
        c"When set, docstore.authenticate(jwt) requires this iss claim.",
        c"The sidecar's --jwt-issuer. Only superusers can change it.",
        &JWT_ISSUER,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"docstore.jwt_audience",
        c"When set, docstore.authenticate(jwt) requires this audience in the aud claim.",
        c"The sidecar's --jwt-audience. Only superusers can change it.",
        &JWT_AUDIENCE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"docstore.trigger_url_prefixes",
        c"The URL prefixes write triggers may call (comma-separated; '*' allows any URL).",
        c"docstore.create_trigger refuses any other URL (42501). Empty (the default): no \
          trigger can be created. '*' is for development only (docs/triggers.md).",
        &TRIGGER_URL_PREFIXES,
        GucContext::Suset,
        GucFlags::default(),
    );
}

/// The caller's verified JWT claims (`docstore.auth`) as rules read them: none when unset,
/// empty or JSON `null` (unauthenticated).
///
/// # Errors
/// [`DocstoreError::InvalidArgument`] when the setting is not a JSON object or null.
pub fn auth() -> Result<Auth, DocstoreError> {
    let Some(text) = AUTH.get() else {
        return Ok(Auth::default());
    };
    let text = text.to_string_lossy();
    if text.trim().is_empty() {
        return Ok(Auth::default());
    }
    // A session sets the claims once and then writes many times: parse and convert each value
    // once.
    let cached = AUTH_PARSED.with_borrow(|c| match c {
        Some((key, auth)) if *key == *text => Some(auth.clone()),
        _ => None,
    });
    if let Some(auth) = cached {
        return Ok(auth);
    }
    let auth = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Null) => Auth::default(),
        Ok(claims @ serde_json::Value::Object(_)) => Auth::new(Some(claims)),
        _ => {
            return Err(DocstoreError::InvalidArgument(
                "docstore.auth must hold a JSON object of claims or null".into(),
            ))
        }
    };
    AUTH_PARSED.set(Some((text.into_owned(), auth.clone())));
    Ok(auth)
}

thread_local! {
    /// The last value of `docstore.auth` [`auth`] read, and its claims (a backend is one
    /// thread).
    static AUTH_PARSED: RefCell<Option<(String, Auth)>> = const { RefCell::new(None) };
}

fn text_setting(setting: &GucSetting<Option<CString>>) -> Option<String> {
    setting
        .get()
        .map(|c| c.to_string_lossy().into_owned())
        .filter(|s| !s.trim().is_empty())
}

/// The settings of `docstore.authenticate`: `docstore.jwt_secret`, `docstore.jwt_jwks`,
/// `docstore.jwt_issuer`, `docstore.jwt_audience` (empty is unset).
pub fn jwt_settings() -> docstore_jwt::Settings {
    docstore_jwt::Settings {
        secret: JWT_SECRET
            .get()
            .map(|c| c.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty()),
        jwks: text_setting(&JWT_JWKS),
        issuer: text_setting(&JWT_ISSUER),
        audience: text_setting(&JWT_AUDIENCE),
        ..docstore_jwt::Settings::default()
    }
}

/// The keys of [`jwt_settings`], decoded once per distinct settings.
///
/// # Errors
/// [`DocstoreError::Unauthenticated`] when neither a secret nor a JWKS is set;
/// [`DocstoreError::InvalidArgument`] for a JWKS that is not one.
pub fn jwt_keys() -> Result<Rc<docstore_jwt::Keys>, DocstoreError> {
    let settings = jwt_settings();
    if settings.secret.is_none() && settings.jwks.is_none() {
        return Err(DocstoreError::Unauthenticated(
            "neither docstore.jwt_secret nor docstore.jwt_jwks is set: an administrator sets \
             them in postgresql.conf"
                .into(),
        ));
    }
    let cached = JWT_KEYS.with_borrow(|c| match c {
        Some((key, keys)) if *key == settings => Some(Rc::clone(keys)),
        _ => None,
    });
    if let Some(keys) = cached {
        return Ok(keys);
    }
    let keys = Rc::new(docstore_jwt::Keys::new(&settings).map_err(|e| {
        DocstoreError::InvalidArgument(format!("docstore.jwt_secret or docstore.jwt_jwks: {e}"))
    })?);
    JWT_KEYS.set(Some((settings, Rc::clone(&keys))));
    Ok(keys)
}

thread_local! {
    /// The settings [`jwt_keys`] last decoded, and their keys.
    static JWT_KEYS: RefCell<Option<(docstore_jwt::Settings, Rc<docstore_jwt::Keys>)>> =
        const { RefCell::new(None) };
}

/// Set `docstore.auth` for the rest of the session (or until the transaction rolls back), with
/// the rights of a superuser: only for claims `docstore.authenticate` has verified.
pub fn set_auth_verified(claims: &str) -> Result<(), DocstoreError> {
    let value = CString::new(claims)
        .map_err(|_| DocstoreError::InvalidArgument("claims hold U+0000".into()))?;
    #[allow(clippy::cast_possible_wrap)]
    let elevel = pgrx::pg_sys::PGERROR as core::ffi::c_int;
    // SAFETY: both strings are NUL-terminated and live across the call; the setting is ours
    // (defined in `init`); a failure raises a Postgres ERROR (elevel), which pgrx turns into
    // a Rust unwind through this frame.
    unsafe {
        pgrx::pg_sys::set_config_option(
            c"docstore.auth".as_ptr(),
            value.as_ptr(),
            pgrx::pg_sys::GucContext::PGC_SUSET,
            pgrx::pg_sys::GucSource::PGC_S_SESSION,
            pgrx::pg_sys::GucAction::GUC_ACTION_SET,
            true,
            elevel,
            false,
        );
    }
    Ok(())
}

/// The session's database id, validated.
///
/// # Errors
/// [`DocstoreError::InvalidArgument`] for an id Firestore would refuse.
pub fn database_id() -> Result<String, DocstoreError> {
    let id = DATABASE
        .get()
        .map(|c| c.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_DATABASE.to_owned());
    if is_valid_database_id(&id) {
        Ok(id)
    } else {
        Err(DocstoreError::InvalidArgument(format!(
            "docstore.database = '{id}' is not a valid database id: {DATABASE_ID_RULE}"
        )))
    }
}

/// Set `name` to `value` until the end of the transaction (`set_config(name, value, true)`),
/// with the current role's own rights: a superuser, or a role granted `SET` on a `SUSET`
/// setting such as `docstore.auth`.
///
/// # Errors
/// [`DocstoreError::InvalidArgument`] for a value holding U+0000; a role without the right
/// raises 42501 (a Postgres ERROR).
pub fn set_local(name: &core::ffi::CStr, value: &str) -> Result<(), DocstoreError> {
    let value = CString::new(value).map_err(|_| {
        DocstoreError::InvalidArgument(format!("{} holds U+0000", name.to_string_lossy()))
    })?;
    #[allow(clippy::cast_possible_wrap)]
    let elevel = pgrx::pg_sys::PGERROR as core::ffi::c_int;
    // SAFETY: both strings are NUL-terminated and live across the call; a refusal raises a
    // Postgres ERROR (elevel), which pgrx turns into a Rust unwind through this frame.
    unsafe {
        let context = if pgrx::pg_sys::superuser() {
            pgrx::pg_sys::GucContext::PGC_SUSET
        } else {
            pgrx::pg_sys::GucContext::PGC_USERSET
        };
        pgrx::pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            context,
            pgrx::pg_sys::GucSource::PGC_S_SESSION,
            pgrx::pg_sys::GucAction::GUC_ACTION_LOCAL,
            true,
            elevel,
            false,
        );
    }
    Ok(())
}

/// `docstore.trigger_url_prefixes` as set (empty when unset).
pub fn trigger_url_prefixes() -> String {
    TRIGGER_URL_PREFIXES
        .get()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}
