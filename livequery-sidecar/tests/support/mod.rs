//! What the sidecar's integration tests against a live cluster share.

use std::time::Duration;

/// Drop the test's replication slot once nothing holds it: the hub's replication connection
/// ends a moment after its runtime is dropped, so wait for the slot to become inactive (up to
/// 10 s). A slot that is already gone is fine.
///
/// # Panics
/// When the slot is still active after 10 s, or the cluster does not answer.
pub async fn drop_slot_when_idle(dsn: &str, slot: &str) {
    let (client, connection) = tokio_postgres::connect(dsn, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    for _ in 0..100 {
        let dropped = client
            .query(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots \
                 where slot_name = $1 and not active",
                &[&slot],
            )
            .await
            .unwrap();
        let left = client
            .query(
                "select 1 from pg_replication_slots where slot_name = $1",
                &[&slot],
            )
            .await
            .unwrap();
        if !dropped.is_empty() || left.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("slot {slot} is still active");
}
