//! The row-level-security side of the rules: plain SQL by `docstore_client` reads
//! `docstore.entities` through the policy `docstore_rules_list` (sql/rules.sql), which calls
//! `docstore.rules_policy(database_id, path, data)`. This module regenerates that function from
//! every stored ruleset: per database id, the ruleset's `list` expression from the SQL back end
//! (`docstore_rules::sql`), over `request` (`docstore.rules_request('list', ..)`: the caller's
//! auth, the row's path) and `resource` (`docstore.rules_document(..)`: the row). A database
//! without a ruleset, or one `docstore.databases` does not list, is locked (`ELSE false`): no
//! row of it passes. The trigger on `docstore.databases` regenerates the function too.
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
        // resource expressions into every use of them.
        out.push_str(&format!(
            "\n  WHEN '{}' THEN (SELECT {list} FROM (SELECT docstore.rules_request('list', database_id, path) AS request, docstore.rules_document(database_id, path, data) AS resource OFFSET 0) AS r)",
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
