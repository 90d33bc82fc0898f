//! Properties of the aggregation accumulator: a running row kept by adding, replacing and
//! removing documents equals `aggregate` over the documents left, bit for bit, whatever the
//! order; the exact double sum is the correctly rounded sum (checked against IEEE-754
//! addition of two values, which is exact-then-rounded).
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;

use docstore_core::path::ResourcePath;
use docstore_core::query::{aggregate, parse_query, Accumulator, Query, RunningAggregates};
use docstore_core::value::{Map, Value};
use proptest::prelude::*;

/// A field's value, or `None` for a missing field.
fn field_value() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        // Integers near the ends of int64, and small ones.
        4 => (0i64..64).prop_map(|k| Some(Value::Integer(i64::MAX - k))),
        4 => (0i64..64).prop_map(|k| Some(Value::Integer(i64::MIN + k))),
        3 => (-100i64..100).prop_map(|i| Some(Value::Integer(i))),
        // Doubles: any finite bit pattern (subnormals, huge), simple fractions, -0.0.
        4 => any::<f64>()
            .prop_filter("finite", |d| d.is_finite())
            .prop_map(|d| Some(Value::Double(d))),
        3 => (-1000i32..1000).prop_map(|i| Some(Value::Double(f64::from(i) / 10.0))),
        1 => Just(Some(Value::Double(-0.0))),
        1 => Just(Some(Value::Double(f64::MAX))),
        1 => Just(Some(Value::Double(f64::NAN))),
        1 => Just(Some(Value::Double(f64::INFINITY))),
        1 => Just(Some(Value::Double(f64::NEG_INFINITY))),
        // Skipped by sum/avg.
        1 => Just(Some(Value::Null)),
        1 => Just(Some(Value::String("7".to_owned()))),
        1 => Just(Some(Value::Boolean(true))),
        2 => Just(None),
    ]
}

/// A write: document `id` set to `{x, y}`, or deleted.
#[derive(Debug, Clone)]
enum Op {
    Set(u8, Option<Value>, Option<Value>),
    Delete(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..12, field_value(), field_value()).prop_map(|(id, x, y)| Op::Set(id, x, y)),
        1 => (0u8..12).prop_map(Op::Delete),
    ]
}

fn path(id: u8) -> ResourcePath {
    ResourcePath::parse_document(&format!("c/d{id:02}")).unwrap()
}

fn doc(x: &Option<Value>, y: &Option<Value>) -> Map {
    let mut m = Map::new();
    if let Some(x) = x {
        m.insert("x".to_owned(), x.clone());
    }
    if let Some(y) = y {
        m.insert("y".to_owned(), y.clone());
    }
    m
}

fn query() -> Query {
    parse_query(
        "select count(*) as n, count_up_to(5) as n5, sum(x) as sx, avg(x) as ax, sum(y) as sy from c",
    )
    .unwrap()
}

/// Equal rows, doubles compared by bits (every NaN the accumulator returns is `f64::NAN`).
fn assert_same_row(running: &Map, fresh: &Map, context: &str) {
    assert_eq!(running, fresh, "{context}");
    for (alias, value) in running {
        if let (Value::Double(a), Some(Value::Double(b))) = (value, fresh.get(alias)) {
            assert_eq!(a.to_bits(), b.to_bits(), "{alias}: {context}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn running_row_equals_a_fresh_aggregate(ops in prop::collection::vec(op(), 1..60)) {
        let query = query();
        let mut running = RunningAggregates::new(&query);
        let mut docs: BTreeMap<u8, Map> = BTreeMap::new();
        for (step, op) in ops.iter().enumerate() {
            match op {
                Op::Set(id, x, y) => {
                    let d = doc(x, y);
                    let fresh = running.insert(&path(*id), &d);
                    prop_assert_eq!(fresh, docs.insert(*id, d).is_none());
                }
                Op::Delete(id) => {
                    prop_assert_eq!(running.remove(&path(*id)), docs.remove(id).is_some());
                }
            }
            let all: Vec<(ResourcePath, Map)> =
                docs.iter().map(|(id, d)| (path(*id), d.clone())).collect();
            let fresh = aggregate(&query, &all);
            assert_same_row(&running.row(), &fresh, &format!("step {step} of {ops:?}"));
            // The order the documents are added in does not matter either.
            let mut reversed = Accumulator::new(&query);
            for (p, d) in all.iter().rev() {
                reversed.add_document(p, d);
            }
            assert_same_row(&reversed.row(), &fresh, &format!("reversed, step {step}"));
        }
        prop_assert_eq!(running.len(), docs.len());
    }

    #[test]
    fn two_doubles_sum_like_ieee_addition(a in any::<f64>(), b in any::<f64>()) {
        prop_assume!(a.is_finite() && b.is_finite());
        let query = parse_query("select sum(x) from c").unwrap();
        let all = vec![
            (path(0), doc(&Some(Value::Double(a)), &None)),
            (path(1), doc(&Some(Value::Double(b)), &None)),
        ];
        let row = aggregate(&query, &all);
        // IEEE-754 addition is the exact sum rounded once; an exact zero is +0.0 here.
        let expected = if a + b == 0.0 { 0.0 } else { a + b };
        match row.get("field_1") {
            Some(Value::Double(s)) => prop_assert_eq!(s.to_bits(), expected.to_bits()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_integer_and_a_double_sum_exactly(i in -(1i64 << 52)..(1i64 << 52), d in -1e6f64..1e6) {
        // Below 2^52 the integer is exact as a double, so IEEE addition of the two is the
        // exact sum rounded once.
        let query = parse_query("select sum(x), avg(x) from c").unwrap();
        let all = vec![
            (path(0), doc(&Some(Value::Integer(i)), &None)),
            (path(1), doc(&Some(Value::Double(d)), &None)),
        ];
        #[allow(clippy::cast_precision_loss)]
        let expected = i as f64 + d;
        let row = aggregate(&query, &all);
        let expected_sum = if expected == 0.0 { 0.0 } else { expected };
        prop_assert_eq!(row.get("field_1"), Some(&Value::Double(expected_sum)));
        prop_assert_eq!(row.get("field_2"), Some(&Value::Double(expected_sum / 2.0)));
    }
}

#[test]
fn special_values_follow_firestore() {
    let query = parse_query("select sum(x) as s, avg(x) as a from c").unwrap();
    let row = |values: &[Value]| {
        let all: Vec<(ResourcePath, Map)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (path(u8::try_from(i).unwrap()), doc(&Some(v.clone()), &None)))
            .collect();
        let r = aggregate(&query, &all);
        (r["s"].clone(), r["a"].clone())
    };
    let int = Value::Integer;
    let dbl = Value::Double;
    assert_eq!(row(&[]), (int(0), Value::Null));
    assert_eq!(row(&[int(1), int(2)]), (int(3), dbl(1.5)));
    assert_eq!(row(&[int(1), dbl(2.0)]), (dbl(3.0), dbl(1.5)));
    // int64 overflow: a double, the exact sum rounded once (even if it comes back in range
    // the result stays exact: the integers are summed in i128).
    assert_eq!(
        row(&[int(i64::MAX), int(1)]),
        (
            dbl(9_223_372_036_854_775_808.0),
            dbl(4_611_686_018_427_387_904.0)
        )
    );
    assert_eq!(
        row(&[int(i64::MAX), int(1), int(-2)]),
        (int(i64::MAX - 1), {
            #[allow(clippy::cast_precision_loss)]
            let a = (i64::MAX - 1) as f64 / 3.0;
            dbl(a)
        })
    );
    // NaN wins; opposite infinities make NaN; one infinity wins over finite values.
    let (s, _) = row(&[int(1), dbl(f64::NAN), dbl(f64::INFINITY)]);
    assert!(matches!(s, Value::Double(d) if d.is_nan()));
    let (s, _) = row(&[dbl(f64::INFINITY), dbl(f64::NEG_INFINITY)]);
    assert!(matches!(s, Value::Double(d) if d.is_nan()));
    assert_eq!(
        row(&[dbl(f64::NEG_INFINITY), dbl(f64::MAX), int(5)]),
        (dbl(f64::NEG_INFINITY), dbl(f64::NEG_INFINITY))
    );
    // Past the largest double: infinity, also for the average.
    assert_eq!(
        row(&[dbl(f64::MAX), dbl(f64::MAX)]),
        (dbl(f64::INFINITY), dbl(f64::INFINITY))
    );
    // No order-dependent last bit: 0.1 + 0.2 + 0.3 is 0.6 in every order.
    assert_eq!(
        row(&[dbl(0.1), dbl(0.2), dbl(0.3)]),
        (dbl(0.6), dbl(0.6 / 3.0))
    );
    assert_eq!(
        row(&[dbl(0.3), dbl(0.2), dbl(0.1)]),
        (dbl(0.6), dbl(0.6 / 3.0))
    );
    // Non-numbers are skipped.
    assert_eq!(
        row(&[Value::Null, Value::String("1".into()), Value::Boolean(true)]),
        (int(0), Value::Null)
    );
    // -0.0 sums to +0.0 (a double: a double was summed).
    let (s, _) = row(&[dbl(-0.0)]);
    assert!(matches!(s, Value::Double(d) if d.to_bits() == 0));
}
