//! SPI with cached plans: every statement the extension runs is prepared once per backend and
//! kept (`SPI_keepplan`), so a write costs executions, not parses and plans.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiResult};
use pgrx::PgOid;

thread_local! {
    static PLANS: RefCell<HashMap<&'static str, Rc<OwnedPreparedStatement>>> = RefCell::new(HashMap::new());
}

/// A prepared statement for `sql` (prepared on first use with argument types `types`).
/// The cache is not borrowed while the statement runs, so nested SPI use is safe.
///
/// # Errors
/// What `SPI_prepare` reports (a bug in our SQL, or a dropped table).
pub fn plan(
    client: &SpiClient<'_>,
    sql: &'static str,
    types: &[PgOid],
) -> SpiResult<Rc<OwnedPreparedStatement>> {
    if let Some(plan) = PLANS.with(|plans| plans.borrow().get(sql).cloned()) {
        return Ok(plan);
    }
    let plan = Rc::new(client.prepare_mut(sql, types)?.keep());
    PLANS.with(|plans| plans.borrow_mut().insert(sql, plan.clone()));
    Ok(plan)
}
