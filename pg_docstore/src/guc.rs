//! Settings: `docstore.database` selects the Firestore database of the session.

use std::ffi::CString;

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

use crate::errors::DocstoreError;

/// Default database id, as in Firestore.
pub const DEFAULT_DATABASE: &str = "(default)";

static DATABASE: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"(default)"));

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
    validate_database_id(&id)?;
    Ok(id)
}

fn validate_database_id(id: &str) -> Result<(), DocstoreError> {
    let valid = id == DEFAULT_DATABASE
        || ((4..=63).contains(&id.len())
            && id.starts_with(|c: char| c.is_ascii_lowercase())
            && id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !id.ends_with('-'));
    if valid {
        Ok(())
    } else {
        Err(DocstoreError::InvalidArgument(format!(
            "docstore.database = '{id}' is not a valid database id: use '(default)' or 4-63 lowercase letters, digits and hyphens, starting with a letter"
        )))
    }
}
