//! Internal tables are the extension's, not the caller's: `index_entries` holds field values
//! of every document, so client roles must never read it directly, yet their queries must use
//! it. While an [`AsOwner`] guard lives, statements run as the owner of `docstore.index_entries`
//! (the role that created the extension); everything else (reading `entities`, where row-level
//! security applies) runs as the caller. The guard restores the caller on drop, which also
//! runs when a Postgres error unwinds through us, and it marks the switch as a local user-id
//! change so the security context is as strict as in a SECURITY DEFINER function.
//!
//! Statements run as the owner still resolve names with the caller's search_path, where the
//! caller's temporary schema comes first for relations and types: they name every table with
//! its schema and every type and catalog with `pg_catalog.` (a temporary domain `text` whose
//! check calls the caller's function would otherwise run that function as the owner;
//! functions and operators are never looked up in the temporary schema).

use std::cell::Cell;

use pgrx::pg_sys;
use pgrx::spi::SpiClient;

use crate::errors::DocstoreError;

thread_local! {
    static OWNER: Cell<pg_sys::Oid> = const { Cell::new(pg_sys::InvalidOid) };
}

/// The owner of `docstore.index_entries` (looked up once per backend). Every name is
/// qualified: a temporary table `pg_class` of the caller's session comes first in its
/// search_path and must not decide whom [`AsOwner`] becomes.
fn owner(client: &SpiClient<'_>) -> Result<pg_sys::Oid, DocstoreError> {
    let known = OWNER.with(Cell::get);
    if known != pg_sys::InvalidOid {
        return Ok(known);
    }
    let oid = client
        .select(
            "select relowner from pg_catalog.pg_class \
             where oid = 'docstore.index_entries'::pg_catalog.regclass",
            Some(1),
            &[],
        )?
        .first()
        .get_one::<pg_sys::Oid>()?
        .ok_or_else(|| DocstoreError::Internal("docstore.index_entries has no owner".into()))?;
    OWNER.with(|o| o.set(oid));
    Ok(oid)
}

/// Whether the caller may read the internal tables itself (superuser or their owner): then
/// queries may join them with `entities` in one statement.
pub fn caller_is_privileged(client: &SpiClient<'_>) -> Result<bool, DocstoreError> {
    // SAFETY: reads the current user of this backend.
    let (is_superuser, user) = unsafe { (pg_sys::superuser(), pg_sys::GetUserId()) };
    Ok(is_superuser || user == owner(client)?)
}

/// While alive, statements run as the owner of the internal tables.
pub struct AsOwner {
    user: pg_sys::Oid,
    context: core::ffi::c_int,
}

impl AsOwner {
    /// # Errors
    /// When the owner cannot be looked up.
    pub fn new(client: &SpiClient<'_>) -> Result<Self, DocstoreError> {
        let owner = owner(client)?;
        let mut user = pg_sys::InvalidOid;
        let mut context: core::ffi::c_int = 0;
        // SAFETY: out-pointers to locals; the call only reads backend state.
        unsafe { pg_sys::GetUserIdAndSecContext(&mut user, &mut context) };
        #[allow(clippy::cast_possible_wrap)]
        let local = pg_sys::SECURITY_LOCAL_USERID_CHANGE as core::ffi::c_int;
        // SAFETY: switches to an existing role for the statements run while the guard lives;
        // restored in Drop (also on error unwinding).
        unsafe { pg_sys::SetUserIdAndSecContext(owner, context | local) };
        Ok(AsOwner { user, context })
    }
}

impl Drop for AsOwner {
    fn drop(&mut self) {
        // SAFETY: restores exactly the user and context read in `new`.
        unsafe { pg_sys::SetUserIdAndSecContext(self.user, self.context) };
    }
}

/// The role end-user requests run as (created by `sql/roles.sql`).
pub const CLIENT_ROLE: &core::ffi::CStr = c"docstore_client";

/// Whether the current user is a client whose writes go through the extension: it has the
/// privileges of `docstore_client` (is it, or a member that inherits it) and holds none of
/// INSERT, UPDATE and DELETE on `docstore.entities` itself. Any other role (a superuser, the
/// owner, a role granted DML on entities) writes with its own rights, row-level security and
/// triggers included. Remembered per user until the catalogs it reads change
/// ([`super::names`]).
pub fn caller_writes_as_client() -> bool {
    super::names::client_writes(|user| {
        let Some(entities) = super::names::relation(c"docstore", c"entities") else {
            return false;
        };
        // SAFETY: a catalog lookup by name (missing role: InvalidOid, checked) and privilege
        // checks of `user`; none of them writes anything.
        unsafe {
            let client = pg_sys::get_role_oid(CLIENT_ROLE.as_ptr(), true);
            if client == pg_sys::InvalidOid || !pg_sys::has_privs_of_role(user, client) {
                return false;
            }
            let dml =
                pg_sys::AclMode::from(pg_sys::ACL_INSERT | pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE);
            pg_sys::pg_class_aclmask(entities, user, dml, pg_sys::AclMaskHow::ACLMASK_ANY) == 0
        }
    })
}

/// While alive, statements run as `docstore_client` (as after `set local role
/// docstore_client`, for one call): the sidecar's one-statement client requests.
pub struct AsClient {
    user: pg_sys::Oid,
    context: core::ffi::c_int,
}

impl AsClient {
    /// # Errors
    /// [`DocstoreError::PermissionDenied`] when the current role may not act as
    /// `docstore_client` (it is neither a superuser nor a member of it, so `set role` would
    /// refuse it too); [`DocstoreError::Internal`] when the role does not exist.
    pub fn new() -> Result<Self, DocstoreError> {
        // SAFETY: a catalog lookup by name (missing: InvalidOid, checked) and a membership
        // check of the current user.
        let (client, member) = unsafe {
            let client = pg_sys::get_role_oid(CLIENT_ROLE.as_ptr(), true);
            let member = client != pg_sys::InvalidOid
                && pg_sys::is_member_of_role(pg_sys::GetUserId(), client);
            (client, member)
        };
        if client == pg_sys::InvalidOid {
            return Err(DocstoreError::Internal(
                "role docstore_client is missing".into(),
            ));
        }
        if !member {
            return Err(DocstoreError::PermissionDenied(
                "only members of docstore_client may act as it".into(),
            ));
        }
        let mut user = pg_sys::InvalidOid;
        let mut context: core::ffi::c_int = 0;
        // SAFETY: out-pointers to locals; the call only reads backend state.
        unsafe { pg_sys::GetUserIdAndSecContext(&mut user, &mut context) };
        #[allow(clippy::cast_possible_wrap)]
        let local = pg_sys::SECURITY_LOCAL_USERID_CHANGE as core::ffi::c_int;
        // SAFETY: switches to an existing role the caller belongs to, for the statements run
        // while the guard lives; restored in Drop (also on error unwinding).
        unsafe { pg_sys::SetUserIdAndSecContext(client, context | local) };
        Ok(AsClient { user, context })
    }
}

impl Drop for AsClient {
    fn drop(&mut self) {
        // SAFETY: restores exactly the user and context read in `new`.
        unsafe { pg_sys::SetUserIdAndSecContext(self.user, self.context) };
    }
}
