//! Unit tests of the row decoder over hand-built messages. The same decoding of real
//! streamed rows is checked against `docstore.get` in `tests/source_replication.rs`.

use docstore_core::value::Value;

use super::super::pgoutput::{Column, Delete, Insert, Truncate, Update};
use super::*;

const REL: u32 = 16_400;

fn column(name: &str, type_oid: u32, is_key: bool) -> Column {
    Column {
        is_key,
        name: name.into(),
        type_oid,
        type_modifier: -1,
    }
}

/// docstore.entities as sql/schema.sql declares it.
fn entities() -> Relation {
    Relation {
        id: REL,
        namespace: "docstore".into(),
        name: "entities".into(),
        replica_identity: b'd',
        columns: vec![
            column("database_id", TEXT_OID, true),
            column("name", BYTEA_OID, true),
            column("parent", BYTEA_OID, false),
            column("collection_id", TEXT_OID, false),
            column("path", TEXT_OID, false),
            column("data", JSONB_OID, false),
            column("create_time", TIMESTAMPTZ_OID, false),
            column("update_time", TIMESTAMPTZ_OID, false),
        ],
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::from("\\x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

struct Row {
    name_hex: String,
    path: String,
}

fn row(path: &str) -> Row {
    let parsed = ResourcePath::parse(path).unwrap();
    Row {
        name_hex: hex(&encoding::encode_name(&parsed)),
        path: path.into(),
    }
}

fn full_tuple<'a>(row: &'a Row, data: ColumnValue<'a>) -> Tuple<'a> {
    Tuple {
        columns: vec![
            ColumnValue::Text(b"(default)"),
            ColumnValue::Text(row.name_hex.as_bytes()),
            ColumnValue::Text(b"\\x00"),
            ColumnValue::Text(b"rooms"),
            ColumnValue::Text(row.path.as_bytes()),
            data,
            ColumnValue::Text(b"2026-11-23 02:15:29.123456+00"),
            ColumnValue::Text(b"2026-11-23 02:15:30+00"),
        ],
    }
}

fn key_tuple(row: &Row) -> Tuple<'_> {
    let mut columns = vec![ColumnValue::Null; 8];
    columns[0] = ColumnValue::Text(b"(default)");
    columns[1] = ColumnValue::Text(row.name_hex.as_bytes());
    Tuple { columns }
}

fn decoder() -> EntitiesDecoder {
    let mut d = EntitiesDecoder::new();
    let mut out = Vec::new();
    d.apply(&Message::Relation(entities()), &mut out).unwrap();
    assert!(out.is_empty());
    d
}

#[test]
fn insert_decodes_path_data_and_times() {
    let mut d = decoder();
    let r = row("rooms/one");
    let data = br#"{"n": 1, "t": {"$timestamp": "2022-09-01T13:23:22.123456Z"}, "x": 1.5}"#;
    let msg = Message::Insert(Insert {
        relation_id: REL,
        new: full_tuple(&r, ColumnValue::Text(data)),
    });
    let mut out = Vec::new();
    d.apply(&msg, &mut out).unwrap();
    let [Change::Insert(doc)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(doc.database_id, "(default)");
    assert_eq!(doc.path.to_string(), "rooms/one");
    assert_eq!(doc.name, encoding::encode_name(&doc.path));
    let DocumentData::Fields(map) = &doc.data else {
        panic!("{:?}", doc.data)
    };
    assert_eq!(map.get("n"), Some(&Value::Integer(1)));
    assert_eq!(map.get("x"), Some(&Value::Double(1.5)));
    assert!(matches!(map.get("t"), Some(Value::Timestamp(_))));
    assert_eq!(doc.create_time.to_rfc3339(), "2026-11-23T02:15:29.123456Z");
    assert_eq!(doc.update_time.to_rfc3339(), "2026-11-23T02:15:30.000000Z");
}

#[test]
fn unchanged_toast_data_is_reported_never_empty() {
    let mut d = decoder();
    let r = row("rooms/big");
    let msg = Message::Update(Update {
        relation_id: REL,
        old: None,
        new: full_tuple(&r, ColumnValue::UnchangedToast),
    });
    let mut out = Vec::new();
    d.apply(&msg, &mut out).unwrap();
    let [Change::Update(doc)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(doc.data, DocumentData::UnchangedToast);
}

#[test]
fn delete_by_key_recovers_the_path_from_the_name() {
    let mut d = decoder();
    let r = row("rooms/one/messages/m1");
    let msg = Message::Delete(Delete {
        relation_id: REL,
        old: OldTuple::Key(key_tuple(&r)),
    });
    let mut out = Vec::new();
    d.apply(&msg, &mut out).unwrap();
    let [Change::Delete(key)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(key.path.to_string(), "rooms/one/messages/m1");
    assert_eq!(key.database_id, "(default)");
}

#[test]
fn update_that_changes_the_key_is_a_delete_and_an_insert() {
    let mut d = decoder();
    let old = row("rooms/old");
    let new = row("rooms/new");
    let msg = Message::Update(Update {
        relation_id: REL,
        old: Some(OldTuple::Key(key_tuple(&old))),
        new: full_tuple(&new, ColumnValue::Text(b"{}")),
    });
    let mut out = Vec::new();
    d.apply(&msg, &mut out).unwrap();
    match out.as_slice() {
        [Change::Delete(k), Change::Insert(doc)] => {
            assert_eq!(k.path.to_string(), "rooms/old");
            assert_eq!(doc.path.to_string(), "rooms/new");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn other_relations_are_skipped_and_unknown_ones_refused() {
    let mut d = decoder();
    let mut other = entities();
    other.id = 7;
    other.name = "index_entries".into();
    let mut out = Vec::new();
    d.apply(&Message::Relation(other), &mut out).unwrap();
    let r = row("rooms/one");
    let insert = |relation_id| {
        Message::Insert(Insert {
            relation_id,
            new: full_tuple(&r, ColumnValue::Text(b"{}")),
        })
    };
    d.apply(&insert(7), &mut out).unwrap();
    assert!(out.is_empty());
    assert_eq!(
        d.apply(&insert(8), &mut out),
        Err(RowError::UnknownRelation(8))
    );
    let truncate = |ids: Vec<u32>| {
        Message::Truncate(Truncate {
            cascade: false,
            restart_identity: false,
            relation_ids: ids,
        })
    };
    d.apply(&truncate(vec![7]), &mut out).unwrap();
    assert!(out.is_empty());
    d.apply(&truncate(vec![7, REL]), &mut out).unwrap();
    assert_eq!(out, vec![Change::Truncate]);
}

#[test]
fn columns_are_found_by_name_and_type() {
    let mut reordered = entities();
    reordered.columns.reverse();
    let mut d = EntitiesDecoder::new();
    let mut out = Vec::new();
    d.apply(&Message::Relation(reordered), &mut out).unwrap();
    let r = row("rooms/one");
    let mut tuple = full_tuple(&r, ColumnValue::Text(br#"{"a": "b"}"#));
    tuple.columns.reverse();
    d.apply(
        &Message::Insert(Insert {
            relation_id: REL,
            new: tuple,
        }),
        &mut out,
    )
    .unwrap();
    assert!(matches!(&out[..], [Change::Insert(doc)] if doc.path.to_string() == "rooms/one"));

    let mut missing = entities();
    missing.columns.retain(|c| c.name != "data");
    assert_eq!(
        d.apply(&Message::Relation(missing), &mut out),
        Err(RowError::MissingColumn("data"))
    );
    let mut retyped = entities();
    retyped.columns[5].type_oid = TEXT_OID;
    assert!(matches!(
        d.apply(&Message::Relation(retyped), &mut out),
        Err(RowError::ColumnType { column: "data", .. })
    ));
}

#[test]
fn bad_rows_are_errors() {
    let mut d = decoder();
    let r = row("rooms/one");
    let mut out = Vec::new();
    let cases: Vec<(Tuple<'_>, &str)> = vec![
        (full_tuple(&r, ColumnValue::Text(b"[1]")), "data"),
        (full_tuple(&r, ColumnValue::Text(b"{")), "data"),
        (full_tuple(&r, ColumnValue::Null), "null"),
        (Tuple { columns: vec![] }, "count"),
        (
            {
                let mut t = full_tuple(&r, ColumnValue::Text(b"{}"));
                t.columns[1] = ColumnValue::Text(b"\\x0");
                t
            },
            "hex",
        ),
        (
            {
                let mut t = full_tuple(&r, ColumnValue::Text(b"{}"));
                t.columns[1] = ColumnValue::Text(b"\\x00");
                t
            },
            "name",
        ),
        (
            {
                let mut t = full_tuple(&r, ColumnValue::Text(b"{}"));
                t.columns[4] = ColumnValue::Text(b"rooms/two");
                t
            },
            "path",
        ),
        (
            {
                let mut t = full_tuple(&r, ColumnValue::Text(b"{}"));
                t.columns[6] = ColumnValue::Text(b"infinity");
                t
            },
            "time",
        ),
    ];
    for (tuple, what) in cases {
        let msg = Message::Insert(Insert {
            relation_id: REL,
            new: tuple,
        });
        assert!(d.apply(&msg, &mut out).is_err(), "{what} accepted");
        assert!(out.is_empty(), "{what} pushed a change");
    }
}

#[test]
fn timestamptz_text_in_any_offset() {
    let utc = parse_timestamptz("2026-11-23 02:15:29.5+00").unwrap();
    assert_eq!(utc.to_rfc3339(), "2026-11-23T02:15:29.500000Z");
    assert_eq!(parse_timestamptz("2026-11-23 03:15:29.5+01"), Some(utc));
    assert_eq!(parse_timestamptz("2026-11-22 20:45:29.5-05:30"), Some(utc));
    assert_eq!(parse_timestamptz("infinity"), None);
    assert_eq!(parse_timestamptz("0044-03-15 00:00:00+00 BC"), None);
    assert_eq!(parse_timestamptz("2026-11-23 02:15:29+00:00:10"), None);
    assert_eq!(parse_timestamptz("2026-11-23T02:15:29Z"), None);
}

#[test]
fn bytea_hex_text() {
    assert_eq!(bytea_hex("\\x"), Some(vec![]));
    assert_eq!(bytea_hex("\\x00fFa0"), Some(vec![0, 0xff, 0xa0]));
    assert_eq!(bytea_hex("\\x0"), None);
    assert_eq!(bytea_hex("\\xzz"), None);
    assert_eq!(bytea_hex("00"), None);
}

#[test]
fn full_old_rows_carry_the_previous_version() {
    // REPLICA IDENTITY FULL: an Update's and a Delete's old row is whole ('O').
    let mut d = decoder();
    let r = row("rooms/one");
    let update = Message::Update(Update {
        relation_id: REL,
        old: Some(OldTuple::Full(full_tuple(
            &r,
            ColumnValue::Text(b"{\"n\": 1}"),
        ))),
        new: full_tuple(&r, ColumnValue::UnchangedToast),
    });
    let delete = Message::Delete(Delete {
        relation_id: REL,
        old: OldTuple::Full(full_tuple(&r, ColumnValue::Text(b"{\"n\": 2}"))),
    });
    let mut out = Vec::new();
    d.apply(&update, &mut out).unwrap();
    d.apply(&delete, &mut out).unwrap();
    let [Change::Update(doc), Change::Delete(key)] = out.as_slice() else {
        panic!("{out:?}")
    };
    let n = |v: i64| Map::from([("n".to_owned(), Value::Integer(v))]);
    assert_eq!(doc.before.as_ref().map(|p| &p.fields), Some(&n(1)));
    // An unchanged TOASTed `data` is the old row's.
    assert_eq!(doc.data, DocumentData::Fields(n(1)));
    assert_eq!(key.before.as_ref().map(|p| &p.fields), Some(&n(2)));
    // A key-only old row ('K') has no previous version.
    let mut out = Vec::new();
    let by_key = Message::Delete(Delete {
        relation_id: REL,
        old: OldTuple::Key(key_tuple(&r)),
    });
    d.apply(&by_key, &mut out).unwrap();
    let [Change::Delete(key)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert!(key.before.is_none());
}
