//! The planner's choices: which indexes, which key bytes, which errors.

// Test helpers outside #[test] functions unwrap and panic to report failures.
#![allow(clippy::unwrap_used, clippy::panic)]

use docstore_core::encoding::{encode_index_value, encode_name, Direction as KeyDirection};
use docstore_core::index::{auto_prefix, kind, IndexDefinition, IndexMode, Scope};
use docstore_core::plan::simulate::{simulate, MemoryStore};
use docstore_core::plan::{
    cursor_position, key_matches, order_key, plan, scan_bounds, seek_key, Branch, Catalog,
    IndexRef, KeyCheck, Plan, PlanError, Scan, Slot, SuffixPart,
};
use docstore_core::query::{evaluate, parse_query, Query};
use docstore_core::value::Map;
use docstore_core::{typed_json, FieldPath, ResourcePath, Value};

fn q(text: &str) -> Query {
    parse_query(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn index(id: u32, group: &str, scope: Scope, json: &str) -> IndexDefinition {
    IndexDefinition {
        id,
        collection_group: group.into(),
        scope,
        fields: IndexDefinition::parse_fields(&serde_json::from_str(json).unwrap()).unwrap(),
    }
}

fn catalog(composites: Vec<IndexDefinition>) -> Catalog {
    Catalog {
        composites,
        exemptions: vec![],
    }
}

fn field(f: &str) -> FieldPath {
    FieldPath::parse(f).unwrap()
}

fn collection(p: &str) -> ResourcePath {
    ResourcePath::parse(p).unwrap()
}

fn plan_ok(text: &str, catalog: &Catalog) -> Plan {
    plan(&q(text), catalog).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn scans(plan: &Plan) -> Vec<&[Scan]> {
    plan.branches
        .iter()
        .map(|b| match b {
            Branch::Scans(scans) => scans.as_slice(),
            Branch::Collection(_) => panic!("expected scans, got {b:?}"),
        })
        .collect()
}

fn only_scan(plan: &Plan) -> &Scan {
    match scans(plan).as_slice() {
        [[scan]] => scan,
        other => panic!("expected one scan, got {other:?}"),
    }
}

fn auto_eq_prefix(coll: &str, f: &str, v: &Value) -> Vec<u8> {
    let mut prefix = auto_prefix(kind::AUTO_VALUE, &collection(coll), &field(f));
    prefix.extend(encode_index_value(v, KeyDirection::Ascending));
    prefix
}

fn missing_call(text: &str, catalog: &Catalog) -> String {
    match plan(&q(text), catalog) {
        Err(PlanError::MissingIndex { call, .. }) => call,
        other => panic!("{text}: expected a missing index, got {other:?}"),
    }
}

fn s(v: &str) -> Value {
    Value::String(v.into())
}

#[test]
fn one_equality_is_one_automatic_scan() {
    let p = plan_ok(
        "select * from /restaurants where city = 'SF'",
        &Catalog::default(),
    );
    let scan = only_scan(&p);
    assert_eq!(
        scan.index,
        IndexRef::Auto {
            field: field("city"),
            contains: false
        }
    );
    assert_eq!(scan.prefix, auto_eq_prefix("restaurants", "city", &s("SF")));
    assert!(scan.ranges.is_empty());
    assert!(!scan.backward);
    assert_eq!(scan.suffix, vec![SuffixPart::Name { descending: false }]);
    assert_eq!(scan.slots, vec![Slot::Part(0)]);
    assert!(!p.reverse_output && !p.recheck);
}

#[test]
fn two_equalities_zigzag_over_automatic_indexes() {
    let p = plan_ok(
        "select * from /restaurants where city = 'SF' and type = 'BBQ'",
        &Catalog::default(),
    );
    let [branch] = scans(&p)[..] else {
        panic!("one branch")
    };
    let fields: Vec<_> = branch.iter().map(|s| s.index.clone()).collect();
    assert_eq!(
        fields,
        vec![
            IndexRef::Auto {
                field: field("city"),
                contains: false
            },
            IndexRef::Auto {
                field: field("type"),
                contains: false
            },
        ]
    );
}

#[test]
fn name_descending_is_a_backward_scan() {
    let p = plan_ok(
        "select * from /restaurants where city = 'SF' order by __name__ desc",
        &Catalog::default(),
    );
    assert!(only_scan(&p).backward);
}

#[test]
fn single_field_order_reads_the_automatic_index_in_either_direction() {
    let p = plan_ok(
        "select * from /restaurants order by avgRating desc",
        &Catalog::default(),
    );
    let scan = only_scan(&p);
    assert!(scan.backward);
    assert_eq!(
        scan.prefix,
        auto_prefix(
            kind::AUTO_VALUE,
            &collection("restaurants"),
            &field("avgRating")
        )
    );
    assert_eq!(
        scan.suffix,
        vec![
            SuffixPart::Value {
                field: field("avgRating"),
                descending: false
            },
            SuffixPart::Name { descending: false }
        ]
    );
    assert!(
        !only_scan(&plan_ok(
            "select * from /restaurants order by avgRating",
            &Catalog::default()
        ))
        .backward
    );
}

#[test]
fn a_range_stops_at_its_type_class() {
    let p = plan_ok(
        "select * from /restaurants where numRatings > 2",
        &Catalog::default(),
    );
    let scan = only_scan(&p);
    let prefix = auto_prefix(
        kind::AUTO_VALUE,
        &collection("restaurants"),
        &field("numRatings"),
    );
    assert_eq!(scan.ranges.len(), 1);
    let mut two = prefix.clone();
    two.extend(encode_index_value(
        &Value::Integer(2),
        KeyDirection::Ascending,
    ));
    // Just past every key holding 2, up to the last number tag (+Infinity).
    assert!(scan.ranges[0].start > two && !scan.ranges[0].start.starts_with(&two));
    let mut end = prefix;
    end.push(0x36);
    assert_eq!(scan.ranges[0].end, end);
}

#[test]
fn not_equal_splits_the_range_and_skips_null() {
    let p = plan_ok(
        "select * from /restaurants where city != 'SF'",
        &Catalog::default(),
    );
    let scan = only_scan(&p);
    assert_eq!(scan.ranges.len(), 2);
    let prefix = auto_prefix(kind::AUTO_VALUE, &collection("restaurants"), &field("city"));
    let mut after_null = prefix.clone();
    after_null.push(0x11);
    assert_eq!(scan.ranges[0].start, after_null);
}

#[test]
fn equality_and_order_need_a_composite() {
    let text = "select * from /restaurants where city = 'SF' order by avgRating desc";
    assert_eq!(
        missing_call(text, &Catalog::default()),
        r#"select docstore.create_index('restaurants', '[{"field": "city", "order": "asc"}, {"field": "avgRating", "order": "desc"}]');"#
    );
    let with = catalog(vec![index(
        4,
        "restaurants",
        Scope::Collection,
        r#"[{"field":"city"},{"field":"avgRating","order":"desc"}]"#,
    )]);
    let p = plan_ok(text, &with);
    let scan = only_scan(&p);
    assert_eq!(scan.index, IndexRef::Composite { id: 4 });
    assert!(!scan.backward);
    let mut prefix = with.composites[0].prefix(Some(&collection("restaurants")));
    prefix.extend(encode_index_value(&s("SF"), KeyDirection::Ascending));
    assert_eq!(scan.prefix, prefix);
    assert_eq!(
        scan.suffix,
        vec![
            SuffixPart::Value {
                field: field("avgRating"),
                descending: true
            },
            SuffixPart::Name { descending: true }
        ]
    );
    // The reverse order is the same index read backward.
    let reversed = plan_ok(
        "select * from /restaurants where city = 'SF' order by avgRating",
        &with,
    );
    assert!(only_scan(&reversed).backward);
    // A group-scoped index does not serve a collection query.
    let group = catalog(vec![index(
        4,
        "restaurants",
        Scope::CollectionGroup,
        r#"[{"field":"city"},{"field":"avgRating","order":"desc"}]"#,
    )]);
    assert!(plan(&q(text), &group).is_err());
}

#[test]
fn two_composites_zigzag_on_the_shared_order() {
    let text =
        "select * from /restaurants where city = 'SF' and type = 'BBQ' order by avgRating desc";
    let two = vec![
        index(
            1,
            "restaurants",
            Scope::Collection,
            r#"[{"field":"city"},{"field":"avgRating","order":"desc"}]"#,
        ),
        // Stored ascending: read backward, still the same order.
        index(
            2,
            "restaurants",
            Scope::Collection,
            r#"[{"field":"type"},{"field":"avgRating"}]"#,
        ),
    ];
    let p = plan_ok(text, &catalog(two.clone()));
    let [branch] = scans(&p)[..] else {
        panic!("one branch")
    };
    assert_eq!(branch.len(), 2);
    assert_eq!(branch[0].index, IndexRef::Composite { id: 1 });
    assert!(!branch[0].backward);
    assert_eq!(branch[1].index, IndexRef::Composite { id: 2 });
    assert!(branch[1].backward);
    // One index covering both equalities wins.
    let mut three = two;
    three.push(index(
        9,
        "restaurants",
        Scope::Collection,
        r#"[{"field":"type"},{"field":"city"},{"field":"avgRating","order":"desc"}]"#,
    ));
    let p = plan_ok(text, &catalog(three));
    assert_eq!(only_scan(&p).index, IndexRef::Composite { id: 9 });
    // A single covering index is not enough when its order does not match.
    let wrong = catalog(vec![index(
        1,
        "restaurants",
        Scope::Collection,
        r#"[{"field":"city"},{"field":"type"},{"field":"avgRating"},{"field":"__name__","order":"desc"}]"#,
    )]);
    assert!(plan(&q(text), &wrong).is_err());
}

#[test]
fn in_and_or_are_unions() {
    let p = plan_ok(
        "select * from /restaurants where city in ('SF', 'LA', null)",
        &Catalog::default(),
    );
    assert_eq!(scans(&p).len(), 2);
    let p = plan_ok(
        "select * from /restaurants where city = 'SF' or type = 'BBQ'",
        &Catalog::default(),
    );
    let indexes: Vec<_> = p.indexes().into_iter().cloned().collect();
    assert_eq!(
        indexes,
        vec![
            IndexRef::Auto {
                field: field("city"),
                contains: false
            },
            IndexRef::Auto {
                field: field("type"),
                contains: false
            }
        ]
    );
    let p = plan_ok(
        "select * from /restaurants where tags array_contains_any ('a', 'b')",
        &Catalog::default(),
    );
    assert_eq!(scans(&p).len(), 2);
    assert_eq!(
        scans(&p)[0][0].index,
        IndexRef::Auto {
            field: field("tags"),
            contains: true
        }
    );
    assert_eq!(scans(&p)[0][0].prefix[0], kind::AUTO_ARRAY_CONTAINS);
}

#[test]
fn contradictions_have_no_branches() {
    let p = plan_ok(
        "select * from /restaurants where a = 1 and a > 3",
        &Catalog::default(),
    );
    assert!(p.branches.is_empty());
    let p = plan_ok(
        "select * from /restaurants where a = 1 and a is null",
        &Catalog::default(),
    );
    assert!(p.branches.is_empty());
}

#[test]
fn exemptions_remove_automatic_indexes() {
    let exempt = Catalog {
        composites: vec![],
        exemptions: vec![field("address")],
    };
    assert_eq!(
        missing_call(
            "select * from /restaurants where address.city = 'SF'",
            &exempt
        ),
        r#"select docstore.create_index('restaurants', '[{"field": "address.city", "order": "asc"}]');"#
    );
    assert!(plan(&q("select * from /restaurants where city = 'SF'"), &exempt).is_ok());
    // One exempted equality among several: the suggestion covers the whole query.
    assert_eq!(
        missing_call(
            "select * from /restaurants where city = 'SF' and address = 'x'",
            &exempt
        ),
        r#"select docstore.create_index('restaurants', '[{"field": "city", "order": "asc"}, {"field": "address", "order": "asc"}]');"#
    );
}

#[test]
fn group_queries_need_group_indexes() {
    let text = "select * from group(ratings) where rating = 3 order by time desc";
    let err = plan(&q(text), &Catalog::default()).unwrap_err();
    let PlanError::MissingIndex {
        collection_group,
        scope,
        fields,
        call,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(collection_group, "ratings");
    assert_eq!(*scope, Scope::CollectionGroup);
    assert_eq!(fields.len(), 2);
    assert_eq!(fields[1].mode, IndexMode::Descending);
    assert_eq!(
        call,
        r#"select docstore.create_index('ratings', '[{"field": "rating", "order": "asc"}, {"field": "time", "order": "desc"}]', scope => 'collection_group');"#
    );
    assert!(err.to_string().contains(call.as_str()));
    let definition = index(
        3,
        "ratings",
        Scope::CollectionGroup,
        r#"[{"field":"rating"},{"field":"time","order":"desc"}]"#,
    );
    let p = plan_ok(text, &catalog(vec![definition.clone()]));
    let scan = only_scan(&p);
    let mut prefix = definition.prefix(None);
    prefix.extend(encode_index_value(
        &Value::Integer(3),
        KeyDirection::Ascending,
    ));
    assert_eq!(scan.prefix, prefix);
    assert_eq!(scan.name_under, None);
    // Under a document: names are checked on the key.
    let p = plan_ok(
        "select * from /restaurants/one/group(ratings) where rating = 3 order by time desc",
        &catalog(vec![definition]),
    );
    assert_eq!(
        only_scan(&p).name_under,
        Some(ResourcePath::parse("restaurants/one").unwrap())
    );
    // Automatic indexes are per collection: even one equality needs a group index.
    assert!(plan(
        &q("select * from group(ratings) where rating = 3"),
        &Catalog::default()
    )
    .is_err());
}

#[test]
fn listings_without_filters() {
    let p = plan_ok("select * from group(ratings)", &Catalog::default());
    let [Branch::Collection(listing)] = p.branches.as_slice() else {
        panic!("{p:?}")
    };
    assert!(listing.all_descendants && listing.ranges.is_empty() && !listing.backward);
    let p = plan_ok(
        "select * from /restaurants/one/group(ratings) order by __name__ desc",
        &Catalog::default(),
    );
    let [Branch::Collection(listing)] = p.branches.as_slice() else {
        panic!("{p:?}")
    };
    assert!(listing.backward);
    assert_eq!(listing.ranges.len(), 1);
    let name = encode_name(&ResourcePath::parse("restaurants/one/ratings/x").unwrap());
    assert!(listing.ranges[0].start <= name && name < listing.ranges[0].end);
    let outside = encode_name(&ResourcePath::parse("restaurants/one").unwrap());
    assert!(!(listing.ranges[0].start <= outside && outside < listing.ranges[0].end));
    // __name__ ranges on a collection are name ranges.
    let p = plan_ok(
        "select * from /restaurants where __name__ >= 'b' and __name__ < 'd'",
        &Catalog::default(),
    );
    let [Branch::Collection(listing)] = p.branches.as_slice() else {
        panic!("{p:?}")
    };
    assert_eq!(
        listing.ranges[0].start,
        encode_name(&ResourcePath::parse("restaurants/b").unwrap())
    );
}

#[test]
fn multiple_inequalities_filter_on_the_key() {
    let text = "select * from /r where a > 1 and b < 3";
    assert_eq!(
        missing_call(text, &Catalog::default()),
        r#"select docstore.create_index('r', '[{"field": "a", "order": "asc"}, {"field": "b", "order": "asc"}]');"#
    );
    let p = plan_ok(
        text,
        &catalog(vec![index(
            1,
            "r",
            Scope::Collection,
            r#"[{"field":"a"},{"field":"b"}]"#,
        )]),
    );
    let scan = only_scan(&p);
    assert_eq!(scan.ranges.len(), 1);
    assert_eq!(scan.key_filters.len(), 1);
    assert_eq!(scan.key_filters[0].position, 1);
}

#[test]
fn explicit_name_direction_goes_into_the_suggestion() {
    assert_eq!(
        missing_call(
            "select * from /r where a = 1 order by b desc, __name__",
            &Catalog::default()
        ),
        r#"select docstore.create_index('r', '[{"field": "a", "order": "asc"}, {"field": "b", "order": "desc"}, {"field": "__name__", "order": "asc"}]');"#
    );
    assert_eq!(
        missing_call(
            "select * from /r where tags array_contains 'x' order by b",
            &Catalog::default()
        ),
        r#"select docstore.create_index('r', '[{"field": "tags", "array": "contains"}, {"field": "b", "order": "asc"}]');"#
    );
    assert_eq!(
        missing_call(
            "select * from /r where `it's` = 1 order by b",
            &Catalog::default()
        ),
        r#"select docstore.create_index('r', '[{"field": "`it''s`", "order": "asc"}, {"field": "b", "order": "asc"}]');"#
    );
}

#[test]
fn unsupported_shapes() {
    for text in [
        "select * from /r where a > 1 order by __name__",
        "select * from /r where tags array_contains 1 order by tags",
    ] {
        assert!(
            matches!(
                plan(&q(text), &Catalog::default()),
                Err(PlanError::Unsupported(_))
            ),
            "{text}"
        );
    }
}

#[test]
fn limit_last_runs_the_reversed_query() {
    let text = "select * from /r order by a start at (2) limit last 2";
    let p = plan_ok(text, &Catalog::default());
    assert!(p.reverse_output);
    assert!(only_scan(&p).backward);
    assert!(p.start.is_none() && p.end.is_some());
}

fn doc(path: &str, json: &str) -> (ResourcePath, Map) {
    (
        ResourcePath::parse_document(path).unwrap(),
        typed_json::map_from_json(&serde_json::from_str(json).unwrap()).unwrap(),
    )
}

#[test]
fn keys_decode_and_seek() {
    let definition = index(
        1,
        "r",
        Scope::Collection,
        r#"[{"field":"city"},{"field":"avgRating","order":"desc"}]"#,
    );
    let docs = vec![
        doc("r/1", r#"{"city": "SF", "avgRating": 4.5}"#),
        doc("r/2", r#"{"city": "SF", "avgRating": 3}"#),
        doc("r/3", r#"{"city": "SF", "avgRating": 3}"#),
        doc("r/4", r#"{"city": "LA", "avgRating": 5}"#),
    ];
    let store = MemoryStore::new(&docs, std::slice::from_ref(&definition), &[]).unwrap();
    let query = q("select * from /r where city = 'SF' order by avgRating desc");
    let p = plan(&query, &catalog(vec![definition])).unwrap();
    let scan = only_scan(&p);
    let keys: Vec<&Vec<u8>> = store
        .keys()
        .iter()
        .filter(|k| k.starts_with(&scan.prefix))
        .collect();
    assert_eq!(keys.len(), 3);
    let positions: Vec<_> = keys.iter().map(|k| order_key(scan, k).unwrap()).collect();
    assert_eq!(
        positions[0].values[0].value,
        Some(Value::Double(4.5)),
        "descending rating first"
    );
    for (key, position) in keys.iter().zip(&positions) {
        assert_eq!(seek_key(scan, position, false), **key);
        assert!(seek_key(scan, position, true) > **key);
        assert_eq!(key_matches(scan, position), KeyCheck::Pass);
    }
    assert!(p.compare(&positions[0], &positions[1]).is_lt());
    // A cursor: rows after rating 3 (descending) are none; at 3, the two of them.
    let at_three = cursor_position(&p.order, &[Value::Integer(3)]);
    let boundary = seek_key(scan, &at_three, false);
    assert_eq!(keys.iter().filter(|k| ***k >= boundary).count(), 2);
    let cursor = q("select * from /r where city = 'SF' order by avgRating desc start after (4.5) end at (3, '2')");
    let cp = plan(
        &cursor,
        &catalog(vec![index(
            1,
            "r",
            Scope::Collection,
            r#"[{"field":"city"},{"field":"avgRating","order":"desc"}]"#,
        )]),
    )
    .unwrap();
    let bounds = scan_bounds(&cp, only_scan(&cp));
    let inside: Vec<_> = keys
        .iter()
        .filter(|k| bounds.iter().any(|r| r.start <= ***k && ***k < r.end))
        .collect();
    // Names descend with the rating: r/3 comes before r/2, so both are in.
    assert_eq!(inside.len(), 2);
    let got = simulate(&cp, &cursor, &store).unwrap();
    assert_eq!(got, evaluate(&cursor, &docs));
    assert_eq!(got.len(), 2);
    let before =
        q("select * from /r where city = 'SF' order by avgRating desc end before (3, '2')");
    let bp = plan(
        &before,
        &catalog(vec![index(
            1,
            "r",
            Scope::Collection,
            r#"[{"field":"city"},{"field":"avgRating","order":"desc"}]"#,
        )]),
    )
    .unwrap();
    let got = simulate(&bp, &before, &store).unwrap();
    assert_eq!(got, evaluate(&before, &docs));
    assert_eq!(got.len(), 2);
}

#[test]
fn long_values_are_rechecked() {
    let long_a = "a".repeat(2000);
    let long_b = format!("{}b", "a".repeat(1999));
    let docs = vec![
        doc("r/1", &format!(r#"{{"s": "{long_a}"}}"#)),
        doc("r/2", &format!(r#"{{"s": "{long_b}"}}"#)),
        doc("r/3", r#"{"s": "b"}"#),
    ];
    let store = MemoryStore::new(&docs, &[], &[]).unwrap();
    for text in [
        format!("select * from /r where s = '{long_a}'"),
        format!("select * from /r where s > '{long_a}'"),
        format!("select * from /r where s < '{long_b}'"),
        format!("select * from /r where s != '{long_a}'"),
        format!("select * from /r order by s start after ('{long_a}')"),
    ] {
        let query = q(&text);
        let p = plan(&query, &Catalog::default()).unwrap();
        assert!(p.recheck, "{}", &text[..40]);
        let got: Vec<_> = simulate(&p, &query, &store)
            .unwrap()
            .into_iter()
            .map(|(path, _)| path)
            .collect();
        let mut expected: Vec<_> = evaluate(&query, &docs)
            .into_iter()
            .map(|(path, _)| path)
            .collect();
        // Order among values that share their first 1,500 bytes is the index's (by name).
        let mut sorted = got.clone();
        sorted.sort();
        expected.sort();
        assert_eq!(sorted, expected, "{}", &text[..40]);
    }
}
