#![allow(clippy::cloned_ref_to_slice_refs)]

use super::*;

fn s(x: &str) -> Val {
    Val::str(x)
}

fn ok(name: &str, args: &[Val]) -> Val {
    match apply(name, args) {
        Some(v) => v,
        None => panic!("{name}({args:?}) is an error"),
    }
}

fn is_true(name: &str, args: &[Val]) -> bool {
    matches!(apply(name, args), Some(Val::Bool(true)))
}

#[test]
fn int_and_float_arithmetic() {
    assert!(matches!(
        ok("add", &[Val::Int(1), Val::Int(2)]),
        Val::Int(3)
    ));
    assert!(matches!(ok("add", &[Val::Int(1), Val::Float(0.5)]), Val::Float(f) if f == 1.5));
    assert!(apply("add", &[Val::Int(i64::MAX), Val::Int(1)]).is_none());
    assert!(apply("sub", &[Val::Int(i64::MIN), Val::Int(1)]).is_none());
    assert!(apply("mul", &[Val::Int(i64::MAX), Val::Int(2)]).is_none());
    assert!(apply("div", &[Val::Int(1), Val::Int(0)]).is_none());
    assert!(apply("mod", &[Val::Int(1), Val::Int(0)]).is_none());
    assert!(apply("div", &[Val::Int(i64::MIN), Val::Int(-1)]).is_none());
    assert!(apply("neg", &[Val::Int(i64::MIN)]).is_none());
    assert!(matches!(
        ok("div", &[Val::Int(7), Val::Int(2)]),
        Val::Int(3)
    ));
    assert!(matches!(
        ok("mod", &[Val::Int(-7), Val::Int(2)]),
        Val::Int(-1)
    ));
    assert!(matches!(ok("div", &[Val::Float(1.0), Val::Int(0)]), Val::Float(f) if f.is_infinite()));
    assert!(matches!(ok("add", &[s("a"), s("b")]), Val::Str(x) if x == "ab"));
    assert!(apply("add", &[s("a"), Val::Int(1)]).is_none());
    assert!(apply("add", &[Val::Null, Val::Int(1)]).is_none());
}

#[test]
fn equality_and_order() {
    assert!(is_true("eq", &[Val::Int(1), Val::Float(1.0)]));
    assert!(!is_true(
        "eq",
        &[
            Val::List(vec![Val::Int(1)]),
            Val::List(vec![Val::Float(1.0)])
        ]
    ));
    assert!(is_true(
        "eq",
        &[Val::Set(vec![Val::Int(1)]), Val::Set(vec![Val::Float(1.0)])]
    ));
    assert!(!is_true(
        "eq",
        &[Val::Float(f64::NAN), Val::Float(f64::NAN)]
    ));
    assert!(is_true("ne", &[Val::Int(1), s("1")]));
    assert!(is_true("eq", &[Val::Null, Val::Null]));
    assert!(is_true("lt", &[Val::Int(1), Val::Float(1.5)]));
    assert!(apply("lt", &[Val::Int(1), s("a")]).is_none());
    assert!(apply("lt", &[Val::Null, Val::Null]).is_none());
    assert!(!is_true("lt", &[Val::Float(f64::NAN), Val::Int(1)]));
    assert!(!is_true("ge", &[Val::Float(f64::NAN), Val::Int(1)]));
    // UTF-16 order: U+FF61 sorts after U+1F600's surrogates in UTF-16, before it in UTF-8.
    assert!(is_true("lt", &[s("\u{1F600}"), s("\u{FF61}")]));
    assert!(is_true("le", &[s("a"), s("a")]));
}

#[test]
fn strings() {
    assert!(matches!(ok("size", &[s("a\u{1F600}")]), Val::Int(3)));
    assert!(matches!(ok("size", &[s("é")]), Val::Int(1)));
    assert!(matches!(ok("lower", &[s("AbÉ")]), Val::Str(x) if x == "abÉ"));
    assert!(matches!(ok("upper", &[s("ab")]), Val::Str(x) if x == "AB"));
    assert!(matches!(ok("trim", &[s(" \tx \n")]), Val::Str(x) if x == "x"));
    assert!(is_true("matches", &[s("abc"), s("a.c")]));
    assert!(!is_true("matches", &[s("xabc"), s("a.c")]));
    assert!(is_true("matches", &[s("abc"), s("a|abc|b")]));
    assert!(!is_true("matches", &[s("٣"), s("\\d")]));
    assert!(apply("matches", &[s("a"), s("(")]).is_none());
    let parts = ok("split", &[s("a,b,,"), s(",")]);
    assert!(matches!(&parts, Val::List(p) if p.len() == 2));
    assert!(
        matches!(ok("replace", &[s("a1b2"), s("[0-9]"), s("<$0>")]), Val::Str(x) if x == "a<1>b<2>")
    );
    assert!(matches!(ok("to_utf8", &[s("é")]), Val::Bytes(b) if b == vec![0xC3, 0xA9]));
    assert!(matches!(ok("string", &[Val::Float(1.0)]), Val::Str(x) if x == "1.0"));
    assert!(matches!(ok("string", &[Val::Float(1e21)]), Val::Str(x) if x == "1.0E21"));
    assert!(matches!(ok("int", &[s("42")]), Val::Int(42)));
    assert!(apply("int", &[s("4x")]).is_none());
    assert!(matches!(ok("int", &[Val::Float(-2.7)]), Val::Int(-2)));
    assert!(matches!(ok("float", &[Val::Int(2)]), Val::Float(f) if f == 2.0));
}

#[test]
fn lists_sets_maps() {
    let l = Val::List(vec![Val::Int(1), Val::Int(2), s("x")]);
    assert!(is_true("in", &[Val::Int(2), l.clone()]));
    assert!(!is_true("in", &[Val::Float(2.0), l.clone()]));
    assert!(is_true(
        "has_all",
        &[l.clone(), Val::List(vec![Val::Int(1), s("x")])]
    ));
    assert!(!is_true(
        "has_all",
        &[l.clone(), Val::List(vec![Val::Int(3)])]
    ));
    assert!(is_true(
        "has_any",
        &[l.clone(), Val::List(vec![Val::Int(3), Val::Int(1)])]
    ));
    assert!(is_true(
        "has_only",
        &[Val::List(vec![Val::Int(1)]), l.clone()]
    ));
    assert!(matches!(ok("index", &[l.clone(), Val::Int(2)]), Val::Str(x) if x == "x"));
    assert!(apply("index", &[l.clone(), Val::Int(3)]).is_none());
    assert!(apply("index", &[l.clone(), Val::Int(-1)]).is_none());
    assert!(
        matches!(ok("range", &[l.clone(), Val::Int(1), Val::Int(3)]), Val::List(x) if x.len() == 2)
    );
    assert!(matches!(
        ok(
            "size",
            &[ok(
                "to_set",
                &[Val::List(vec![Val::Int(1), Val::Float(1.0)])]
            )]
        ),
        Val::Int(1)
    ));
    assert!(matches!(ok("join", &[l.clone(), s("-")]), Val::Str(x) if x == "1-2-x"));
    assert!(apply("range", &[l.clone(), Val::Int(0), Val::Int(0)]).is_none());
    assert!(
        matches!(ok("range", &[l.clone(), Val::Int(1), Val::Int(1)]), Val::List(x) if x.is_empty())
    );
    assert!(apply("range", &[l.clone(), Val::Int(0), Val::Int(4)]).is_none());
    assert!(
        matches!(ok("range", &[s("a\u{1F600}b"), Val::Int(1), Val::Int(3)]), Val::Str(x) if x == "\u{1F600}")
    );
    assert!(matches!(ok("index", &[s("a\u{1F600}b"), Val::Int(3)]), Val::Str(x) if x == "b"));
    assert!(matches!(ok("index", &[s("\u{1F600}"), Val::Int(0)]), Val::Str(x) if x == "\u{FFFD}"));
    assert!(apply("index", &[s("ab"), Val::Int(2)]).is_none());

    let mut a = Map::new();
    a.insert("k".into(), Val::Int(1));
    a.insert("same".into(), Val::Int(1));
    a.insert("new".into(), Val::Int(1));
    let mut b = Map::new();
    b.insert("k".into(), Val::Int(2));
    b.insert("same".into(), Val::Float(1.0));
    b.insert("old".into(), Val::Int(1));
    let d = ok("diff", &[Val::Map(a.clone()), Val::Map(b)]);
    let keys = |name: &str| match ok(name, &[d.clone()]) {
        Val::Set(items) => items
            .into_iter()
            .map(|v| match v {
                Val::Str(s) => s,
                _ => String::new(),
            })
            .collect::<Vec<_>>(),
        _ => vec![],
    };
    assert_eq!(keys("added_keys"), vec!["new"]);
    assert_eq!(keys("removed_keys"), vec!["old"]);
    assert_eq!(keys("changed_keys"), vec!["k"]);
    assert_eq!(keys("unchanged_keys"), vec!["same"]);
    assert_eq!(keys("affected_keys"), vec!["new", "old", "k"]);
    let m = Val::Map(a);
    assert!(is_true("in", &[s("k"), m.clone()]));
    assert!(apply("in", &[Val::Int(1), m.clone()]).is_none());
    assert!(matches!(
        ok("map_get", &[m.clone(), s("zz"), Val::Int(7)]),
        Val::Int(7)
    ));
    assert!(matches!(
        ok(
            "map_get",
            &[m.clone(), Val::List(vec![s("k")]), Val::Int(7)]
        ),
        Val::Int(1)
    ));
    assert!(matches!(ok("keys", &[m.clone()]), Val::List(k) if k.len() == 3));
    assert!(apply("member", &[m.clone(), s("missing")]).is_none());
    assert!(apply("member", &[Val::Null, s("x")]).is_none());
}

#[test]
fn time_math_hashing() {
    let t = ok(
        "timestamp_date",
        &[Val::Int(2024), Val::Int(2), Val::Int(29)],
    );
    assert!(matches!(ok("year", &[t.clone()]), Val::Int(2024)));
    assert!(matches!(ok("day_of_year", &[t.clone()]), Val::Int(60)));
    assert!(matches!(ok("day_of_week", &[t.clone()]), Val::Int(4)));
    assert!(apply(
        "timestamp_date",
        &[Val::Int(2023), Val::Int(2), Val::Int(29)]
    )
    .is_none());
    let d = ok("duration_value", &[Val::Int(1), s("h")]);
    let t2 = ok("add", &[t.clone(), d.clone()]);
    assert!(matches!(ok("hours", &[t2.clone()]), Val::Int(1)));
    assert!(matches!(ok("sub", &[t2, t.clone()]), Val::Duration(n) if n == 3_600_000_000_000));
    assert!(matches!(ok("seconds", &[d.clone()]), Val::Int(3600)));
    assert!(apply("duration_value", &[Val::Int(1), s("y")]).is_none());
    assert!(matches!(
        ok("to_millis", &[ok("timestamp_value", &[Val::Int(1234)])]),
        Val::Int(1234)
    ));
    assert!(matches!(ok("math_abs", &[Val::Int(-3)]), Val::Int(3)));
    assert!(apply("math_abs", &[Val::Int(i64::MIN)]).is_none());
    assert!(matches!(ok("math_round", &[Val::Float(2.5)]), Val::Int(3)));
    assert!(matches!(
        ok("math_round", &[Val::Float(-2.5)]),
        Val::Int(-2)
    ));
    assert!(matches!(ok("math_floor", &[Val::Float(2.5)]), Val::Float(f) if f == 2.0));
    assert!(is_true("math_is_nan", &[ok("math_sqrt", &[Val::Int(-1)])]));
    assert!(matches!(ok("math_pow", &[Val::Int(2), Val::Int(10)]), Val::Float(f) if f == 1024.0));
    let md5 = ok("hashing_md5", &[s("")]);
    assert!(
        matches!(ok("to_hex_string", &[md5]), Val::Str(h) if h == "D41D8CD98F00B204E9800998ECF8427E")
    );
    let sha = ok("hashing_sha256", &[s("abc")]);
    assert!(matches!(ok("to_hex_string", &[sha]), Val::Str(h) if h.starts_with("BA7816BF")));
    // CRC-32("123456789") = 0xCBF43926, CRC-32C = 0xE3069283 (little-endian bytes).
    assert!(
        matches!(ok("hashing_crc32", &[s("123456789")]), Val::Bytes(b) if b == vec![0x26, 0x39, 0xF4, 0xCB])
    );
    assert!(
        matches!(ok("hashing_crc32c", &[s("123456789")]), Val::Bytes(b) if b == vec![0x83, 0x92, 0x06, 0xE3])
    );
}

#[test]
fn paths_and_patterns() {
    let p: Vec<String> = ["databases", "(default)", "documents", "users", "u1"]
        .map(String::from)
        .to_vec();
    let b = ops::match_path("/databases/{db}/documents/users/{uid}", 2, &p);
    assert!(matches!(b.as_ref().and_then(|m| m.get("uid")), Some(Val::Str(u)) if u == "u1"));
    assert!(ops::match_path("/databases/{db}/documents/users", 2, &p).is_none());
    let rec = ops::match_path("/databases/{db}/documents/users/u1/{rest=**}", 2, &p);
    assert!(matches!(rec.as_ref().and_then(|m| m.get("rest")), Some(Val::Path(r)) if r.is_empty()));
    assert!(ops::match_path("/databases/{db}/documents/users/u1/{rest=**}", 1, &p).is_none());
    assert!(ops::match_path("/databases/{db}/documents/{rest=**}", 1, &p).is_some());
    let group = ops::match_path("/databases/{db}/documents/{path=**}/u1", 2, &p);
    assert!(
        matches!(group.as_ref().and_then(|m| m.get("path")), Some(Val::Path(r)) if r == &vec!["users".to_owned()])
    );
    assert!(ops::match_path("/databases/{db}/documents/{path=**}/users/u1", 2, &p).is_some());
    assert!(ops::match_path("/databases/{db}/documents/{path=**}/users/u1", 1, &p).is_none());
    assert!(ops::match_path("/databases/{db}/documents/{path=**}/x/users/u1", 2, &p).is_none());
    assert!(matches!(ok("path_of", &[s("/a/b%20c")]), Val::Path(x) if x == vec!["a", "b c"]));
    assert!(apply("path_of", &[s("a//b")]).is_none());
}

#[test]
fn json_round_trip_and_api() {
    let mut m = Map::new();
    m.insert("p".into(), Val::Path(vec!["a".into(), "b".into()]));
    m.insert("s".into(), Val::Set(vec![Val::Int(1)]));
    m.insert("d".into(), Val::Duration(5));
    m.insert("t".into(), Val::Timestamp(1_000_000_001));
    m.insert("f".into(), Val::Float(1.0));
    m.insert("n".into(), Val::Float(f64::NAN));
    let only = {
        let mut o = Map::new();
        o.insert("$path".into(), Val::Int(1));
        Val::Map(o)
    };
    m.insert("o".into(), only);
    let v = Val::Map(m);
    let j = to_json(&v);
    let back = from_json(&j);
    assert!(back.is_some_and(|b| to_json(&b) == j), "{j}");
    let r = apply_json(
        "add",
        &[Some(serde_json::json!(1)), Some(serde_json::json!(2))],
    );
    assert_eq!(r, Some(serde_json::json!(3)));
    assert_eq!(apply_json("add", &[None, Some(serde_json::json!(2))]), None);
    assert_eq!(apply_json("nope", &[]), None);
    assert_eq!(apply_json("add", &[Some(serde_json::json!(1))]), None);
    assert!(from_json(&serde_json::json!({"$ref": "a/b"})).is_none());
    let doc = document(
        "(default)",
        "users/u1",
        &serde_json::json!({"f": {"$ref": "a/b"}}),
    );
    let name = doc
        .as_ref()
        .and_then(|d| apply("member", &[d.clone(), s("__name__")]));
    assert!(matches!(name, Some(Val::Path(p)) if p.len() == 5));
}

#[test]
fn catalog_is_consistent() {
    for (name, _) in CATALOG {
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit()),
            "{name}"
        );
        assert_eq!(
            CATALOG.iter().filter(|(n, _)| n == name).count(),
            1,
            "{name}"
        );
    }
    assert_eq!(method_prim("hasAll").as_deref(), Some("has_all"));
    assert_eq!(method_prim("get").as_deref(), Some("map_get"));
    assert_eq!(method_prim("toMillis").as_deref(), Some("to_millis"));
    assert_eq!(method_prim("nope"), None);
    assert_eq!(
        function_prim(Some("math"), "isNaN").as_deref(),
        Some("math_is_nan")
    );
    assert_eq!(function_prim(None, "path").as_deref(), Some("path_of"));
    assert_eq!(function_prim(Some("math"), "nope"), None);
    assert_eq!(ops::java_double(0.001), "0.001");
}
