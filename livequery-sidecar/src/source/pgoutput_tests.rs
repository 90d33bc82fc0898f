//! Unit tests of the pgoutput decoder over messages built byte by byte as proto.c writes
//! them. Real captured messages are in `tests/source_pgoutput_capture.rs` and the fuzz seeds.

use super::*;

/// Builds a message the way proto.c's `pq_send*` calls do.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn tag(tag: u8) -> Out {
        Out(vec![tag])
    }
    fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i32(mut self, v: i32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn string(mut self, s: &str) -> Self {
        self.0.extend_from_slice(s.as_bytes());
        self.0.push(0);
        self
    }
    fn text(self, s: &[u8]) -> Self {
        let mut out = self.u8(b't').i32(s.len() as i32);
        out.0.extend_from_slice(s);
        out
    }
}

#[test]
fn begin_and_commit() {
    let b = Out::tag(b'B')
        .u64(0x16_B374_D848)
        .u64(7)
        .u32(4_000_000_000)
        .0;
    assert_eq!(
        decode(&b),
        Ok(Message::Begin(Begin {
            final_lsn: Lsn(0x16_B374_D848),
            commit_time: 7,
            xid: 4_000_000_000,
        }))
    );
    let c = Out::tag(b'C').u8(0).u64(10).u64(20).u64(30).0;
    assert_eq!(
        decode(&c),
        Ok(Message::Commit(Commit {
            flags: 0,
            commit_lsn: Lsn(10),
            end_lsn: Lsn(20),
            commit_time: 30,
        }))
    );
}

#[test]
fn relation_with_keys_and_pg_catalog_namespace() {
    let r = Out::tag(b'R')
        .u32(16_400)
        .string("docstore")
        .string("entities")
        .u8(b'd')
        .u16(2)
        .u8(1)
        .string("database_id")
        .u32(25)
        .i32(-1)
        .u8(0)
        .string("data")
        .u32(3802)
        .i32(-1)
        .0;
    let Ok(Message::Relation(rel)) = decode(&r) else {
        panic!("not a relation: {:?}", decode(&r));
    };
    assert_eq!(rel.id, 16_400);
    assert_eq!(
        (rel.namespace.as_str(), rel.name.as_str()),
        ("docstore", "entities")
    );
    assert_eq!(rel.replica_identity, b'd');
    assert_eq!(rel.columns.len(), 2);
    assert!(rel.columns[0].is_key && !rel.columns[1].is_key);
    assert_eq!(rel.columns[1].type_oid, 3802);
    assert_eq!(rel.columns[1].type_modifier, -1);

    let y = Out::tag(b'Y').u32(9).string("").string("int4").0;
    assert_eq!(
        decode(&y),
        Ok(Message::Type(TypeInfo {
            id: 9,
            namespace: "pg_catalog".into(),
            name: "int4".into()
        }))
    );
}

#[test]
fn tuples_of_every_kind() {
    let i = Out::tag(b'I')
        .u32(5)
        .u8(b'N')
        .u16(4)
        .u8(b'n')
        .u8(b'u')
        .text(b"abc")
        .u8(b'b')
        .i32(2)
        .u8(0)
        .u8(1)
        .0;
    assert_eq!(
        decode(&i),
        Ok(Message::Insert(Insert {
            relation_id: 5,
            new: Tuple {
                columns: vec![
                    ColumnValue::Null,
                    ColumnValue::UnchangedToast,
                    ColumnValue::Text(b"abc"),
                    ColumnValue::Binary(&[0, 1]),
                ]
            }
        }))
    );
}

#[test]
fn update_with_and_without_old_tuple() {
    let plain = Out::tag(b'U').u32(5).u8(b'N').u16(1).text(b"x").0;
    let Ok(Message::Update(u)) = decode(&plain) else {
        panic!("{:?}", decode(&plain))
    };
    assert_eq!(u.old, None);
    assert_eq!(u.new.columns, vec![ColumnValue::Text(b"x")]);

    for (byte, full) in [(b'K', false), (b'O', true)] {
        let m = Out::tag(b'U')
            .u32(5)
            .u8(byte)
            .u16(1)
            .text(b"old")
            .u8(b'N')
            .u16(1)
            .text(b"new")
            .0;
        let Ok(Message::Update(u)) = decode(&m) else {
            panic!("{:?}", decode(&m))
        };
        let old = u.old.expect("old tuple");
        assert_eq!(matches!(old, OldTuple::Full(_)), full);
        assert_eq!(old.tuple().columns, vec![ColumnValue::Text(b"old")]);
        assert_eq!(u.new.columns, vec![ColumnValue::Text(b"new")]);
    }
    // 'K' must be followed by 'N'.
    let bad = Out::tag(b'U').u32(5).u8(b'K').u16(0).u8(b'X').u16(0).0;
    assert!(matches!(
        decode(&bad),
        Err(DecodeError::UnexpectedByte { byte: b'X', .. })
    ));
}

#[test]
fn delete_and_truncate() {
    let d = Out::tag(b'D').u32(5).u8(b'K').u16(2).text(b"db").u8(b'n').0;
    assert_eq!(
        decode(&d),
        Ok(Message::Delete(Delete {
            relation_id: 5,
            old: OldTuple::Key(Tuple {
                columns: vec![ColumnValue::Text(b"db"), ColumnValue::Null]
            })
        }))
    );
    let no_key = Out::tag(b'D').u32(5).u8(b'N').u16(0).0;
    assert!(decode(&no_key).is_err());

    let t = Out::tag(b'T').u32(2).u8(3).u32(5).u32(6).0;
    assert_eq!(
        decode(&t),
        Ok(Message::Truncate(Truncate {
            cascade: true,
            restart_identity: true,
            relation_ids: vec![5, 6]
        }))
    );
    // A count the input cannot hold is refused before allocating.
    let huge = Out::tag(b'T').u32(u32::MAX).u8(0).0;
    assert!(matches!(
        decode(&huge),
        Err(DecodeError::UnexpectedEnd { .. })
    ));
}

#[test]
fn message_and_origin() {
    let mut m = Out::tag(b'M').u8(1).u64(99).string("docstore").i32(3).0;
    m.extend_from_slice(b"hi!");
    assert_eq!(
        decode(&m),
        Ok(Message::Logical(LogicalMessage {
            transactional: true,
            lsn: Lsn(99),
            prefix: "docstore",
            content: b"hi!"
        }))
    );
    let o = Out::tag(b'O').u64(1).string("pg_16384").0;
    assert_eq!(
        decode(&o),
        Ok(Message::Origin(Origin {
            commit_lsn: Lsn(1),
            name: "pg_16384"
        }))
    );
}

#[test]
fn malformed_input_is_an_error() {
    assert_eq!(decode(&[]), Err(DecodeError::Empty));
    assert_eq!(decode(b"Z"), Err(DecodeError::UnknownMessage(b'Z')));
    // Truncated at every length.
    let full = Out::tag(b'I').u32(5).u8(b'N').u16(1).text(b"abc").0;
    for len in 0..full.len() {
        assert!(
            decode(&full[..len]).is_err(),
            "prefix of {len} bytes decoded"
        );
    }
    // Trailing bytes.
    let mut long = full.clone();
    long.push(0);
    assert_eq!(
        decode(&long),
        Err(DecodeError::TrailingBytes { tag: 'I', count: 1 })
    );
    // Negative and oversized lengths.
    let negative = Out::tag(b'I').u32(5).u8(b'N').u16(1).u8(b't').i32(-1).0;
    assert!(matches!(
        decode(&negative),
        Err(DecodeError::NegativeLength { length: -1, .. })
    ));
    let oversized = Out::tag(b'I')
        .u32(5)
        .u8(b'N')
        .u16(1)
        .u8(b't')
        .i32(i32::MAX)
        .0;
    assert!(matches!(
        decode(&oversized),
        Err(DecodeError::UnexpectedEnd { .. })
    ));
    // Unknown column kind.
    let kind = Out::tag(b'I').u32(5).u8(b'N').u16(1).u8(b'q').0;
    assert!(matches!(
        decode(&kind),
        Err(DecodeError::UnexpectedByte { byte: b'q', .. })
    ));
    // Invalid UTF-8 in a name.
    let utf8 = Out::tag(b'O').u64(1).u8(0xFF).u8(0).0;
    assert!(matches!(
        decode(&utf8),
        Err(DecodeError::InvalidUtf8 { .. })
    ));
}

#[test]
fn lsn_text_form() {
    assert_eq!(Lsn(0x16_B374_D848).to_string(), "16/B374D848");
    assert_eq!(Lsn::parse("16/B374D848"), Some(Lsn(0x16_B374_D848)));
    assert_eq!(Lsn::parse("0/0"), Some(Lsn(0)));
    assert_eq!(Lsn::parse("16B374D848"), None);
    assert_eq!(Lsn::parse("/1"), None);
    assert_eq!(Lsn::parse("123456789/1"), None);
}
