//! The replication source against a real cluster: writes through `docstore.set/update/delete`
//! and direct SQL, and the decoded transactions they become (xid, order, contents equal to
//! what `docstore.get` returns, a multi-document commit as one transaction, a delete by key,
//! a TOASTed document and an update that leaves it unchanged, confirmation and replay).
//!
//! Needs `DOCSTORE_TEST_DSN`, a libpq-style connection string of a database where
//! `create extension pg_docstore` has run, as a user with REPLICATION, e.g.
//! `DOCSTORE_TEST_DSN='host=127.0.0.1 port=5433 user=postgres dbname=docstore_live_dev'`.
//! Without it the test says so and passes vacuously, unless `DOCSTORE_REQUIRE_CLUSTER=1`
//! (scripts/test.sh sets it), which makes a missing DSN a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use docstore_core::typed_json;
use docstore_core::value::Map;
use docstore_sidecar::pg::tls::Postgres;
use docstore_sidecar::source::entities::parse_timestamptz;
use docstore_sidecar::source::{
    heartbeat, replace_slot, Backoff, Change, ChangeSource, DocumentData, Lsn, ReplicationSettings,
    ReplicationSource, SourceEvent, SourceHealth, SupervisedSource, Transaction,
};
use tokio_postgres::{Client, NoTls};

/// How long one event may take before the test reports a hang (not a performance bound).
const HANG: Duration = Duration::from_secs(60);

async fn sql(dsn: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(dsn, NoTls).await.unwrap();
    tokio::spawn(connection);
    client.batch_execute("set timezone = 'UTC'").await.unwrap();
    client
}

/// The extension creates the publication; a test database may predate that.
async fn ensure_publication(client: &Client) {
    let exists = client
        .query_opt(
            "select 1 from pg_publication where pubname = 'docstore_changes'",
            &[],
        )
        .await
        .unwrap();
    if exists.is_none() {
        let created = client
            .batch_execute("create publication docstore_changes for table docstore.entities")
            .await;
        if let Err(e) = created {
            // Created concurrently by another test: fine.
            assert_eq!(
                e.code(),
                Some(&tokio_postgres::error::SqlState::DUPLICATE_OBJECT),
                "{e}"
            );
        }
    }
}

/// The next transaction that touches a document under `prefix` (other writers of the same
/// database are skipped).
async fn next_transaction(source: &mut ReplicationSource, prefix: &str) -> Transaction {
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let event = tokio::time::timeout_at(deadline, source.next_event())
            .await
            .expect("no event from the replication source")
            .unwrap();
        match event {
            SourceEvent::Transaction(t) if t.changes.iter().any(|c| touches(c, prefix)) => {
                return t
            }
            SourceEvent::Transaction(_) => {}
            SourceEvent::KeepAlive { .. } | SourceEvent::Message(_) => {}
            SourceEvent::SlotCreated { .. } => panic!("slot created twice"),
        }
    }
}

fn touches(change: &Change, prefix: &str) -> bool {
    match change {
        Change::Insert(d) | Change::Update(d) => d.path.to_string().starts_with(prefix),
        Change::Delete(k) => k.path.to_string().starts_with(prefix),
        Change::Truncate => true,
    }
}

/// The low 32 bits of the current transaction's xid8, as pgoutput sends it.
fn xid32(xid8: &str) -> u32 {
    (xid8.parse::<u64>().unwrap() & 0xFFFF_FFFF) as u32
}

async fn get(client: &Client, path: &str) -> Map {
    let row = client
        .query_one("select docstore.get($1)::text", &[&path])
        .await
        .unwrap();
    let text: String = row.get(0);
    typed_json::map_from_json(&typed_json::json_from_str(&text).unwrap()).unwrap()
}

fn written(change: &Change) -> (&'static str, String, &DocumentData) {
    match change {
        Change::Insert(d) => ("insert", d.path.to_string(), &d.data),
        Change::Update(d) => ("update", d.path.to_string(), &d.data),
        other => panic!("not a write: {other:?}"),
    }
}

async fn confirmed_flush(client: &Client, slot: &str) -> Lsn {
    let row = client
        .query_one(
            "select confirmed_flush_lsn::text from pg_replication_slots where slot_name = $1",
            &[&slot],
        )
        .await
        .unwrap();
    Lsn::parse(&row.get::<_, String>(0)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_source_decodes_committed_transactions() {
    let Some(dsn) =
        docstore_core::test_env::cluster_dsn("replication_source_decodes_committed_transactions")
    else {
        return;
    };
    let db = sql(&dsn).await;
    ensure_publication(&db).await;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let slot = format!(
        "docstore_test_{}_{}",
        std::process::id(),
        nanos % 1_000_000_000
    );
    let prefix = format!("live{nanos}");
    let settings = ReplicationSettings::new(Postgres::plain(dsn.parse().unwrap()), slot.clone());

    let mut source = ReplicationSource::connect(&settings).await.unwrap();
    let Ok(SourceEvent::SlotCreated { consistent_point }) = source.next_event().await else {
        panic!("the first event is not the slot's creation");
    };

    // 1: one document, autocommit.
    let a = format!("{prefix}/a");
    let row = db
        .query_one(
            "select docstore.set($1, $2::text::jsonb)::text, pg_current_xact_id()::text",
            &[
                &a,
                &r#"{"n": 1, "s": "x", "t": {"$timestamp": "2022-09-01T13:23:22.123456Z"}, "d": 2.5, "l": [1, {"m": null}]}"#,
            ],
        )
        .await
        .unwrap();
    let (set_time, xid1): (String, String) = (row.get(0), row.get(1));
    let t1 = next_transaction(&mut source, &prefix).await;
    assert_eq!(t1.xid, xid32(&xid1));
    assert!(t1.commit_lsn >= consistent_point);
    let [Change::Insert(doc)] = t1.changes.as_slice() else {
        panic!("{:?}", t1.changes)
    };
    assert_eq!(doc.path.to_string(), a);
    assert_eq!(doc.database_id, "(default)");
    assert_eq!(doc.data, DocumentData::Fields(get(&db, &a).await));
    assert_eq!(Some(doc.update_time), parse_timestamptz(&set_time));
    assert_eq!(doc.create_time, doc.update_time);

    // 2: two documents and a heartbeat committed together arrive as one transaction, in
    // statement order.
    let b = format!("{prefix}/b");
    let c = format!("{prefix}/b/sub/c");
    db.batch_execute("begin").await.unwrap();
    db.execute("select docstore.set($1, '{\"k\": \"b\"}')", &[&b])
        .await
        .unwrap();
    db.execute("select docstore.set($1, '{\"k\": \"c\"}')", &[&c])
        .await
        .unwrap();
    db.execute(
        "select pg_logical_emit_message(true, 'docstore-heartbeat', 'beat')",
        &[],
    )
    .await
    .unwrap();
    let xid2: String = db
        .query_one("select pg_current_xact_id()::text", &[])
        .await
        .unwrap()
        .get(0);
    db.batch_execute("commit").await.unwrap();
    let t2 = next_transaction(&mut source, &prefix).await;
    assert_eq!(t2.xid, xid32(&xid2));
    assert!(t2.commit_lsn > t1.commit_lsn);
    let paths: Vec<_> = t2.changes.iter().map(|ch| written(ch).1).collect();
    assert_eq!(paths, [b.clone(), c.clone()]);
    for change in &t2.changes {
        let (_, path, data) = written(change);
        assert_eq!(data, &DocumentData::Fields(get(&db, &path).await));
    }
    assert_eq!(t2.messages.len(), 1);
    assert_eq!(t2.messages[0].prefix, "docstore-heartbeat");
    assert_eq!(t2.messages[0].content, b"beat");

    // 3: an update and 4: a delete, whose path comes from the key.
    db.execute("select docstore.update($1, '{\"n\": 2}')", &[&a])
        .await
        .unwrap();
    let t3 = next_transaction(&mut source, &prefix).await;
    let ("update", path, data) = written(&t3.changes[0]) else {
        panic!("{:?}", t3.changes)
    };
    assert_eq!(path, a);
    assert_eq!(data, &DocumentData::Fields(get(&db, &a).await));
    let Change::Update(updated) = &t3.changes[0] else {
        panic!("{:?}", t3.changes)
    };
    // The previous version (REPLICA IDENTITY FULL): a's data of t1.
    let t1_data = match &t1.changes[0] {
        Change::Insert(d) => d.data.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        updated
            .before
            .as_ref()
            .map(|p| DocumentData::Fields(p.fields.clone())),
        Some(t1_data)
    );
    let b_data = get(&db, &b).await;
    db.execute("select docstore.delete($1)", &[&b])
        .await
        .unwrap();
    let t4 = next_transaction(&mut source, &prefix).await;
    let [Change::Delete(key)] = t4.changes.as_slice() else {
        panic!("{:?}", t4.changes)
    };
    assert_eq!(key.path.to_string(), b);
    assert_eq!(key.before.as_ref().map(|p| &p.fields), Some(&b_data));

    // 5: a document large enough for its data to be TOASTed out of line; 6: a direct SQL
    // update that leaves data alone, which pgoutput sends as unchanged TOAST (and the old row
    // whole: REPLICA IDENTITY FULL).
    let big = format!("{prefix}/big");
    db.execute(
        "select docstore.set($1, jsonb_build_object('blob', \
         (select string_agg(md5(i::text), '') from generate_series(1, 3000) i), 'n', 1))",
        &[&big],
    )
    .await
    .unwrap();
    let t5 = next_transaction(&mut source, &prefix).await;
    let ("insert", path, data) = written(&t5.changes[0]) else {
        panic!("{:?}", t5.changes)
    };
    assert_eq!(path, big);
    assert_eq!(data, &DocumentData::Fields(get(&db, &big).await));
    db.execute(
        "update docstore.entities set update_time = update_time + interval '1 second' \
         where database_id = '(default)' and path = $1",
        &[&big],
    )
    .await
    .unwrap();
    let t6 = next_transaction(&mut source, &prefix).await;
    let [Change::Update(doc)] = t6.changes.as_slice() else {
        panic!("{:?}", t6.changes)
    };
    assert_eq!(doc.path.to_string(), big);
    // pgoutput sends the new data as unchanged TOAST, but with REPLICA IDENTITY FULL the old
    // row comes whole (flattened): the decoder takes its data, and it is the `before` too.
    let stored = get(&db, &big).await;
    assert_eq!(doc.data, DocumentData::Fields(stored.clone()));
    assert_eq!(doc.before.as_ref().map(|p| &p.fields), Some(&stored));
    assert_eq!(
        doc.update_time.micros() - doc.create_time.micros(),
        1_000_000
    );

    // Nothing was confirmed: the slot is still where it was created. Confirm through t2,
    // and the slot moves exactly there (the client reports it within its status interval).
    assert!(confirmed_flush(&db, &slot).await < t1.end_lsn);
    source.confirm(t2.end_lsn);
    let mut confirmed = confirmed_flush(&db, &slot).await;
    let deadline = tokio::time::Instant::now() + HANG;
    while confirmed < t2.end_lsn && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        confirmed = confirmed_flush(&db, &slot).await;
    }
    assert_eq!(confirmed, t2.end_lsn);

    // A new connection on the slot starts after the confirmed position: t3 comes again.
    source.stop().await.unwrap();
    let mut again = ReplicationSource::connect(&settings).await.unwrap();
    let replayed = next_transaction(&mut again, &prefix).await;
    assert_eq!(replayed, t3);
    again.stop().await.unwrap();

    drop_slot(&db, &slot).await;
    for path in [&a, &c, &big] {
        db.execute("select docstore.delete($1)", &[path])
            .await
            .unwrap();
    }
}

async fn drop_slot(db: &Client, slot: &str) {
    // The walsender may still hold the slot a moment after the stream ended (55006).
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        match db
            .execute("select pg_drop_replication_slot($1)", &[&slot])
            .await
        {
            Ok(_) => return,
            Err(e)
                if e.code() == Some(&tokio_postgres::error::SqlState::OBJECT_IN_USE)
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("dropping the slot: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_arrive_and_a_lost_slot_is_replaced() {
    let Some(dsn) =
        docstore_core::test_env::cluster_dsn("heartbeats_arrive_and_a_lost_slot_is_replaced")
    else {
        return;
    };
    let db = sql(&dsn).await;
    ensure_publication(&db).await;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let slot = format!(
        "docstore_test_hb_{}_{}",
        std::process::id(),
        nanos % 1_000_000_000
    );
    let settings = ReplicationSettings::new(Postgres::plain(dsn.parse().unwrap()), slot.clone());
    let mut source = ReplicationSource::connect(&settings).await.unwrap();
    let Ok(SourceEvent::SlotCreated { consistent_point }) = source.next_event().await else {
        panic!("the first event is not the slot's creation");
    };

    // A heartbeat is a committed transaction with no changes and one message of ours.
    let lsn = heartbeat::emit(&db, &slot).await.unwrap();
    let deadline = tokio::time::Instant::now() + HANG;
    let txn = loop {
        let event = tokio::time::timeout_at(deadline, source.next_event())
            .await
            .expect("no heartbeat")
            .unwrap();
        if let SourceEvent::Transaction(t) = event {
            if t.messages.iter().any(|m| m.content == slot.as_bytes()) {
                break t;
            }
        }
    };
    assert!(heartbeat::is_heartbeat(&txn));
    assert_eq!(txn.messages[0].lsn, lsn);
    // The function returns the end of the message record, where the commit record starts.
    assert!(txn.commit_lsn >= lsn);

    // Idle: the heartbeat task emits on its own once its interval passes without activity.
    let (activity, idle) = tokio::sync::watch::channel(Lsn(0));
    let emitter = {
        let dsn = dsn.clone();
        let content = format!("{slot}-auto");
        tokio::spawn(async move {
            let client = sql(&dsn).await;
            heartbeat::run(&client, &content, Duration::from_millis(200), idle).await
        })
    };
    let auto = format!("{slot}-auto");
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let event = tokio::time::timeout_at(deadline, source.next_event())
            .await
            .expect("no automatic heartbeat")
            .unwrap();
        if let SourceEvent::Transaction(t) = event {
            activity.send_replace(t.end_lsn);
            if t.messages.iter().any(|m| m.content == auto.as_bytes()) {
                assert!(heartbeat::is_heartbeat(&t));
                break;
            }
        }
    }
    drop(activity);
    emitter.await.unwrap().unwrap();
    source.stop().await.unwrap();

    // Replacing the slot starts it again at a later consistent point; a connection then
    // streams from there (nothing of the old slot comes back).
    let deadline = tokio::time::Instant::now() + HANG;
    let replaced = loop {
        match replace_slot(&settings.postgres, &slot).await {
            Ok(lsn) => break lsn,
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("slot still held: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(replaced > consistent_point);
    assert!(replaced > txn.end_lsn);
    let mut again = ReplicationSource::connect(&settings).await.unwrap();
    let lsn2 = heartbeat::emit(&db, &slot).await.unwrap();
    let deadline = tokio::time::Instant::now() + HANG;
    let first = loop {
        let event = tokio::time::timeout_at(deadline, again.next_event())
            .await
            .expect("no heartbeat")
            .unwrap();
        match event {
            SourceEvent::Transaction(t) => break t,
            SourceEvent::SlotCreated { .. } => panic!("the replaced slot was created again"),
            _ => {}
        }
    };
    assert!(first.commit_lsn >= replaced);
    assert!(first.commit_lsn < lsn2 || first.messages.iter().any(|m| m.lsn == lsn2));
    again.stop().await.unwrap();
    drop_slot(&db, &slot).await;
}

/// Terminate the walsender streaming from `slot` (as a Postgres restart would end it).
async fn terminate_walsender(db: &Client, slot: &str) {
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let row = db
            .query_one(
                "select pg_terminate_backend(active_pid) from pg_replication_slots \
                 where slot_name = $1 and active",
                &[&slot],
            )
            .await;
        if row.is_ok() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slot never became active"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn next_with_message(source: &mut SupervisedSource, content: &str) -> Vec<SourceEvent> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + HANG;
    loop {
        let event = tokio::time::timeout_at(deadline, source.next_event())
            .await
            .expect("the supervised source hangs")
            .unwrap();
        let done = matches!(&event, SourceEvent::Transaction(t)
            if t.messages.iter().any(|m| m.content == content.as_bytes()));
        seen.push(event);
        if done {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervised_source_survives_a_lost_connection_and_a_dropped_slot() {
    let Some(dsn) = docstore_core::test_env::cluster_dsn(
        "supervised_source_survives_a_lost_connection_and_a_dropped_slot",
    ) else {
        return;
    };
    let db = sql(&dsn).await;
    ensure_publication(&db).await;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let slot = format!(
        "docstore_test_sv_{}_{}",
        std::process::id(),
        nanos % 1_000_000_000
    );
    let settings = ReplicationSettings::new(Postgres::plain(dsn.parse().unwrap()), slot.clone());
    let mut source = SupervisedSource::new(
        settings,
        Backoff::new(Duration::from_millis(50), Duration::from_secs(1)),
        SourceHealth::new(),
    );

    // The first connection creates the slot and reports it.
    let first = tokio::time::timeout(HANG, source.next_event())
        .await
        .expect("the supervised source hangs")
        .unwrap();
    assert!(
        matches!(first, SourceEvent::SlotCreated { .. }),
        "{first:?}"
    );
    heartbeat::emit(&db, "before").await.unwrap();
    next_with_message(&mut source, "before").await;

    // 1: the connection is lost; the stream continues with what comes next, no reset.
    terminate_walsender(&db, &slot).await;
    heartbeat::emit(&db, "after-terminate").await.unwrap();
    let events = next_with_message(&mut source, "after-terminate").await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, SourceEvent::SlotCreated { .. })),
        "{events:?}"
    );

    // 2: the slot is dropped under us: it is created again and reported (streams reset).
    // (Nothing polls the source meanwhile, so it cannot reconnect before the drop.)
    terminate_walsender(&db, &slot).await;
    drop_slot(&db, &slot).await;
    let mut created = None;
    let deadline = tokio::time::Instant::now() + HANG;
    while created.is_none() {
        let event = tokio::time::timeout_at(deadline, source.next_event())
            .await
            .expect("the supervised source hangs")
            .unwrap();
        if let SourceEvent::SlotCreated { consistent_point } = event {
            created = Some(consistent_point);
        }
    }
    heartbeat::emit(&db, "after-drop").await.unwrap();
    let events = next_with_message(&mut source, "after-drop").await;
    let SourceEvent::Transaction(t) = events.last().unwrap() else {
        unreachable!()
    };
    assert!(Some(t.commit_lsn) >= created);
    source.stop().await.unwrap();
    drop_slot(&db, &slot).await;
}
