//! Unit tests of retention and eviction order.

use docstore_core::value::Timestamp;

use super::*;
use crate::source::EmittedMessage;

fn txn(xid: u32, lsn: u64) -> Transaction {
    Transaction {
        xid,
        commit_lsn: Lsn(lsn),
        end_lsn: Lsn(lsn + 8),
        commit_time: Timestamp::from_micros(0).unwrap(),
        changes: Vec::new(),
        messages: vec![EmittedMessage {
            lsn: Lsn(lsn - 1),
            prefix: "docstore-heartbeat".into(),
            content: vec![0; 100],
        }],
    }
}

fn unbounded() -> Limits {
    Limits {
        max_bytes: usize::MAX,
        max_age: Duration::from_secs(3600),
        keep: Duration::ZERO,
    }
}

fn xids(txns: &[Arc<Transaction>]) -> Vec<u32> {
    txns.iter().map(|t| t.xid).collect()
}

fn retained(log: &Changelog) -> Vec<u32> {
    log.entries.iter().map(|e| e.txn.xid).collect()
}

#[test]
fn pinned_until_below_the_xmin_of_a_later_snapshot() {
    let now = Instant::now();
    let mut log = Changelog::new(unbounded());
    // A ticket issued before 100 and 101 are decoded: its snapshot cannot unpin them, even
    // with an xmin above both.
    let early = log.ticket();
    log.push(txn(100, 10), now);
    log.push(txn(101, 20), now);
    log.observe_snapshot(early, &Snapshot::new(200, 200, vec![]), now);
    assert_eq!(retained(&log), [100, 101]);
    assert_eq!(log.confirmable(), None);

    // After they were decoded: an xmin of 101 unpins 100 only.
    let t = log.ticket();
    log.observe_snapshot(t, &Snapshot::new(101, 105, vec![101]), now);
    assert_eq!(retained(&log), [101]);
    assert_eq!(log.oldest_retained(), Some(Lsn(20)));
    assert_eq!(log.confirmable(), Some(Lsn(18)));
    let t = log.ticket();
    log.observe_snapshot(t, &Snapshot::new(102, 105, vec![]), now);
    assert!(log.is_empty());
    assert_eq!(log.bytes(), 0);
    assert_eq!(log.confirmable(), Some(Lsn(28)));
}

#[test]
fn eviction_is_from_the_front_in_commit_order() {
    let now = Instant::now();
    let mut log = Changelog::new(unbounded());
    // 105 commits first but has the higher xid; 101 commits later.
    log.push(txn(105, 10), now);
    log.push(txn(101, 20), now);
    let t = log.ticket();
    // 101 is below xmin, 105 still running: 101 is unpinned but stays behind 105.
    log.observe_snapshot(t, &Snapshot::new(103, 110, vec![105]), now);
    assert_eq!(retained(&log), [105, 101]);
    let t = log.ticket();
    log.observe_snapshot(t, &Snapshot::new(110, 110, vec![]), now);
    assert!(log.is_empty());
}

#[test]
fn keep_holds_unpinned_transactions_for_positions() {
    let start = Instant::now();
    let mut log = Changelog::new(Limits {
        keep: Duration::from_secs(10),
        ..unbounded()
    });
    log.push(txn(100, 10), start);
    log.push(txn(101, 20), start + Duration::from_secs(5));
    let t = log.ticket();
    log.observe_snapshot(t, &Snapshot::new(102, 102, vec![]), start);
    assert_eq!(retained(&log), [100, 101]);
    assert_eq!(xids(&log.since(Lsn(10)).unwrap()), [101]);
    log.trim(start + Duration::from_secs(11));
    assert_eq!(retained(&log), [101]);
    assert!(log.since(Lsn(10)).is_ok());
    assert_eq!(
        log.since(Lsn(5)),
        Err(RetentionPassed {
            position: Lsn(5),
            oldest_retained: Some(Lsn(20))
        })
    );
}

#[test]
fn hand_off_returns_what_the_snapshot_does_not_see() {
    let now = Instant::now();
    let mut log = Changelog::new(unbounded());
    log.push(txn(100, 10), now);
    log.push(txn(102, 20), now);
    let t = log.ticket();
    // 102 was decoded but was still running in the snapshot (its commit record precedes
    // its leaving the proc array): it applies; 100 does not. 103 arrives later and applies.
    let snapshot = Snapshot::new(101, 103, vec![102]);
    assert_eq!(xids(&log.hand_off(t, &snapshot, now).unwrap()), [102]);
    log.push(txn(103, 30), now);
    assert!(snapshot.applies_to(103));
    assert!(!snapshot.applies_to(100));
    // 100 is evicted (below xmin, decoded before the ticket); 102 stays pinned.
    assert_eq!(retained(&log), [102, 103]);
}

#[test]
fn bounds_evict_pinned_transactions_and_say_retention_passed() {
    let now = Instant::now();
    let one = transaction_bytes(&txn(1, 10));
    let mut log = Changelog::new(Limits {
        max_bytes: one * 2,
        ..unbounded()
    });
    let ticket = log.ticket();
    for (i, xid) in [100u32, 101, 102].into_iter().enumerate() {
        log.push(txn(xid, 10 * (i as u64 + 1)), now);
    }
    assert_eq!(retained(&log), [101, 102]);
    assert!(log.bytes() <= one * 2);
    assert!(matches!(
        log.since(Lsn(0)),
        Err(RetentionPassed {
            position: Lsn(0),
            ..
        })
    ));
    assert_eq!(xids(&log.since(Lsn(10)).unwrap()), [101, 102]);
    // A snapshot that does not see the evicted 100 cannot be handed off.
    assert_eq!(
        log.hand_off(ticket, &Snapshot::new(99, 103, vec![100]), now),
        Err(RetentionPassed {
            position: Lsn(10),
            oldest_retained: Some(Lsn(20))
        })
    );
    // One that sees it can.
    let t = log.ticket();
    assert_eq!(
        xids(
            &log.hand_off(t, &Snapshot::new(101, 101, vec![]), now)
                .unwrap()
        ),
        [101, 102]
    );

    // The age bound.
    let mut log = Changelog::new(Limits {
        max_age: Duration::from_secs(5),
        ..unbounded()
    });
    log.push(txn(100, 10), now);
    log.push(txn(101, 20), now + Duration::from_secs(3));
    log.trim(now + Duration::from_secs(6));
    assert_eq!(retained(&log), [101]);
}

#[test]
fn a_ticket_older_than_an_eviction_checks_what_was_evicted() {
    let now = Instant::now();
    let mut log = Changelog::new(unbounded());
    log.push(txn(100, 10), now);
    // A target takes its ticket, then its snapshot, in which 100 is still running...
    let slow = log.ticket();
    let slow_snapshot = Snapshot::new(100, 101, vec![100]);
    // ...while another, later snapshot sees 100 and evicts it.
    let fast = log.ticket();
    log.observe_snapshot(fast, &Snapshot::new(101, 101, vec![]), now);
    assert!(log.is_empty());
    // The slow hand-off must not silently miss 100.
    assert!(log.hand_off(slow, &slow_snapshot, now).is_err());
    // With no ticket outstanding the evicted 100 is forgotten; new tickets see it anyway.
    assert!(log.evicted.is_empty());
    let t = log.ticket();
    assert_eq!(
        log.hand_off(t, &Snapshot::new(101, 101, vec![]), now),
        Ok(vec![])
    );
}

#[test]
fn replayed_transactions_are_skipped() {
    let now = Instant::now();
    let mut log = Changelog::new(unbounded());
    assert!(log.push(txn(100, 10), now).is_some());
    assert!(log.push(txn(101, 20), now).is_some());
    assert!(log.push(txn(100, 10), now).is_none());
    assert!(log.push(txn(101, 20), now).is_none());
    assert_eq!(retained(&log), [100, 101]);
    let t = log.ticket();
    log.forget(t);
    assert!(log.outstanding.is_empty());
}

#[test]
fn unchanged_toast_takes_the_previous_version() {
    use crate::source::{DocumentChange, DocumentKey};
    use docstore_core::path::ResourcePath;

    let now = Instant::now();
    let path = ResourcePath::parse("rooms/big").unwrap();
    let name = docstore_core::encoding::encode_name(&path);
    let doc = |data: DocumentData| DocumentChange {
        database_id: "(default)".into(),
        name: name.clone(),
        path: path.clone(),
        data,
        create_time: Timestamp::from_micros(0).unwrap(),
        update_time: Timestamp::from_micros(1).unwrap(),
        before: None,
    };
    let mut fields = Map::new();
    fields.insert("blob".into(), Value::String("x".repeat(10_000)));
    let with = |xid, lsn, change| Transaction {
        changes: vec![change],
        ..txn(xid, lsn)
    };
    let mut log = Changelog::new(unbounded());
    log.push(
        with(
            100,
            10,
            Change::Insert(doc(DocumentData::Fields(fields.clone()))),
        ),
        now,
    );
    let resolved = log
        .push(
            with(101, 20, Change::Update(doc(DocumentData::UnchangedToast))),
            now,
        )
        .unwrap();
    assert_eq!(
        resolved.changes[0],
        Change::Update(doc(DocumentData::Fields(fields.clone())))
    );
    // After a delete there is no previous version: it stays unchanged, never empty.
    log.push(
        with(
            102,
            30,
            Change::Delete(DocumentKey {
                database_id: "(default)".into(),
                name: name.clone(),
                path: path.clone(),
                before: None,
            }),
        ),
        now,
    );
    let unresolved = log
        .push(
            with(103, 40, Change::Update(doc(DocumentData::UnchangedToast))),
            now,
        )
        .unwrap();
    assert_eq!(
        unresolved.changes[0],
        Change::Update(doc(DocumentData::UnchangedToast))
    );
}

#[test]
fn since_refuses_positions_before_the_first_transaction_taken_in() {
    let now = Instant::now();
    let mut log = Changelog::new(unbounded());
    // Nothing taken in yet: nothing is known after any position.
    assert!(log.since(Lsn(5)).is_err());
    log.push(txn(100, 10), now);
    log.push(txn(101, 20), now);
    // Another process's stream at 5: what committed between 5 and 10 was never seen here.
    assert_eq!(
        log.since(Lsn(5)),
        Err(RetentionPassed {
            position: Lsn(5),
            oldest_retained: Some(Lsn(10))
        })
    );
    assert_eq!(xids(&log.since(Lsn(10)).unwrap()), [101]);
    assert!(log.since(Lsn(20)).unwrap().is_empty());
}

#[test]
fn retention_follows_the_listen_grace_and_never_falls_below_the_defaults() {
    let default = Limits::default();
    // The default grace (60 s) and shorter ones keep the defaults.
    assert_eq!(Limits::for_grace(Duration::from_secs(60)), default);
    assert_eq!(Limits::for_grace(Duration::from_secs(5)), default);
    // A grace of 600 s: what a resume within it may need is kept as long, pinned or not.
    let long = Limits::for_grace(Duration::from_secs(600));
    assert_eq!(long.keep, Duration::from_secs(600));
    assert_eq!(long.max_age, Duration::from_secs(600));
    assert_eq!(long.max_bytes, default.max_bytes);
    // Between the two defaults: kept for the grace, a pinned one still up to 300 s.
    let mid = Limits::for_grace(Duration::from_secs(120));
    assert_eq!(
        (mid.keep, mid.max_age),
        (Duration::from_secs(120), Duration::from_secs(300))
    );
}
