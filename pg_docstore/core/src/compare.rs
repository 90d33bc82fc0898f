//! The one total order over values: Firestore's.
//!
//! null < boolean < number < timestamp < string < bytes < reference < geopoint < array <
//! vector < map. Numbers compare by exact mathematical value across integers and doubles
//! (NaN below every other number, -0.0 equal to 0.0, `2^53 + 1` above `2^53` as a double).
//! Strings and bytes compare bytewise, references segment by segment, arrays element-wise
//! (a prefix first), vectors by dimension then elements, maps by sorted key then value.

use std::cmp::Ordering;

use crate::value::Value;

/// Compare two values in Firestore's order. This is the single source of truth: the
/// encoding, the query matcher and the result order are all checked against it.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    use Value::*;
    match (a, b) {
        (Null, Null) => Ordering::Equal,
        (Boolean(x), Boolean(y)) => x.cmp(y),
        (Integer(x), Integer(y)) => x.cmp(y),
        (Double(x), Double(y)) => compare_doubles(*x, *y),
        (Integer(x), Double(y)) => compare_int_double(*x, *y),
        (Double(x), Integer(y)) => compare_int_double(*y, *x).reverse(),
        (Timestamp(x), Timestamp(y)) => x.cmp(y),
        (String(x), String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Bytes(x), Bytes(y)) => x.cmp(y),
        (Reference(x), Reference(y)) => x.segments().cmp(y.segments()),
        (GeoPoint(x), GeoPoint(y)) => compare_doubles(x.latitude, y.latitude)
            .then_with(|| compare_doubles(x.longitude, y.longitude)),
        (Array(x), Array(y)) => compare_sequences(x, y),
        (Vector(x), Vector(y)) => x.len().cmp(&y.len()).then_with(|| {
            x.iter()
                .zip(y)
                .map(|(p, q)| compare_doubles(*p, *q))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        }),
        (Map(x), Map(y)) => {
            for ((kx, vx), (ky, vy)) in x.iter().zip(y) {
                let o = kx
                    .as_bytes()
                    .cmp(ky.as_bytes())
                    .then_with(|| compare(vx, vy));
                if o.is_ne() {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => a.type_order().cmp(&b.type_order()),
    }
}

fn compare_sequences(x: &[Value], y: &[Value]) -> Ordering {
    x.iter()
        .zip(y)
        .map(|(p, q)| compare(p, q))
        .find(|o| o.is_ne())
        .unwrap_or_else(|| x.len().cmp(&y.len()))
}

/// Doubles in Firestore's order: NaN first (equal to itself), then the usual order with
/// -0.0 equal to 0.0.
pub fn compare_doubles(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        // Neither is NaN, so partial_cmp is total here.
        (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    }
}

/// An integer against a double by exact value.
pub fn compare_int_double(i: i64, d: f64) -> Ordering {
    if d.is_nan() {
        return Ordering::Greater;
    }
    // 2^63 is exactly representable; every i64 is below it and at or above -2^63.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d >= TWO_63 {
        return Ordering::Less;
    }
    if d < -TWO_63 {
        return Ordering::Greater;
    }
    // Here -2^63 <= d < 2^63, so its integral part converts to i64 exactly.
    let whole = d.trunc();
    #[allow(clippy::cast_possible_truncation)]
    let whole_int = whole as i64;
    i.cmp(&whole_int).then_with(|| {
        let frac = d - whole;
        if frac > 0.0 {
            Ordering::Less
        } else if frac < 0.0 {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_by_exact_value() {
        let two53 = 9_007_199_254_740_992_i64;
        assert_eq!(
            compare(&Value::Integer(two53 + 1), &Value::Double(two53 as f64)),
            Ordering::Greater
        );
        assert_eq!(
            compare(&Value::Integer(two53), &Value::Double(two53 as f64)),
            Ordering::Equal
        );
        assert_eq!(
            compare(
                &Value::Integer(i64::MAX),
                &Value::Double(9_223_372_036_854_775_808.0)
            ),
            Ordering::Less
        );
        assert_eq!(
            compare(
                &Value::Integer(i64::MIN),
                &Value::Double(-9_223_372_036_854_775_808.0)
            ),
            Ordering::Equal
        );
        assert_eq!(
            compare(&Value::Double(-0.0), &Value::Double(0.0)),
            Ordering::Equal
        );
        assert_eq!(
            compare(&Value::Double(-0.0), &Value::Integer(0)),
            Ordering::Equal
        );
        assert_eq!(
            compare(&Value::Double(f64::NAN), &Value::Double(f64::NEG_INFINITY)),
            Ordering::Less
        );
        assert_eq!(
            compare(&Value::Double(f64::NAN), &Value::Integer(i64::MIN)),
            Ordering::Less
        );
        assert_eq!(
            compare(&Value::Integer(1), &Value::Double(1.5)),
            Ordering::Less
        );
        assert_eq!(
            compare(&Value::Integer(-2), &Value::Double(-1.5)),
            Ordering::Less
        );
        assert_eq!(
            compare(&Value::Integer(-1), &Value::Double(-1.5)),
            Ordering::Greater
        );
    }

    #[test]
    fn cross_type_order() {
        let ordered = [
            Value::Null,
            Value::Boolean(false),
            Value::Boolean(true),
            Value::Double(f64::NAN),
            Value::Integer(0),
            Value::String(String::new()),
            Value::Bytes(vec![]),
            Value::Array(vec![]),
            Value::Map(Default::default()),
        ];
        for w in ordered.windows(2) {
            assert_eq!(
                compare(&w[0], &w[1]),
                Ordering::Less,
                "{:?} < {:?}",
                w[0],
                w[1]
            );
        }
    }
}
