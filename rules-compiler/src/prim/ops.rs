//! Operators, constructors, paths and conversions.
//!
//! Numbers follow Firebase's Java semantics: `int op int` is an int and overflow is an
//! error; with a float on either side the int is converted to a double (`(double) i`, as
//! Java promotes) and the result is a float; `1 == 1.0` is true. Inside lists and maps,
//! equality is strict (`[1] != [1.0]`); in sets and map diffs numbers compare by value.
//! Ordering `< <= > >=` is defined between two numbers, two strings (UTF-16 code unit
//! order, Java's), two bytes, two timestamps and two durations; anything else is an error;
//! NaN compares false.

use std::cmp::Ordering;

use docstore_core::path_pattern::Bound;

use super::time::{duration, timestamp};
use super::{Map, Val};

pub(super) fn apply(name: &str, args: &[&Val]) -> Option<Val> {
    match (name, args) {
        ("add", [a, b]) => add(a, b),
        ("sub", [a, b]) => sub(a, b),
        ("mul" | "div" | "mod", [a, b]) => multiplicative(name, a, b),
        ("neg", [a]) => match a {
            Val::Int(i) => i.checked_neg().map(Val::Int),
            Val::Float(f) => Some(Val::Float(-f)),
            Val::Duration(d) => duration(-d),
            _ => None,
        },
        ("not", [Val::Bool(b)]) => Some(Val::Bool(!b)),
        ("eq", [a, b]) => Some(Val::Bool(eq(a, b))),
        ("ne", [a, b]) => Some(Val::Bool(!eq(a, b))),
        ("lt" | "le" | "gt" | "ge", [a, b]) => {
            let o = compare_values(a, b)?;
            Some(Val::Bool(o.is_some_and(|o| match name {
                "lt" => o.is_lt(),
                "le" => o.is_le(),
                "gt" => o.is_gt(),
                _ => o.is_ge(),
            })))
        }
        ("in", [v, c]) => member_of(v, c),
        ("is", [v, Val::Str(t)]) => Some(Val::Bool(v.is(t))),
        ("member", [o, f]) => select(name, o, f).flatten().cloned(),
        ("index", [o, i]) => match select(name, o, i) {
            Some(found) => found.cloned(),
            None => index(o, i),
        },
        ("range", [o, Val::Int(a), Val::Int(b)]) => range(o, *a, *b),
        ("list", items) => Some(Val::List(items.iter().map(|v| (*v).clone()).collect())),
        ("map", kvs) => {
            if kvs.len() % 2 != 0 {
                return None;
            }
            let mut m = Map::new();
            for pair in kvs.chunks(2) {
                match pair {
                    [Val::Str(k), v] => {
                        m.insert(k.clone(), (*v).clone());
                    }
                    _ => return None,
                }
            }
            Some(Val::Map(m))
        }
        ("path", parts) => {
            let mut segs = Vec::new();
            for p in parts {
                match p {
                    Val::Str(s) if !s.is_empty() => segs.push(s.clone()),
                    Val::Path(p) => segs.extend(p.iter().cloned()),
                    _ => return None,
                }
            }
            Some(Val::Path(segs))
        }
        ("match_path", [Val::Str(pattern), Val::Int(version), Val::Path(path)]) => {
            Some(match_path(pattern, *version, path).map_or(Val::Null, Val::Map))
        }
        ("int", [v]) => match v {
            Val::Int(i) => Some(Val::Int(*i)),
            // Java's cast: toward zero, saturating, NaN to 0.
            #[allow(clippy::cast_possible_truncation)]
            Val::Float(f) => Some(Val::Int(*f as i64)),
            Val::Str(s) => parse_java_long(s).map(Val::Int),
            _ => None,
        },
        ("float", [v]) => match v {
            #[allow(clippy::cast_precision_loss)]
            Val::Int(i) => Some(Val::Float(*i as f64)),
            Val::Float(f) => Some(Val::Float(*f)),
            Val::Str(s) => parse_java_double(s).map(Val::Float),
            _ => None,
        },
        ("string", [v]) => to_string(v).map(Val::Str),
        ("path_of", [Val::Str(s)]) => {
            let body = s.strip_prefix('/').unwrap_or(s);
            let segs: Vec<String> = body
                .split('/')
                .map(crate::parse::expr::url_decode)
                .collect();
            if segs.iter().any(String::is_empty) {
                return None;
            }
            Some(Val::Path(segs))
        }
        ("debug", [v]) => Some((*v).clone()),
        _ => None,
    }
}

/// Java's `Long.parseLong`: an optional sign and ASCII digits, nothing else (no spaces).
fn parse_java_long(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

/// Java's `Double.parseDouble`: spaces and control characters around it are ignored, a sign,
/// `NaN`, `Infinity`, decimal digits with an exponent, an optional `d`/`f` suffix.
fn parse_java_double(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, t.get(1..)?),
        Some(b'+') => (false, t.get(1..)?),
        _ => (false, t),
    };
    let value = match body {
        "NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        _ => {
            let body = body.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(body);
            let ok = !body.is_empty()
                && body.bytes().any(|b| b.is_ascii_digit())
                && body
                    .bytes()
                    .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
            if !ok {
                return None;
            }
            body.parse().ok()?
        }
    };
    Some(if negative { -value } else { value })
}

/// Java's `Double.toString`.
pub(super) fn java_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = d.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        return format!("{d:?}");
    }
    let s = format!("{d:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_owned()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exp}")
}

/// `string(v)`: ints, floats (Java's form), null, strings, bools and paths.
pub(super) fn to_string(v: &Val) -> Option<String> {
    Some(match v {
        Val::Null => "null".into(),
        Val::Bool(b) => b.to_string(),
        Val::Int(i) => i.to_string(),
        Val::Float(f) => java_double(*f),
        Val::Str(s) => s.clone(),
        Val::Path(p) => format!("/{}", p.join("/")),
        _ => return None,
    })
}

#[allow(clippy::cast_precision_loss)]
fn number(v: &Val) -> Option<f64> {
    match v {
        Val::Int(i) => Some(*i as f64),
        Val::Float(f) => Some(*f),
        _ => None,
    }
}

fn add(a: &Val, b: &Val) -> Option<Val> {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => x.checked_add(*y).map(Val::Int),
        (Val::Str(x), Val::Str(y)) => Some(Val::Str(format!("{x}{y}"))),
        (Val::Duration(x), Val::Duration(y)) => duration(x + y),
        (Val::Timestamp(t), Val::Duration(d)) | (Val::Duration(d), Val::Timestamp(t)) => {
            timestamp(t + d)
        }
        _ => Some(Val::Float(number(a)? + number(b)?)),
    }
}

fn sub(a: &Val, b: &Val) -> Option<Val> {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => x.checked_sub(*y).map(Val::Int),
        (Val::Duration(x), Val::Duration(y)) => duration(x - y),
        (Val::Timestamp(t), Val::Duration(d)) => timestamp(t - d),
        (Val::Timestamp(x), Val::Timestamp(y)) => duration(x - y),
        _ => Some(Val::Float(number(a)? - number(b)?)),
    }
}

fn multiplicative(op: &str, a: &Val, b: &Val) -> Option<Val> {
    if let (Val::Int(x), Val::Int(y)) = (a, b) {
        return match op {
            "mul" => x.checked_mul(*y).map(Val::Int),
            "div" => x.checked_div(*y).map(Val::Int),
            _ => x.checked_rem(*y).map(Val::Int),
        };
    }
    let (x, y) = (number(a)?, number(b)?);
    Some(Val::Float(match op {
        "mul" => x * y,
        "div" => x / y,
        _ => x % y,
    }))
}

/// `==`: numbers by value at the top (Java's promotion), everything else strictly.
pub fn eq(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Int(_), Val::Float(_)) | (Val::Float(_), Val::Int(_)) => {
            number(a).zip(number(b)).is_some_and(|(x, y)| x == y)
        }
        _ => same(a, b, strict_eq),
    }
}

/// Equality without numeric conversion (inside lists and maps, `in` on lists).
pub fn strict_eq(a: &Val, b: &Val) -> bool {
    same(a, b, strict_eq)
}

/// Equality where numbers compare by value at any depth (sets, map diffs).
pub fn loose_eq(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Int(_), Val::Float(_)) | (Val::Float(_), Val::Int(_)) => eq(a, b),
        _ => same(a, b, loose_eq),
    }
}

fn same(a: &Val, b: &Val, inner: fn(&Val, &Val) -> bool) -> bool {
    match (a, b) {
        (Val::Null, Val::Null) => true,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Int(x), Val::Int(y)) => x == y,
        #[allow(clippy::float_cmp)]
        (Val::Float(x), Val::Float(y)) => x == y,
        (Val::Str(x), Val::Str(y)) => x == y,
        (Val::Bytes(x), Val::Bytes(y)) => x == y,
        (Val::Timestamp(x), Val::Timestamp(y)) | (Val::Duration(x), Val::Duration(y)) => x == y,
        #[allow(clippy::float_cmp)]
        (Val::LatLng(a1, b1), Val::LatLng(a2, b2)) => a1 == a2 && b1 == b2,
        (Val::Path(x), Val::Path(y)) => x == y,
        (Val::List(x), Val::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| inner(p, q))
        }
        (Val::Set(x), Val::Set(y)) => {
            x.len() == y.len() && x.iter().all(|p| y.iter().any(|q| loose_eq(p, q)))
        }
        (Val::Map(x), Val::Map(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| inner(v, w)))
        }
        (Val::MapDiff(x), Val::MapDiff(y)) => {
            x.added == y.added
                && x.removed == y.removed
                && x.changed == y.changed
                && x.unchanged == y.unchanged
        }
        _ => false,
    }
}

/// The order of `<`: `None` for an error (types without an order between them),
/// `Some(None)` for unordered (NaN).
pub fn compare_values(a: &Val, b: &Val) -> Option<Option<Ordering>> {
    Some(match (a, b) {
        (Val::Str(x), Val::Str(y)) => Some(x.encode_utf16().cmp(y.encode_utf16())),
        (Val::Bytes(x), Val::Bytes(y)) => Some(x.cmp(y)),
        (Val::Int(x), Val::Int(y)) => Some(x.cmp(y)),
        (Val::Timestamp(x), Val::Timestamp(y)) | (Val::Duration(x), Val::Duration(y)) => {
            Some(x.cmp(y))
        }
        _ => number(a)?.partial_cmp(&number(b)?),
    })
}

fn member_of(v: &Val, c: &Val) -> Option<Val> {
    Some(Val::Bool(match c {
        Val::List(items) => items.iter().any(|x| strict_eq(x, v)),
        Val::Set(items) => items.iter().any(|x| loose_eq(x, v)),
        Val::Map(m) => match v {
            Val::Str(k) => m.contains_key(k),
            _ => return None,
        },
        _ => return None,
    }))
}

/// UTF-16 code units `from..to` of `s` (a lone surrogate becomes U+FFFD, as Java prints it).
fn utf16_slice(s: &str, from: usize, to: usize) -> Option<String> {
    let units: Vec<u16> = s.encode_utf16().collect();
    Some(String::from_utf16_lossy(units.get(from..to)?))
}

/// `x[a:b]` of a list, a string (UTF-16 code units) or a path: `a` must be an index of `x`
/// and so must `b - 1` (so an empty slice is an error, as Firebase's emulator has it).
fn range(o: &Val, a: i64, b: i64) -> Option<Val> {
    let size = match o {
        Val::List(items) => items.len(),
        Val::Str(s) => s.encode_utf16().count(),
        Val::Path(p) => p.len(),
        _ => return None,
    };
    let from = usize::try_from(a).ok().filter(|&i| i < size)?;
    let last = usize::try_from(b.checked_sub(1)?)
        .ok()
        .filter(|&i| i < size)?;
    let to = last + 1;
    if from > to {
        return None;
    }
    Some(match o {
        Val::List(items) => Val::List(items.get(from..to)?.to_vec()),
        Val::Str(s) => Val::Str(utf16_slice(s, from, to)?),
        Val::Path(p) => Val::Path(p.get(from..to)?.to_vec()),
        _ => return None,
    })
}

/// The cases of `member` (`o.f`) and `index` (`o[i]`) that select a value `o` holds (a
/// map's field, a list's item), by reference, so the evaluator need not copy `o` or the value:
/// `Some(Some(v))` selects `v`, `Some(None)` is an error, `None` is not such a case (`index`
/// of a string or a path makes a new value).
pub fn select<'v>(name: &str, o: &'v Val, key: &Val) -> Option<Option<&'v Val>> {
    match (name, o, key) {
        ("member" | "index", Val::Map(m), Val::Str(k)) => Some(m.get(k)),
        ("member", _, _) => Some(None),
        ("index", Val::List(items), Val::Int(i)) => {
            Some(usize::try_from(*i).ok().and_then(|i| items.get(i)))
        }
        _ => None,
    }
}

fn index(o: &Val, i: &Val) -> Option<Val> {
    match (o, i) {
        (Val::Str(s), Val::Int(i)) => {
            let at = usize::try_from(*i).ok()?;
            utf16_slice(s, at, at.checked_add(1)?).map(Val::Str)
        }
        (Val::Path(p), Val::Int(i)) => p.get(usize::try_from(*i).ok()?).cloned().map(Val::Str),
        _ => None,
    }
}

/// Items made distinct (by value equality), first occurrence kept.
pub fn to_set(items: impl IntoIterator<Item = Val>) -> Val {
    let mut out: Vec<Val> = Vec::new();
    for v in items {
        if !out.iter().any(|x| loose_eq(x, &v)) {
            out.push(v);
        }
    }
    Val::Set(out)
}

/// Match `path` (segments from `databases`) against a pattern written as in a `match`
/// (`/databases/{database}/documents/users/{uid}/{rest=**}`): the wildcards' bindings, or
/// `None` when it does not match ([`bind`]).
pub fn match_path(pattern: &str, version: i64, path: &[String]) -> Option<Map> {
    Some(
        bind(&PathPattern::borrowed(pattern), version, path)?
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
    )
}

/// A `match` pattern split into its segments (core's one implementation, shared with write
/// triggers): owned in a compiled rule, so the evaluator splits each pattern once, or borrowed
/// from the text for the SQL primitive `match_path`, which gets its pattern on every call.
pub use docstore_core::path_pattern::PathPattern;

/// The wildcards' bindings of `pattern` on `path` as rules values, in pattern order, or `None`
/// when it does not match. In version 1 a `{x=**}` matches one or more segments, in version 2
/// zero or more; it binds a path.
pub fn bind<'a, S: AsRef<str>, P: AsRef<str>>(
    pattern: &'a PathPattern<S>,
    version: i64,
    path: &[P],
) -> Option<Vec<(&'a str, Val)>> {
    let min_recursive = usize::from(version < 2);
    Some(
        pattern
            .bind(min_recursive, path)?
            .into_iter()
            .map(|(name, bound)| {
                let value = match bound {
                    Bound::Segment(s) => Val::Str(s.as_ref().to_owned()),
                    Bound::Segments(s) => {
                        Val::Path(s.iter().map(|s| s.as_ref().to_owned()).collect())
                    }
                };
                (name, value)
            })
            .collect(),
    )
}
