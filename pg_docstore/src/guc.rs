//! Settings: `docstore.database` selects the Firestore database of the session;
//! `docstore.auth` and `docstore.request` carry the caller's identity and request for the
//! rules (DESIGN.md section 6).

use std::ffi::CString;

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

use crate::errors::DocstoreError;

pub use docstore_core::path::{is_valid_database_id, DATABASE_ID_RULE, DEFAULT_DATABASE};

static DATABASE: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"(default)"));
static AUTO_BUILD: GucSetting<bool> = GucSetting::<bool>::new(true);
static AUTH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static REQUEST: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

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
