//! Fast paths for the commonest plan shape: one branch that is one range scan, with nothing to
//! decode or re-check. The scan and the document lookups become one SQL statement (a nested
//! loop of primary-key lookups in key order, stopped by LIMIT), and a count becomes `count(*)`
//! over the key range. Same answers as the general executor (the regression and differential
//! tests run both shapes); fewer round trips.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid};

use docstore_core::plan::{scan_bounds, Branch, Plan, Scan};
use docstore_core::query::{AggregateFunction, Query, Selection};

use super::ResultRow;
use crate::errors::DocstoreError;
use crate::pg::jsonb::{JsonbOut, StoredJsonb};
use crate::pg::spi::plan as prepared;
use crate::pg::time::from_timestamptz;

const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
const BYTEA: PgOid = PgOid::BuiltIn(PgBuiltInOids::BYTEAOID);
const INT8: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8OID);

/// The single plain scan of a plan, if that is all it is.
fn single_scan(plan: &Plan) -> Option<&Scan> {
    if plan.recheck || plan.branches.len() != 1 {
        return None;
    }
    match &plan.branches[0] {
        Branch::Scans(scans) if scans.len() == 1 => {
            let scan = &scans[0];
            (scan.key_filters.is_empty() && scan.name_under.is_none()).then_some(scan)
        }
        _ => None,
    }
}

/// Documents of a single-range scan with a limit, in one statement. `None`: not this shape.
pub fn documents(
    client: &SpiClient<'_>,
    database: &str,
    query: &Query,
    plan: &Plan,
) -> Result<Option<Vec<ResultRow>>, DocstoreError> {
    let (Some(scan), Selection::Documents, Some(limit)) =
        (single_scan(plan), &query.selection, query.limit)
    else {
        return Ok(None);
    };
    let ranges = scan_bounds(plan, scan);
    let [range] = ranges.as_slice() else {
        return Ok(None);
    };
    let sql = if scan.backward {
        "select e.path, e.data, e.update_time, e.create_time from docstore.index_entries i \
         join docstore.entities e on e.database_id = i.database_id and e.name = i.name \
         where i.database_id = $1 and i.key >= $2 and i.key < $3 order by i.key desc limit $4 offset $5"
    } else {
        "select e.path, e.data, e.update_time, e.create_time from docstore.index_entries i \
         join docstore.entities e on e.database_id = i.database_id and e.name = i.name \
         where i.database_id = $1 and i.key >= $2 and i.key < $3 order by i.key limit $4 offset $5"
    };
    let stmt = prepared(client, sql, &[TEXT, BYTEA, BYTEA, INT8, INT8])?;
    let mut rows = Vec::new();
    for row in client.select(
        &*stmt,
        None,
        &[
            database.into(),
            range.start.clone().into(),
            range.end.clone().into(),
            i64::from(limit.count()).into(),
            i64::from(query.offset).into(),
        ],
    )? {
        let path: String = row.get(1)?.unwrap_or_default();
        let Some(data) = row.get::<StoredJsonb>(2)? else {
            return Err(DocstoreError::Internal("entity without data".into()));
        };
        let time: Option<TimestampWithTimeZone> = row.get(3)?;
        let created: Option<TimestampWithTimeZone> = row.get(4)?;
        rows.push(ResultRow {
            path,
            data: JsonbOut::Stored(data),
            update_time: time.map(from_timestamptz).unwrap_or_default(),
            create_time: created.map(from_timestamptz).unwrap_or_default(),
        });
    }
    if plan.reverse_output {
        rows.reverse();
    }
    Ok(Some(rows))
}

/// `count(*)` (and `count_up_to`) of a single scan, counted in the index. `None`: not this shape.
pub fn count(
    client: &SpiClient<'_>,
    database: &str,
    query: &Query,
    plan: &Plan,
) -> Result<Option<u64>, DocstoreError> {
    let Selection::Aggregations(aggregations) = &query.selection else {
        return Ok(None);
    };
    if !aggregations
        .iter()
        .all(|a| matches!(a.function, AggregateFunction::Count { .. }))
    {
        return Ok(None);
    }
    let Some(scan) = single_scan(plan) else {
        return Ok(None);
    };
    // Nothing past offset + limit (or the largest up_to) matters.
    let up_to = aggregations
        .iter()
        .map(|a| match a.function {
            AggregateFunction::Count { up_to: Some(n) } => Some(n),
            _ => None,
        })
        .try_fold(0u64, |acc, n| n.map(|n| acc.max(n)));
    let cap = match (query.limit, up_to) {
        (Some(l), _) => Some(u64::from(query.offset) + u64::from(l.count())),
        (None, Some(u)) => Some(u64::from(query.offset) + u),
        (None, None) => None,
    };
    let sql = "select count(*) from (select 1 from docstore.index_entries \
               where database_id = $1 and key >= $2 and key < $3 limit $4) s";
    let stmt = prepared(client, sql, &[TEXT, BYTEA, BYTEA, INT8])?;
    let mut total: u64 = 0;
    for range in scan_bounds(plan, scan) {
        let remaining = cap.map_or(i64::MAX, |c| {
            i64::try_from(c.saturating_sub(total)).unwrap_or(i64::MAX)
        });
        if remaining == 0 {
            break;
        }
        let n = client
            .select(
                &*stmt,
                Some(1),
                &[
                    database.into(),
                    range.start.into(),
                    range.end.into(),
                    remaining.into(),
                ],
            )?
            .first()
            .get_one::<i64>()?
            .unwrap_or(0);
        total += u64::try_from(n).unwrap_or(0);
    }
    Ok(Some(total))
}
