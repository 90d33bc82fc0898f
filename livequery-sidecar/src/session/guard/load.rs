//! The Postgres reads of the guard, outside the hub: the rulesets of `docstore.rules`
//! (polled once a second by `updated_at`; the slot does not carry that table) and the
//! documents rules look up with `get()`/`exists()`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use docstore_core::value::{Map, Value};
use docstore_core::ResourcePath;
use tokio::sync::{mpsc, watch};

use super::{Loaded, Rules};
use crate::pg::databases::DEFAULT_DATABASE;
use crate::pg::{documents, Db, PgError, RunAs};
use crate::session::hub::Internal;

/// How often `docstore.rules` is polled: a new ruleset takes effect for running streams
/// within about this long.
pub const POLL: Duration = Duration::from_secs(1);

const STAMPS_SQL: &str = "select database_id, updated_at::text from docstore.rules";
const SOURCE_SQL: &str =
    "select updated_at::text, source from docstore.rules where database_id = $1";

/// Read the stamps of `docstore.rules` and compile the rulesets that changed since `known`.
///
/// # Errors
/// Postgres errors (the previous rulesets stay in force).
///
/// # Cancel safety
/// Dropped midway, the read's transaction is cancelled.
pub async fn read_rules(
    db: &Db,
    known: &HashMap<String, Loaded>,
) -> Result<HashMap<String, Loaded>, PgError> {
    let tx = db.begin(DEFAULT_DATABASE, &RunAs::Admin).await?;
    let client = tx.client()?;
    let rows = client.query(STAMPS_SQL, &[]).await?;
    let mut out = HashMap::with_capacity(rows.len());
    for row in rows {
        let database: String = row.try_get(0)?;
        let stamp: String = row.try_get(1)?;
        if let Some(old) = known.get(&database).filter(|l| l.stamp == stamp) {
            out.insert(database, old.clone());
            continue;
        }
        let Some(row) = client.query_opt(SOURCE_SQL, &[&database]).await? else {
            continue;
        };
        let stamp: String = row.try_get(0)?;
        let source: String = row.try_get(1)?;
        let rules = match docstore_rules::compile(&source) {
            Ok(ruleset) => Rules::Compiled(Arc::new(ruleset)),
            Err(e) => {
                tracing::error!(%database, error = %e, "the stored ruleset does not compile in the sidecar: its live queries are denied");
                Rules::Broken(format!("the ruleset of {database} does not compile: {e}"))
            }
        };
        out.insert(database, Loaded { stamp, rules });
    }
    tx.commit().await?;
    Ok(out)
}

/// Poll `docstore.rules` every [`POLL`], and at once when the hub asks (`wanted`, bumped for
/// each new stream), and hand the hub the rulesets with the number of the last request the
/// read answers, whenever one changed or a request was answered. Runs until the hub is gone.
///
/// # Cancel safety
/// Runs for the life of the process.
pub async fn poll(db: Db, hub: mpsc::Sender<Internal>, mut wanted: watch::Receiver<u64>) {
    let mut known: Option<HashMap<String, Loaded>> = None;
    let mut answered = 0;
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            changed = wanted.changed() => if changed.is_err() {
                return;
            },
        }
        let request = *wanted.borrow_and_update();
        let previous = known.clone().unwrap_or_default();
        match read_rules(&db, &previous).await {
            Ok(now) => {
                let same = known.as_ref().is_some_and(|k| {
                    k.len() == now.len()
                        && now
                            .iter()
                            .all(|(db, l)| k.get(db).is_some_and(|o| o.stamp == l.stamp))
                });
                if same && request == answered {
                    continue;
                }
                known = Some(now.clone());
                answered = request;
                if hub.send(Internal::Rules(now, request)).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading docstore.rules failed; the rules in force stay");
            }
        }
    }
}

/// Read the documents `paths` of `database` as the admin, in one `REPEATABLE READ` snapshot
/// (`None`: the document does not exist).
///
/// # Errors
/// Postgres errors; a stored document that is not typed JSON.
///
/// # Cancel safety
/// Dropped midway, the read's transaction is cancelled.
pub async fn lookup(
    db: &Db,
    database: &str,
    paths: &[ResourcePath],
) -> Result<Vec<(ResourcePath, Option<Map>)>, PgError> {
    let tx = db.begin_snapshot(database, &RunAs::Admin).await?;
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        let doc = match documents::read(&tx, database, path).await? {
            None => None,
            Some(doc) => match docstore_core::typed_json::parse(&doc.data.0) {
                Ok(Value::Map(fields)) => Some(fields),
                Ok(_) => return Err(PgError::Decode(format!("data of {path} is not a map"))),
                Err(e) => return Err(PgError::Decode(format!("data of {path}: {e}"))),
            },
        };
        out.push((path.clone(), doc));
    }
    tx.commit().await?;
    Ok(out)
}
