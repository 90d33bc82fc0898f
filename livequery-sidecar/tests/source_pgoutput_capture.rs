//! The decoders over a stream captured from a real cluster (PostgreSQL 15, pgoutput protocol
//! 1, `pg_logical_slot_peek_binary_changes` of `docstore_changes` with messages on), the
//! fuzz seed `fuzz/corpus/pgoutput/seed-stream-all`. It was produced by:
//!
//! ```sql
//! select docstore.set('rooms/one', '{"name": "One", "n": 1, "t": {"$timestamp": ...}, ...}');
//! begin;
//! select docstore.set('rooms/two', '{"n": 2}');
//! select docstore.set('rooms/two/messages/m1', '{"text": "hi\u00e9"}');
//! select pg_logical_emit_message(true, 'docstore-heartbeat', '1');
//! commit;
//! select pg_logical_emit_message(false, 'docstore', 'plain');
//! select docstore.update('rooms/one', '{"n": 5}');
//! select docstore.delete('rooms/two');
//! select docstore.set('rooms/big', <a 64 KB string field and n = 1>);
//! update docstore.entities set update_time = now() where path = 'rooms/big';
//! ```
#![allow(clippy::unwrap_used, clippy::panic)]

use docstore_core::value::Value;
use docstore_sidecar::source::transaction::{Assembled, Assembler};
use docstore_sidecar::source::{Change, DocumentData, Transaction};

fn stream() -> Vec<Assembled> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/corpus/pgoutput/seed-stream-all"
    );
    let bytes = std::fs::read(path).unwrap();
    let mut rest = bytes.as_slice();
    let mut assembler = Assembler::new();
    let mut out = Vec::new();
    while let [high, low, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*high, *low]));
        let (message, next) = tail.split_at(len);
        if let Some(assembled) = assembler.push_bytes(message).unwrap() {
            out.push(assembled);
        }
        rest = next;
    }
    assert!(!assembler.in_transaction());
    out
}

fn transaction(a: &Assembled) -> &Transaction {
    match a {
        Assembled::Transaction(t) => t,
        Assembled::Message(m) => panic!("a message where a transaction was expected: {m:?}"),
    }
}

fn fields(change: &Change) -> (&str, String, &DocumentData) {
    match change {
        Change::Insert(d) => ("insert", d.path.to_string(), &d.data),
        Change::Update(d) => ("update", d.path.to_string(), &d.data),
        other => panic!("not a write: {other:?}"),
    }
}

#[test]
fn captured_stream_decodes_into_its_transactions() {
    let events = stream();
    assert_eq!(events.len(), 7);

    // 1: one insert with every typed value.
    let t1 = transaction(&events[0]);
    assert_eq!(t1.xid, 9658);
    assert!(t1.commit_lsn < t1.end_lsn);
    let [change] = t1.changes.as_slice() else {
        panic!("{:?}", t1.changes)
    };
    let ("insert", path, DocumentData::Fields(map)) = fields(change) else {
        panic!("{change:?}")
    };
    assert_eq!(path, "rooms/one");
    assert_eq!(map.get("n"), Some(&Value::Integer(1)));
    assert_eq!(map.get("d"), Some(&Value::Double(1.5)));
    assert_eq!(map.get("name"), Some(&Value::String("One".into())));
    assert!(matches!(map.get("t"), Some(Value::Timestamp(_))));
    assert!(matches!(map.get("b"), Some(Value::Bytes(_))));
    assert!(matches!(map.get("r"), Some(Value::Reference(_))));
    assert!(matches!(map.get("g"), Some(Value::GeoPoint(_))));
    assert!(matches!(map.get("m"), Some(Value::Map(m)) if m.contains_key("$ref")));
    let Change::Insert(doc) = change else {
        unreachable!()
    };
    assert_eq!(doc.create_time, doc.update_time);

    // 2: two documents and a heartbeat in one transaction, in order.
    let t2 = transaction(&events[1]);
    assert_eq!(t2.xid, 9659);
    let paths: Vec<_> = t2.changes.iter().map(|c| fields(c).1).collect();
    assert_eq!(paths, ["rooms/two", "rooms/two/messages/m1"]);
    assert_eq!(t2.messages.len(), 1);
    assert_eq!(t2.messages[0].prefix, "docstore-heartbeat");
    assert_eq!(t2.messages[0].content, b"1");
    assert!(t1.end_lsn <= t2.commit_lsn);

    // 3: the non-transactional message.
    let Assembled::Message(plain) = &events[2] else {
        panic!("{:?}", events[2])
    };
    assert_eq!(
        (plain.prefix.as_str(), plain.content.as_slice()),
        ("docstore", &b"plain"[..])
    );

    // 4: an update.
    let t4 = transaction(&events[3]);
    let ("update", path, DocumentData::Fields(map)) = fields(&t4.changes[0]) else {
        panic!("{:?}", t4.changes)
    };
    assert_eq!(path, "rooms/one");
    assert_eq!(map.get("n"), Some(&Value::Integer(5)));

    // 5: a delete by key: the path comes from the encoded name.
    let t5 = transaction(&events[4]);
    let [Change::Delete(key)] = t5.changes.as_slice() else {
        panic!("{:?}", t5.changes)
    };
    assert_eq!(key.path.to_string(), "rooms/two");
    assert_eq!(key.database_id, "(default)");

    // 6: a document whose data is TOASTed, then 7: an update of update_time only, which
    // carries the data as unchanged TOAST.
    let t6 = transaction(&events[5]);
    let ("insert", path, DocumentData::Fields(map)) = fields(&t6.changes[0]) else {
        panic!("{:?}", t6.changes)
    };
    assert_eq!(path, "rooms/big");
    assert!(matches!(map.get("blob"), Some(Value::String(s)) if s.len() == 64_000));
    let t7 = transaction(&events[6]);
    let ("update", path, data) = fields(&t7.changes[0]) else {
        panic!("{:?}", t7.changes)
    };
    assert_eq!(path, "rooms/big");
    assert_eq!(data, &DocumentData::UnchangedToast);

    let xids: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            Assembled::Transaction(t) => Some(t.xid),
            Assembled::Message(_) => None,
        })
        .collect();
    assert_eq!(xids, [9658, 9659, 9660, 9661, 9662, 9663]);
}
