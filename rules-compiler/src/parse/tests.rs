use super::ast::{Expr, ExprKind, PathPart};
use super::*;

/// A compact printing of a tree, parenthesised, to check the shape the parser built.
fn shape(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Null => "null".into(),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Int(i) => i.to_string(),
        ExprKind::Float(f) => format!("{f:?}"),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Bytes(b) => format!("b{b:?}"),
        ExprKind::Ident(n) => n.clone(),
        ExprKind::Path(parts) => parts
            .iter()
            .map(|p| match p {
                PathPart::Segment(s) => format!("/{s}"),
                PathPart::Expr(e) => format!("/$({})", shape(e)),
            })
            .collect(),
        ExprKind::List(items) => format!(
            "[{}]",
            items.iter().map(shape).collect::<Vec<_>>().join(", ")
        ),
        ExprKind::Map(entries) => format!(
            "{{{}}}",
            entries
                .iter()
                .map(|(k, v)| format!("{}: {}", shape(k), shape(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ExprKind::Unary(op, e) => format!("({op:?} {})", shape(e)),
        ExprKind::Binary(op, a, b) => format!("({} {} {})", shape(a), op.symbol(), shape(b)),
        ExprKind::Is(e, t) => format!("({} is {t})", shape(e)),
        ExprKind::Ternary(a, b, c) => format!("({} ? {} : {})", shape(a), shape(b), shape(c)),
        ExprKind::Member(e, n) => format!("{}.{n}", shape(e)),
        ExprKind::Index(e, i) => format!("{}[{}]", shape(e), shape(i)),
        ExprKind::Range(e, a, b) => format!("{}[{}:{}]", shape(e), shape(a), shape(b)),
        ExprKind::Call(n, args) => format!(
            "{n}({})",
            args.iter().map(shape).collect::<Vec<_>>().join(", ")
        ),
        ExprKind::Method(r, n, args) => format!(
            "{}.{n}({})",
            shape(r),
            args.iter().map(shape).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn condition(src: &str) -> Result<String, CompileError> {
    let text = format!(
        "service cloud.firestore {{ match /databases/{{db}}/documents {{ allow read: if {src}; }} }}"
    );
    let file = parse(&text)?;
    let allow = &file.services[0].body.matches[0].body.allows[0];
    Ok(allow.condition.as_ref().map(shape).unwrap_or_default())
}

#[test]
fn precedence_table() {
    for (src, want) in [
        (
            "a || b && c == d + e * f",
            "(a || (b && (c == (d + (e * f)))))",
        ),
        ("1 == 1 == true", "((1 == 1) == true)"),
        ("!a.b(c)[0]", "(Not a.b(c)[0])"),
        ("-1 - -2.5 % 3", "((Neg 1) - ((Neg 2.5) % 3))"),
        ("a ? b : c ? d : e", "(a ? b : (c ? d : e))"),
        (
            "x is string && y in [1, 2,]",
            "((x is string) && (y in [1, 2]))",
        ),
        ("(a || b) && c", "((a || b) && c)"),
        ("-9223372036854775808", "-9223372036854775808"),
        ("a < b == c", "((a < b) == c)"),
        ("a in b is bool", "((a in b) is bool)"),
        ("x[1:2]", "x[1:2]"),
    ] {
        assert_eq!(condition(src).unwrap(), want, "{src}");
    }
}

#[test]
fn primaries() {
    for (src, want) in [
        (
            "/databases/$(database)/documents/(default)",
            "/databases/$(database)/documents/(default)",
        ),
        (
            "math.abs(1) + duration.value(1, 's')",
            "(math.abs(1) + duration.value(1, \"s\"))",
        ),
        ("get(/a/b).data.x", "get(/a/b).data.x"),
        ("{'a': [1, {}], 'b': null}", "{\"a\": [1, {}], \"b\": null}"),
        ("/a%20b/c+d", "/a b/c d"),
        ("b'\\x01' == x", "(b[1] == x)"),
    ] {
        assert_eq!(condition(src).unwrap(), want, "{src}");
    }
}

#[test]
fn declarations() {
    let f = parse(
        "rules_version = '2';\n\
         function top() { return true; }\n\
         service cloud.firestore {\n\
           match /databases/{database}/documents {\n\
             function f(a, b) { let c = a; return c == b; }\n\
             match /users/{user}/{rest=**} {\n\
               allow read, update: if f(1, 1);\n\
               allow delete;\n\
             }\n\
           }\n\
         }",
    )
    .unwrap();
    assert_eq!(f.version, ast::Version::V2);
    assert_eq!(f.functions.len(), 1);
    let m = &f.services[0].body.matches[0];
    assert_eq!(m.body.functions[0].lets.len(), 1);
    let inner = &m.body.matches[0];
    assert_eq!(
        inner
            .path
            .iter()
            .map(|s| s.kind.clone())
            .collect::<Vec<_>>(),
        vec![
            SegmentKind::Literal("users".into()),
            SegmentKind::Single("user".into()),
            SegmentKind::Recursive("rest".into())
        ]
    );
    assert_eq!(
        inner.body.allows[0].methods,
        vec![Method::Get, Method::List, Method::Update]
    );
    assert!(inner.body.allows[1].condition.is_none());
}

#[test]
fn syntax_errors_point_at_the_token() {
    for (src, line, column, needle) in [
        (
            "service x { match /a { allow read: if ; } }",
            1,
            39,
            "expected an expression",
        ),
        (
            "service x {\n  allow reed: if true;\n}",
            2,
            9,
            "unknown method 'reed'",
        ),
        (
            "service x { match /a { allow read: true; } }",
            1,
            36,
            "expected 'if'",
        ),
        ("rules_version = 3; service x {}", 1, 17, "rules_version"),
        (
            "service x { match /a { allow read: if x is foo; } }",
            1,
            44,
            "unknown type 'foo'",
        ),
        (
            "service x { match /a { allow read: if 99999999999999999999; } }",
            1,
            39,
            "out of range",
        ),
        ("function f() { return 1; }", 1, 27, "no 'service'"),
        // A '/' after a path continues it: never a division (Firebase refuses it too; found
        // by the differential against hidane-rules).
        (
            "service x { match /a { allow read: if /a/b / (1) == 2; } }",
            1,
            44,
            "after '/'",
        ),
    ] {
        let e = parse(src).unwrap_err();
        assert_eq!((e.line, e.column), (line, column), "{src}: {e}");
        assert!(e.message.contains(needle), "{src}: {e}");
        assert_eq!(e.sqlstate(), "42601");
    }
    let e = parse("import 'x'; service x {}").unwrap_err();
    assert_eq!(e.sqlstate(), "0A000");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = format!("{}true{}", "(".repeat(5000), ")".repeat(5000));
    assert!(condition(&deep).is_err());
    let long = vec!["a"; 5000].join(" || ");
    assert!(condition(&long).is_err());
    let bangs = format!("{}true", "!".repeat(5000));
    assert!(condition(&bangs).is_err());
}

#[test]
fn a_number_then_a_dot_is_a_float() {
    assert!(condition("3.size()").is_err());
    assert!(condition("x == 3.5").is_ok());
    let src = "service cloud.firestore { match /a/{b} { allow get: if 9223372036854775807.get(['a'], null); } }";
    assert!(parse(src).is_err());
}

#[test]
fn an_empty_match_or_service_body_is_refused_as_firebase_does() {
    // Firebase's grammar: "The 'match' body must contain at least one declaration."
    // (firebase/snippets-rules `solution-rbac/step1-invalid.rules` is such a file), reported
    // at the closing brace; a comment is not a declaration.
    let src = "service cloud.firestore {\n  match /a/{b} {\n    // TODO\n  }\n}";
    let e = parse(src).unwrap_err();
    assert_eq!(e.sqlstate(), "42601");
    assert_eq!((e.line, e.column), (4, 3), "{e}");
    assert!(e.message.contains("'match' body must contain"), "{e}");
    let e = parse("service cloud.firestore { }").unwrap_err();
    assert!(e.message.contains("'service' body must contain"), "{e}");
    // A body with only a function, or only a nested match that allows, is a declaration.
    assert!(parse("service cloud.firestore { function f() { return true; } }").is_ok());
    assert!(
        parse("service cloud.firestore { match /a/{b} { match /c/{d} { allow read; } } }").is_ok()
    );
}
