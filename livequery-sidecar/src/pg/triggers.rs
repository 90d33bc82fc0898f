//! The SQL of write triggers' delivery (docs/triggers.md): the recorder's reads and inserts,
//! the deliverer's claims and outcomes, and the commit of an exactly-once endpoint's writes
//! with the change's acknowledgement. Values are bound, never spliced.

use docstore_core::value::Timestamp;

use super::databases::DEFAULT_DATABASE;
use super::types::JsonText;
use super::{Db, PgError, RequestTx, RunAs};
use crate::source::Lsn;
use crate::triggers::select::{Record, Trigger, DEPTH_PREFIX};

/// The triggers, locked against `drop_trigger` until the recording transaction ends (so no
/// delivery is recorded for a trigger being dropped).
const TRIGGERS_SQL: &str = "select name, database_id, pattern, events, position::text, \
     (extract(epoch from created_at) * 1000000)::int8 from docstore.triggers for key share";

const INSERT_SQL: &str = "insert into docstore.trigger_deliveries \
     (trigger_name, change_id, position, commit_time, path, event, before, after, params, depth, \
      state, last_error) \
     select r.trigger_name, r.change_id, r.position::pg_lsn, \
            to_timestamp(r.commit_micros / 1000000.0), r.path, r.event, r.before::jsonb, \
            r.after::jsonb, r.params::jsonb, r.depth, \
            case when r.parked is null then 'pending' else 'parked' end, r.parked \
     from unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::text[], \
                 $7::text[], $8::text[], $9::text[], $10::int4[], $11::text[]) \
          as r(trigger_name, change_id, position, commit_micros, path, event, before, after, \
               params, depth, parked) \
     on conflict (trigger_name, change_id) do nothing";

const ADVANCE_SQL: &str = "update docstore.triggers set position = $1::text::pg_lsn \
     where position < $1::text::pg_lsn";

/// The heads of the documents' queues (the first undelivered change of each trigger and
/// document) that are due, claimed for `$2` seconds: another sidecar, or this one after a
/// crash, takes them again only when the claim has run out.
///
/// The selection walks the due pending rows in `next_attempt` order (the partial index
/// `trigger_deliveries_due`) and keeps those with no earlier undelivered change of their
/// document (a probe of `trigger_deliveries_document`), so its cost is the rows it looks at,
/// not the backlog (BENCHMARKS.md, "Write triggers"). A parked or claimed earlier change
/// holds its document's later ones back.
///
/// The claim commits with `synchronous_commit = off` (`DELIVERY_SETTINGS`): a claim lost in
/// a crash of Postgres only means the change is claimed and delivered again, which
/// at-least-once allows, and exactly-once effects are guarded by the acknowledgement,
/// committed synchronously with them (docs/triggers.md). At worst a change gets one attempt
/// more than the limit.
const CLAIM_SQL: &str = "with due as ( \
         select d.trigger_name, d.change_id from docstore.trigger_deliveries d \
         where d.state = 'pending' and d.next_attempt <= now() \
           and not exists ( \
             select from docstore.trigger_deliveries e \
             where e.trigger_name = d.trigger_name and e.path = d.path and e.state <> 'done' \
               and e.position <= d.position \
               and (e.position < d.position \
                    or (length(e.change_id), e.change_id) < (length(d.change_id), d.change_id))) \
         order by d.next_attempt limit $1 \
     ) \
     update docstore.trigger_deliveries d \
     set next_attempt = now() + make_interval(secs => $2), attempts = d.attempts + 1 \
     from due, docstore.triggers t \
     where d.trigger_name = due.trigger_name and d.change_id = due.change_id \
       and t.name = d.trigger_name and d.state = 'pending' and d.next_attempt <= now() \
     returning d.trigger_name, d.change_id, \
         (extract(epoch from d.commit_time) * 1000000)::int8, d.path, d.event, \
         d.before::text, d.after::text, d.params::text, d.attempts, d.depth, t.url, t.mode, \
         t.options::text, t.secret, t.database_id, \
         (extract(epoch from now() - d.commit_time) * 1000)::float8";

/// The settings of the claim's and the done marks' transactions. They commit asynchronously
/// (see `CLAIM_SQL` and `DONE_MANY_SQL`), and they are planned as index walks whatever the
/// statistics say: `trigger_deliveries` grows by thousands of rows a second in a burst and
/// empties again, faster than autovacuum's `ANALYZE` follows, and with statistics of a
/// smaller table the planner took a bitmap scan of every due row and a sort (and a hash join
/// back to the table) over the walk of `trigger_deliveries_due`: 93 ms instead of 0.7 ms for
/// 16 heads of 15,000 pending rows, seconds per claim under load (BENCHMARKS.md, "Write
/// triggers"). Both statements only probe indexes: the walk in `next_attempt` order with a
/// probe of `trigger_deliveries_document` per row, and primary key look-ups.
const DELIVERY_SETTINGS: &str = "set local synchronous_commit = off; \
     set local enable_seqscan = off; set local enable_bitmapscan = off; \
     set local enable_sort = off; set local enable_hashjoin = off; \
     set local enable_mergejoin = off";

const DONE_SQL: &str = "update docstore.trigger_deliveries \
     set state = 'done', last_error = null, next_attempt = now() \
     where trigger_name = $1 and change_id = $2";

/// At-least-once deliveries answered 2xx, marked done together, committed without waiting for
/// the WAL flush (`DELIVERY_SETTINGS`): a mark lost when Postgres crashes only means its
/// change is delivered again, which at-least-once allows (docs/triggers.md). Marks commit in
/// the order they were made, so a lost mark loses every later one too: a document's changes
/// are then delivered again from the first lost one, in order.
const DONE_MANY_SQL: &str = "update docstore.trigger_deliveries d \
     set state = 'done', last_error = null, next_attempt = now() \
     from unnest($1::text[], $2::text[]) as m(trigger_name, change_id) \
     where d.trigger_name = m.trigger_name and d.change_id = m.change_id";

const FAILED_SQL: &str = "update docstore.trigger_deliveries \
     set state = case when $4 then 'parked' else 'pending' end, last_error = $3, \
         next_attempt = now() + make_interval(secs => $5) \
     where trigger_name = $1 and change_id = $2";

/// Delivered changes are kept this long (their rows answer a late duplicate's question).
const PURGE_SQL: &str = "delete from docstore.trigger_deliveries \
     where state = 'done' and next_attempt < now() - interval '1 hour'";

/// Only undelivered rows are joined (the partial index `trigger_deliveries_document`): the
/// done rows kept for an hour are not read every 5 s.
const COUNTS_SQL: &str = "select t.name, \
         count(*) filter (where d.state = 'pending'), count(*) filter (where d.state = 'parked') \
     from docstore.triggers t left join docstore.trigger_deliveries d \
         on d.trigger_name = t.name and d.state <> 'done' \
     group by t.name";

const ACK_SQL: &str =
    "insert into docstore.trigger_acks (trigger_name, change_id) values ($1, $2) \
     on conflict do nothing";

const DEPTH_SQL: &str = "select pg_logical_emit_message(true, $1::text, $2::text)";

const ROLE_SQL: &str = "select set_config('role', $1::text, true)";

/// Begin the transaction that records a batch of the stream, with the triggers as it sees
/// them.
///
/// # Errors
/// Postgres errors.
///
/// # Cancel safety
/// Dropped midway, the transaction is rolled back (`RequestTx`).
pub async fn begin_recording(db: &Db) -> Result<(RequestTx, Vec<Trigger>), PgError> {
    let tx = db.begin(DEFAULT_DATABASE, &RunAs::Admin).await?;
    let rows = tx.client()?.query(TRIGGERS_SQL, &[]).await?;
    let mut triggers = Vec::with_capacity(rows.len());
    for row in rows {
        let name: String = row.try_get(0)?;
        let pattern: String = row.try_get(2)?;
        let events: Vec<String> = row.try_get(3)?;
        let position: String = row.try_get(4)?;
        let created: i64 = row.try_get(5)?;
        let trigger = Timestamp::from_micros(created).and_then(|created_at| {
            Trigger::new(
                name.clone(),
                row.try_get(1).ok()?,
                &pattern,
                &events,
                Lsn::parse(&position)?,
                created_at,
            )
        });
        match trigger {
            Some(t) => triggers.push(t),
            None => {
                tracing::error!(trigger = %name, "a trigger's stored row does not parse: it records nothing");
            }
        }
    }
    Ok((tx, triggers))
}

/// Insert `records` (a change recorded before is left as it is) and advance every trigger's
/// position to `through`, in the recording transaction.
///
/// # Errors
/// Postgres errors.
///
/// # Cancel safety
/// As [`begin_recording`].
pub async fn record(tx: &RequestTx, records: &[Record], through: Lsn) -> Result<(), PgError> {
    let client = tx.client()?;
    if !records.is_empty() {
        let col = |f: &dyn Fn(&Record) -> String| records.iter().map(f).collect::<Vec<String>>();
        let opt = |f: &dyn Fn(&Record) -> Option<String>| records.iter().map(f).collect::<Vec<_>>();
        let triggers = col(&|r| r.trigger.clone());
        let ids = col(&|r| r.change_id.clone());
        let positions = col(&|r| r.position.to_string());
        let times: Vec<i64> = records.iter().map(|r| r.commit_time.micros()).collect();
        let paths = col(&|r| r.path.clone());
        let events = col(&|r| r.event.as_str().to_owned());
        let befores = opt(&|r| r.before.clone());
        let afters = opt(&|r| r.after.clone());
        let params = col(&|r| r.params.clone());
        let depths: Vec<i32> = records.iter().map(|r| r.depth).collect();
        let parked = opt(&|r| r.parked.clone());
        let stmt = client.prepare_cached(INSERT_SQL).await?;
        client
            .execute(
                &stmt,
                &[
                    &triggers, &ids, &positions, &times, &paths, &events, &befores, &afters,
                    &params, &depths, &parked,
                ],
            )
            .await?;
    }
    let stmt = client.prepare_cached(ADVANCE_SQL).await?;
    client.execute(&stmt, &[&through.to_string()]).await?;
    Ok(())
}

/// A claimed delivery, with its trigger.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub trigger: String,
    pub change_id: String,
    pub commit_time: Timestamp,
    pub path: String,
    pub event: String,
    pub before: Option<String>,
    pub after: Option<String>,
    pub params: String,
    /// Attempts including this one.
    pub attempts: i32,
    pub depth: i32,
    pub url: String,
    pub exactly_once: bool,
    /// `options.role`: the role an exactly-once endpoint's writes run as.
    pub role: Option<String>,
    pub secret: String,
    pub database_id: String,
    /// Milliseconds from the change's commit to this claim.
    pub waited_ms: f64,
}

/// Claim up to `limit` due heads of the documents' queues for `lease_seconds`.
///
/// # Errors
/// Postgres errors.
///
/// # Cancel safety
/// Dropped midway, the claim may have happened: those changes wait for the lease to run out.
pub async fn claim(db: &Db, limit: i64, lease_seconds: f64) -> Result<Vec<Claimed>, PgError> {
    let tx = begin_delivery(db).await?;
    let client = tx.client()?;
    let stmt = client.prepare_cached(CLAIM_SQL).await?;
    let rows = client.query(&stmt, &[&limit, &lease_seconds]).await?;
    tx.commit().await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let micros: i64 = row.try_get(2)?;
        let mode: String = row.try_get(11)?;
        let options: String = row.try_get(12)?;
        let role = serde_json::from_str::<serde_json::Value>(&options)
            .ok()
            .and_then(|o| o.get("role")?.as_str().map(str::to_owned));
        out.push(Claimed {
            trigger: row.try_get(0)?,
            change_id: row.try_get(1)?,
            commit_time: Timestamp::from_micros(micros)
                .ok_or_else(|| PgError::Decode(format!("commit time {micros} out of range")))?,
            path: row.try_get(3)?,
            event: row.try_get(4)?,
            before: row.try_get(5)?,
            after: row.try_get(6)?,
            params: row.try_get(7)?,
            attempts: row.try_get(8)?,
            depth: row.try_get(9)?,
            url: row.try_get(10)?,
            exactly_once: mode == "exactly_once",
            role,
            secret: row.try_get(13)?,
            database_id: row.try_get(14)?,
            waited_ms: row.try_get(15)?,
        });
    }
    Ok(out)
}

/// Mark at-least-once deliveries done (`(trigger, change_id)` pairs), in one transaction
/// committed asynchronously (`DONE_MANY_SQL`).
///
/// # Errors
/// Postgres errors.
///
/// # Cancel safety
/// Dropped midway, the deliveries may stay claimed: they are delivered again after the lease.
pub async fn done(db: &Db, marks: &[(String, String)]) -> Result<(), PgError> {
    let (triggers, ids): (Vec<&str>, Vec<&str>) =
        marks.iter().map(|(t, c)| (t.as_str(), c.as_str())).unzip();
    let tx = begin_delivery(db).await?;
    let client = tx.client()?;
    let stmt = client.prepare_cached(DONE_MANY_SQL).await?;
    client.execute(&stmt, &[&triggers, &ids]).await?;
    tx.commit().await
}

/// Begin a transaction of the deliverer's with `DELIVERY_SETTINGS` (one round trip).
///
/// # Errors
/// Postgres errors.
///
/// # Cancel safety
/// As [`Db::begin_with`]: dropped midway, the transaction is rolled back.
async fn begin_delivery(db: &Db) -> Result<RequestTx, PgError> {
    let (tx, ()) = db
        .begin_with(DEFAULT_DATABASE, &RunAs::Admin, async |tx: &RequestTx| {
            tx.client()?.batch_execute(DELIVERY_SETTINGS).await?;
            Ok::<(), PgError>(())
        })
        .await?;
    Ok(tx)
}

/// Record a failed attempt: due again in `retry_seconds`, or parked.
///
/// # Errors
/// Postgres errors.
///
/// # Cancel safety
/// As [`done`].
pub async fn failed(
    db: &Db,
    trigger: &str,
    change_id: &str,
    error: &str,
    park: bool,
    retry_seconds: f64,
) -> Result<(), PgError> {
    let conn = db.single().await?;
    let stmt = conn.prepare(FAILED_SQL).await?;
    conn.client()
        .execute(
            &stmt,
            &[&trigger, &change_id, &error, &park, &retry_seconds],
        )
        .await?;
    Ok(())
}

/// Delete deliveries done over an hour ago; returns how many.
///
/// # Errors
/// Postgres errors.
///
/// # Cancel safety
/// Cancel-safe.
pub async fn purge(db: &Db) -> Result<u64, PgError> {
    let conn = db.single().await?;
    let stmt = conn.prepare(PURGE_SQL).await?;
    Ok(conn.client().execute(&stmt, &[]).await?)
}

/// Each trigger's pending and parked changes (the metrics).
///
/// # Errors
/// Postgres errors.
///
/// # Cancel safety
/// Cancel-safe.
pub async fn counts(db: &Db) -> Result<Vec<(String, i64, i64)>, PgError> {
    let conn = db.single().await?;
    let stmt = conn.prepare(COUNTS_SQL).await?;
    let rows = conn.client().query(&stmt, &[]).await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
        .collect()
}

/// An exactly-once endpoint's answer, committed in one transaction: the change's
/// acknowledgement, then (only if the acknowledgement is new) `writes` as `docstore.commit`
/// takes them, run as `role` (the sidecar's own role without one) and carrying the chain
/// depth `depth + 1`, and the delivery marked done. Returns whether the writes were applied
/// (false: an earlier delivery's were).
///
/// # Errors
/// Postgres errors, the extension's errors of the writes (nothing is committed then).
///
/// # Cancel safety
/// Dropped before the commit answered, the outcome is unknown: a later delivery finds the
/// acknowledgement or applies the writes.
pub async fn commit_effects(
    db: &Db,
    claimed: &Claimed,
    writes: Option<&str>,
) -> Result<bool, PgError> {
    let tx = db.begin(&claimed.database_id, &RunAs::Admin).await?;
    let client = tx.client()?;
    let ack = client.prepare_cached(ACK_SQL).await?;
    let acked = client
        .execute(&ack, &[&claimed.trigger, &claimed.change_id])
        .await?
        == 1;
    let done = client.prepare_cached(DONE_SQL).await?;
    client
        .execute(&done, &[&claimed.trigger, &claimed.change_id])
        .await?;
    if let (true, Some(writes)) = (acked, writes) {
        let depth = (claimed.depth.saturating_add(1)).to_string();
        client.execute(DEPTH_SQL, &[&DEPTH_PREFIX, &depth]).await?;
        if let Some(role) = &claimed.role {
            client.execute(ROLE_SQL, &[role]).await?;
        }
        let commit = client
            .prepare_cached("select docstore.commit($1::jsonb)")
            .await?;
        client.execute(&commit, &[&JsonText(writes)]).await?;
    }
    tx.commit().await?;
    Ok(acked)
}
