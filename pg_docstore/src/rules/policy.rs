//! The row-level-security side of the rules: plain SQL by `docstore_client` reads
//! `docstore.entities` through the policy `docstore_rules_list` (sql/rules.sql), which calls
//! `docstore.rules_policy(database_id, path, data)`. This module regenerates that function from
//! every stored ruleset: per database id, the ruleset's `list` expression from the SQL back end
//! (`docstore_rules::sql`), over `request` (`docstore.rules_request('list', ..)`: the caller's
//! auth, the row's path) and `resource` (`docstore.rules_document(..)`: the row). A database
//! without a ruleset, or one `docstore.databases` does not list, is locked (`ELSE false`): no
//! row of it passes. The trigger on `docstore.databases` regenerates the function too.
//!
//! Clients can call the function directly (a policy's functions run with the querying user's
//! privileges, so EXECUTE cannot be revoked from them), with a row of their own making. A
//! `list` rule that reads other documents (`get()` / `exists()`) would then answer questions
//! about documents the client may not read (an existence or content oracle). So such a branch
//! decides only a row stored exactly as given: it first reads the row of (database_id, path)
//! through `docstore.rules_lookup` (as the owner) and answers false unless it is `resource`;
//! a stored row the client may read, or false, is all it can learn. A branch whose rule reads
//! no other document decides the given values only, which tell nothing about stored ones, and
//! keeps the row-level-security path free of the extra read.
//!
//! This is the documented deviation: Firestore refuses a query that could return a denied
//! document; here a plain `select` is filtered by the per-document `list` rule (a policy that
//! raised would make results depend on the plan).

use pgrx::spi::SpiClient;

use docstore_rules::Method;

use crate::errors::DocstoreError;

/// The body of `docstore.rules_policy` for `rulesets` (database id, source), in order.
///
/// # Errors
/// A source that does not compile.
pub fn body(rulesets: &[(String, String)]) -> Result<String, DocstoreError> {
    if rulesets.is_empty() {
        return Ok("SELECT false".to_owned());
    }
    let mut out = String::from("SELECT CASE database_id");
    for (database, source) in rulesets {
        let ruleset = super::compile(source)?;
        let sql = docstore_rules::sql::generate(&ruleset, "request", "resource");
        let list = sql
            .methods
            .iter()
            .find(|m| m.method == Method::List)
            .map_or("false", |m| m.expression.as_str());
        // The inner SELECT is fenced (OFFSET 0) so the planner does not copy the request and
        // resource expressions into every use of them. Every get()/exists() of the SQL back end
        // is a call of `docstore.rules_lookup(` (a string literal of the source that spells it
        // only adds the check).
        let decided = if list.contains("docstore.rules_lookup(") {
            format!(
                "CASE WHEN coalesce(docstore.rules_lookup('get', resource->'__name__', database_id) = resource, false) THEN {list} ELSE false END"
            )
        } else {
            list.to_owned()
        };
        out.push_str(&format!(
            "\n  WHEN '{}' THEN (SELECT {decided} FROM (SELECT docstore.rules_request('list', database_id, path) AS request, docstore.rules_document(database_id, path, data) AS resource OFFSET 0) AS r)",
            database.replace('\'', "''")
        ));
    }
    out.push_str("\n  ELSE false END");
    Ok(out)
}

/// A dollar-quote tag that does not occur in `text`.
fn dollar_tag(text: &str) -> String {
    let mut n = 0;
    loop {
        let tag = format!("$policy{n}$");
        if !text.contains(&tag) {
            return tag;
        }
        n += 1;
    }
}

/// Regenerate `docstore.rules_policy` from the rules of the databases `docstore.databases`
/// lists (the triggers of both tables call this after every change, `pg_restore` included, so
/// the policy always follows the stored rules and databases).
///
/// # Errors
/// SPI errors; a stored ruleset that does not compile.
pub fn install(client: &mut SpiClient<'_>) -> Result<(), DocstoreError> {
    let mut rulesets = Vec::new();
    for row in client.select(
        "select r.database_id, r.source from docstore.rules r \
         where r.database_id in (select d.id from docstore.databases d) order by r.database_id",
        None,
        &[],
    )? {
        let database: Option<String> = row.get(1)?;
        let source: Option<String> = row.get(2)?;
        if let (Some(d), Some(s)) = (database, source) {
            rulesets.push((d, s));
        }
    }
    let body = body(&rulesets)?;
    let tag = dollar_tag(&body);
    let sql = format!(
        "CREATE OR REPLACE FUNCTION docstore.rules_policy(database_id text, path text, data jsonb) \
         RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER \
         SET search_path = pg_catalog, pg_temp AS {tag}{body}{tag}"
    );
    client.update(&sql, None, &[])?;
    Ok(())
}
