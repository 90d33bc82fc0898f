//! Writes at a fixed rate through Postgres: `docstore.set` of a new document per write, from
//! several connections, each write due at `start + i / rate` (a late writer catches up at
//! once). Each write lands in one city (a hash of its number) and has a rating above every
//! earlier one, also of earlier runs in the same collection (the clock in microseconds plus
//! 10^13, above scripts/bench_live.sh's pgbench documents too), so it enters the top of its
//! city's sorted, limited query: every write is expected as an `added` change on the target of
//! its city.

use std::time::{Duration, Instant};

use tokio_postgres::NoTls;

use crate::clock::now_micros;
use crate::LoadError;

/// What to write.
#[derive(Debug, Clone)]
pub struct WritePlan {
    pub pg_url: String,
    pub collection: String,
    /// Distinguishes this run's documents from earlier runs' in the same collection.
    pub run: String,
    pub rate: f64,
    pub duration: Duration,
    pub connections: usize,
    pub cities: usize,
    /// Bytes of filler text in each document.
    pub pad: usize,
}

/// One committed write.
#[derive(Debug, Clone)]
pub struct Written {
    /// The document's path, as `docstore.set` got it.
    pub path: String,
    /// When `select docstore.set(...)` returned, i.e. after its COMMIT (Unix microseconds).
    pub committed_us: i64,
    /// How late the write started against its schedule.
    pub behind: Duration,
    /// The city it was written to.
    pub city: u64,
}

/// The city of write `i`: a multiplicative hash, so consecutive writes spread over cities.
pub fn city_of(i: u64, cities: usize) -> u64 {
    let cities = u64::try_from(cities.max(1)).unwrap_or(1);
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16) % cities
}

/// Ratings start here (plus the clock in microseconds).
pub const RATING_BASE: i64 = 10_000_000_000_000;

/// The document of write `i`.
pub fn document(i: u64, cities: usize, pad: usize, rating: i64) -> String {
    serde_json::json!({
        "city": format!("c{}", city_of(i, cities)),
        "rating": rating,
        "name": format!("write {i}"),
        "note": "x".repeat(pad),
    })
    .to_string()
}

/// Run the plan; the writes of every connection, in no particular order, and the connections,
/// still open (their backends' CPU time is read from /proc after the writes: a backend that
/// has exited is no longer there).
///
/// # Errors
/// A connection or a write failed.
pub async fn run(
    plan: WritePlan,
) -> Result<(Vec<Written>, Vec<tokio_postgres::Client>), LoadError> {
    let total = (plan.rate * plan.duration.as_secs_f64()).round() as u64;
    let start = Instant::now() + Duration::from_millis(50);
    let mut tasks = Vec::new();
    let connections = u64::try_from(plan.connections.max(1)).unwrap_or(1);
    for w in 0..connections {
        let plan = plan.clone();
        let (client, connection) = tokio_postgres::connect(&plan.pg_url, NoTls).await?;
        tokio::spawn(connection);
        tasks.push(tokio::spawn(async move {
            let statement = client
                .prepare("select docstore.set($1, $2::text::jsonb)")
                .await?;
            let mut out = Vec::new();
            let mut i = w;
            while i < total {
                let due = start + Duration::from_secs_f64(i as f64 / plan.rate);
                tokio::time::sleep_until(due.into()).await;
                let behind = Instant::now().saturating_duration_since(due);
                let path = format!("{}/{}-{i}", plan.collection, plan.run);
                let doc = document(i, plan.cities, plan.pad, RATING_BASE + now_micros());
                client.execute(&statement, &[&path, &doc]).await?;
                out.push(Written {
                    path,
                    committed_us: now_micros(),
                    behind,
                    city: city_of(i, plan.cities),
                });
                i += connections;
            }
            Ok::<_, LoadError>((out, client))
        }));
    }
    let mut all = Vec::new();
    let mut clients = Vec::new();
    for t in tasks {
        let (writes, client) = t.await.map_err(|e| LoadError::Task(e.to_string()))??;
        all.extend(writes);
        clients.push(client);
    }
    Ok((all, clients))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_spread_over_every_city() {
        let mut seen = vec![0u32; 100];
        for i in 0..10_000 {
            seen[usize::try_from(city_of(i, 100)).unwrap()] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
        let doc: serde_json::Value = serde_json::from_str(&document(7, 100, 3, 5)).unwrap();
        assert_eq!(doc["note"], "xxx");
        assert_eq!(doc["rating"], 5);
        assert_eq!(doc["city"], format!("c{}", city_of(7, 100)));
    }
}
