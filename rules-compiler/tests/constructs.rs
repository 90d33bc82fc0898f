//! Every construct of the language, as assertSucceeds / assertFails tables.

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use serde_json::json;

fn c(allow: &'static str, ctx: Ctx, store: Store, op: Op, allowed: bool) -> Case {
    Case {
        allow,
        ctx,
        store,
        op,
        allowed,
    }
}

fn doc() -> Store {
    Store::default().with(
        "docs/d1",
        json!({
            "owner": "alice", "n": 3, "f": 2.5, "big": 9007199254740993_i64,
            "tags": ["a", "b"], "m": {"x": 1, "y": {"z": true}},
            "when": {"$timestamp": "2023-11-14T22:13:20.000000Z"},
            "emoji": "a\u{1F600}", "nan": {"$double": "NaN"}, "nul": null,
            "ref": {"$ref": "users/alice"}
        }),
    )
}

fn get() -> Op {
    Op::Get("docs/d1")
}

#[test]
fn auth_contexts() {
    let n = run_table(vec![
        c(
            "allow read: if request.auth != null;",
            authenticated("alice"),
            doc(),
            get(),
            true,
        ),
        c(
            "allow read: if request.auth != null;",
            unauthenticated(),
            doc(),
            get(),
            false,
        ),
        c(
            "allow read: if request.auth.uid == resource.data.owner;",
            authenticated("alice"),
            doc(),
            get(),
            true,
        ),
        c(
            "allow read: if request.auth.uid == resource.data.owner;",
            authenticated("bob"),
            doc(),
            get(),
            false,
        ),
        // Unauthenticated: request.auth.uid is an error (null has no fields): denied.
        c(
            "allow read: if request.auth.uid == resource.data.owner;",
            unauthenticated(),
            doc(),
            get(),
            false,
        ),
        c(
            "allow read: if request.auth.token.admin == true;",
            authenticated_with("x", json!({"admin": true})),
            doc(),
            get(),
            true,
        ),
        c(
            "allow read: if request.auth.token.admin == true;",
            authenticated("x"),
            doc(),
            get(),
            false,
        ),
        c(
            "allow read: if request.auth.token.email.matches('.*@example[.]com');",
            authenticated_with("x", json!({"email": "a@example.com"})),
            doc(),
            get(),
            true,
        ),
        c(
            "allow read: if request.auth.token.email.matches('.*@example[.]com');",
            authenticated_with("x", json!({"email": "a@example.com.evil"})),
            doc(),
            get(),
            false,
        ),
    ]);
    assert_eq!(n, 9);
}

#[test]
fn error_semantics() {
    let u = || authenticated("alice");
    let n = run_table(vec![
        // error || true allows; true || error allows.
        c(
            "allow read: if resource.data.missing == 1 || true;",
            u(),
            doc(),
            get(),
            true,
        ),
        c(
            "allow read: if true || resource.data.missing == 1;",
            u(),
            doc(),
            get(),
            true,
        ),
        // error && x denies, error && false denies; error at the top denies.
        c(
            "allow read: if resource.data.missing == 1 && true;",
            u(),
            doc(),
            get(),
            false,
        ),
        c(
            "allow read: if !(resource.data.missing == 1 && false);",
            u(),
            doc(),
            get(),
            true,
        ),
        c(
            "allow read: if !(false && resource.data.missing == 1);",
            u(),
            doc(),
            get(),
            true,
        ),
        c(
            "allow read: if !(resource.data.missing == 1 || false);",
            u(),
            doc(),
            get(),
            false,
        ),
        c(
            "allow read: if resource.data.missing;",
            u(),
            doc(),
            get(),
            false,
        ),
        c(
            "allow read: if !resource.data.missing;",
            u(),
            doc(),
            get(),
            false,
        ),
        // A non-boolean operand of && is an error, absorbed by || true.
        c(
            "allow read: if ('x' && true) || true;",
            u(),
            doc(),
            get(),
            true,
        ),
        c("allow read: if 'x' && true;", u(), doc(), get(), false),
        c("allow read: if 1;", u(), doc(), get(), false),
        // Division by zero, overflow: errors.
        c(
            "allow read: if 1 / 0 == 0 || resource.data.n == 3;",
            u(),
            doc(),
            get(),
            true,
        ),
        c("allow read: if 1 / 0 == 0;", u(), doc(), get(), false),
        c(
            "allow read: if 9223372036854775807 + 1 > 0;",
            u(),
            doc(),
            get(),
            false,
        ),
        c(
            "allow read: if -9223372036854775808 - 1 < 0;",
            u(),
            doc(),
            get(),
            false,
        ),
        c("allow read: if 1.0 / 0 > 1000000;", u(), doc(), get(), true),
        // Ternary: error condition is an error, not the else branch.
        c(
            "allow read: if resource.data.missing ? false : true;",
            u(),
            doc(),
            get(),
            false,
        ),
        c(
            "allow read: if resource.data.n == 3 ? true : false;",
            u(),
            doc(),
            get(),
            true,
        ),
        c(
            "allow read: if resource.data.n == 4 ? true : resource.data.f == 2.5;",
            u(),
            doc(),
            get(),
            true,
        ),
        // A later allow is not spoiled by an earlier error.
        c(
            "allow read: if resource.data.missing; allow get: if true;",
            u(),
            doc(),
            get(),
            true,
        ),
        // Type error in a comparison.
        c(
            "allow read: if resource.data.n < 'x';",
            u(),
            doc(),
            get(),
            false,
        ),
        c(
            "allow read: if !(resource.data.n < 'x');",
            u(),
            doc(),
            get(),
            false,
        ),
        c(
            "allow read: if resource.data.nul == null;",
            u(),
            doc(),
            get(),
            true,
        ),
    ]);
    assert_eq!(n, 23);
}

#[test]
fn numbers_and_equality() {
    let u = || authenticated("alice");
    let n = run_table(vec![
        c("allow read: if 1 == 1.0;", u(), doc(), get(), true),
        c("allow read: if resource.data.n == 3.0;", u(), doc(), get(), true),
        c("allow read: if [1] == [1.0];", u(), doc(), get(), false),
        c("allow read: if [1, 2] == [1, 2];", u(), doc(), get(), true),
        c("allow read: if {'a': 1} == {'a': 1};", u(), doc(), get(), true),
        c("allow read: if 3 / 2 == 1;", u(), doc(), get(), true),
        c("allow read: if 3.0 / 2 == 1.5;", u(), doc(), get(), true),
        c("allow read: if 7 % 3 == 1;", u(), doc(), get(), true),
        c("allow read: if resource.data.n + 0.5 == 3.5;", u(), doc(), get(), true),
        c("allow read: if resource.data.big > 9007199254740992;", u(), doc(), get(), true),
        c("allow read: if resource.data.nan == resource.data.nan;", u(), doc(), get(), false),
        c("allow read: if resource.data.nan != resource.data.nan;", u(), doc(), get(), true),
        c("allow read: if math.isNaN(resource.data.nan);", u(), doc(), get(), true),
        c("allow read: if -resource.data.n == -3;", u(), doc(), get(), true),
        c("allow read: if int('42') == 42 && float(1) == 1.0 && string(1.5) == '1.5';", u(), doc(), get(), true),
        c("allow read: if resource.data.n is int && resource.data.f is float && resource.data.n is number;", u(), doc(), get(), true),
        c("allow read: if resource.data.n is string;", u(), doc(), get(), false),
        c("allow read: if resource.data.tags is list && resource.data.m is map && resource.data.when is timestamp;", u(), doc(), get(), true),
        c("allow read: if resource.data.ref is path && resource.data.ref == /databases/(default)/documents/users/alice;", u(), doc(), get(), true),
        c("allow read: if math.abs(-2) == 2 && math.floor(2.7) == 2 && math.ceil(2.1) == 3 && math.round(2.5) == 3 && math.sqrt(4) == 2 && math.pow(2, 3) == 8;", u(), doc(), get(), true),
        c("allow read: if math.isInfinite(1.0 / 0);", u(), doc(), get(), true),
    ]);
    assert_eq!(n, 21);
}

#[test]
fn strings() {
    let u = || authenticated("alice");
    let n = run_table(vec![
        c("allow read: if resource.data.emoji.size() == 3;", u(), doc(), get(), true),
        c("allow read: if 'ABC'.lower() == 'abc' && 'abc'.upper() == 'ABC';", u(), doc(), get(), true),
        c("allow read: if '  x '.trim() == 'x';", u(), doc(), get(), true),
        c("allow read: if 'abc'.matches('b');", u(), doc(), get(), false),
        c("allow read: if 'abc'.matches('a.c');", u(), doc(), get(), true),
        c("allow read: if 'abc'.matches('a|abc');", u(), doc(), get(), true),
        c("allow read: if 'abc'.matches('(');", u(), doc(), get(), false),
        c("allow read: if 'a,b,c'.split(',') == ['a', 'b', 'c'];", u(), doc(), get(), true),
        c("allow read: if 'a1b22'.replace('[0-9]+', '#') == 'a#b#';", u(), doc(), get(), true),
        c("allow read: if 'ab' + 'cd' == 'abcd';", u(), doc(), get(), true),
        c("allow read: if 'a' < 'b' && 'B' < 'a';", u(), doc(), get(), true),
        c("allow read: if 'é'.toUtf8().size() == 2;", u(), doc(), get(), true),
        c("allow read: if hashing.md5('').toHexString() == 'D41D8CD98F00B204E9800998ECF8427E';", u(), doc(), get(), true),
        c("allow read: if hashing.sha256('abc'.toUtf8()).size() == 32;", u(), doc(), get(), true),
        c("allow read: if hashing.crc32('123456789').size() == 4 && hashing.crc32c('x').size() == 4;", u(), doc(), get(), true),
    ]);
    assert_eq!(n, 15);
}

#[test]
fn collections() {
    let u = || authenticated("alice");
    let n = run_table(vec![
        c("allow read: if 'a' in resource.data.tags;", u(), doc(), get(), true),
        c("allow read: if 'z' in resource.data.tags;", u(), doc(), get(), false),
        c("allow read: if 'x' in resource.data.m;", u(), doc(), get(), true),
        c("allow read: if resource.data.tags.size() == 2 && resource.data.tags[1] == 'b';", u(), doc(), get(), true),
        c("allow read: if resource.data.tags[5] == 'b';", u(), doc(), get(), false),
        c("allow read: if resource.data.tags[0:1] == ['a'];", u(), doc(), get(), true),
        c("allow read: if resource.data.tags.hasAll(['a']) && resource.data.tags.hasAny(['z', 'b']) && resource.data.tags.hasOnly(['a', 'b', 'c']);", u(), doc(), get(), true),
        c("allow read: if resource.data.tags.hasOnly(['a']);", u(), doc(), get(), false),
        c("allow read: if resource.data.tags.concat(['c']).size() == 3 && resource.data.tags.removeAll(['a']) == ['b'];", u(), doc(), get(), true),
        c("allow read: if resource.data.tags.join('-') == 'a-b';", u(), doc(), get(), true),
        c("allow read: if resource.data.tags.toSet() == ['b', 'a', 'b'].toSet();", u(), doc(), get(), true),
        c("allow read: if ['a', 'b'].toSet().union(['c'].toSet()).size() == 3 && ['a', 'b'].toSet().intersection(['b'].toSet()) == ['b'].toSet() && ['a', 'b'].toSet().difference(['a'].toSet()) == ['b'].toSet();", u(), doc(), get(), true),
        c("allow read: if resource.data.m.keys() == ['x', 'y'] && resource.data.m.size() == 2 && resource.data.m.values().size() == 2;", u(), doc(), get(), true),
        c("allow read: if resource.data.m.get('nope', 7) == 7 && resource.data.m.get('x', 7) == 1;", u(), doc(), get(), true),
        c("allow read: if resource.data.m.get(['y', 'z'], false);", u(), doc(), get(), true),
        c("allow read: if resource.data.m.y.z;", u(), doc(), get(), true),
        c("allow read: if resource.data['m']['y']['z'];", u(), doc(), get(), true),
        c("allow read: if resource.data.m.nope.z;", u(), doc(), get(), false),
    ]);
    assert_eq!(n, 18);
}

#[test]
fn map_diff_on_update() {
    let stored =
        || Store::default().with("docs/d1", json!({"owner": "alice", "title": "t", "n": 1}));
    let n = run_table(vec![
        c("allow update: if request.resource.data.diff(resource.data).affectedKeys().hasOnly(['title']);", authenticated("alice"), stored(), Op::Update("docs/d1", json!({"owner": "alice", "title": "u", "n": 1})), true),
        c("allow update: if request.resource.data.diff(resource.data).affectedKeys().hasOnly(['title']);", authenticated("alice"), stored(), Op::Update("docs/d1", json!({"owner": "bob", "title": "u", "n": 1})), false),
        c("allow update: if request.resource.data.diff(resource.data).addedKeys() == ['x'].toSet();", authenticated("alice"), stored(), Op::Update("docs/d1", json!({"owner": "alice", "title": "t", "n": 1, "x": 0})), true),
        c("allow update: if request.resource.data.diff(resource.data).removedKeys() == ['n'].toSet();", authenticated("alice"), stored(), Op::Update("docs/d1", json!({"owner": "alice", "title": "t"})), true),
        c("allow update: if request.resource.data.diff(resource.data).unchangedKeys().hasAll(['owner', 'n']) && request.resource.data.diff(resource.data).changedKeys() == ['title'].toSet();", authenticated("alice"), stored(), Op::Update("docs/d1", json!({"owner": "alice", "title": "v", "n": 1.0})), true),
    ]);
    assert_eq!(n, 5);
}

#[test]
fn time() {
    let u = || authenticated("alice");
    let n = run_table(vec![
        c("allow read: if request.time > resource.data.when;", u(), doc(), get(), true),
        c("allow read: if request.time - resource.data.when == duration.value(0, 's');", u(), doc(), get(), false),
        c("allow read: if resource.data.when + duration.value(1, 'h') > resource.data.when;", u(), doc(), get(), true),
        c("allow read: if resource.data.when.year() == 2023 && resource.data.when.month() == 11 && resource.data.when.day() == 14;", u(), doc(), get(), true),
        c("allow read: if resource.data.when.hours() == 22 && resource.data.when.minutes() == 13 && resource.data.when.seconds() == 20;", u(), doc(), get(), true),
        c("allow read: if resource.data.when.toMillis() == 1700000000000;", u(), doc(), get(), true),
        c("allow read: if resource.data.when.date() == timestamp.date(2023, 11, 14);", u(), doc(), get(), true),
        c("allow read: if timestamp.value(1700000000000) == resource.data.when;", u(), doc(), get(), true),
        c("allow read: if duration.value(90, 'm').seconds() == 5400 && duration.time(1, 0, 0, 5).nanos() == 5;", u(), doc(), get(), true),
        c("allow read: if duration.value(1, 'parsec') > duration.value(0, 's');", u(), doc(), get(), false),
        c("allow read: if timestamp.date(2023, 2, 29) != null;", u(), doc(), get(), false),
        c("allow read: if request.time.dayOfWeek() >= 1 && request.time.dayOfWeek() <= 7;", u(), doc(), get(), true),
    ]);
    assert_eq!(n, 12);
}

#[test]
fn functions_let_paths_and_lookups() {
    let store = || {
        doc()
            .with("users/alice", json!({"role": "admin"}))
            .with("users/bob", json!({"role": "reader"}))
    };
    let rules_src = r#"
rules_version = '2';
service cloud.firestore {
  match /databases/{database}/documents {
    function signedIn() { return request.auth != null; }
    function role() {
      let path = /databases/$(database)/documents/users/$(request.auth.uid);
      return get(path).data.role;
    }
    function isOneOf(r, roles) { return r in roles; }
    match /docs/{doc} {
      function isOwner() { return signedIn() && resource.data.owner == request.auth.uid; }
      allow get: if isOwner() || isOneOf(role(), ['admin']);
      allow delete: if exists(/databases/$(database)/documents/users/$(request.auth.uid)) && doc == 'd1';
    }
    match /{path=**}/secret/{id} {
      allow read: if false;
    }
  }
}
"#;
    let rs = rules(rules_src);
    let s = store();
    assert_succeeds(&rs, &s, &authenticated("alice"), get());
    assert_fails(&rs, &s, &authenticated("bob"), get());
    assert_fails(&rs, &s, &authenticated("carol"), get());
    assert_fails(&rs, &s, &unauthenticated(), get());
    assert_succeeds(&rs, &s, &authenticated("bob"), Op::Delete("docs/d1"));
    assert_fails(&rs, &s, &authenticated("carol"), Op::Delete("docs/d1"));
    assert_fails(&rs, &s, &authenticated("bob"), Op::Delete("docs/d2"));
    assert_fails(&rs, &s, &authenticated("alice"), Op::Get("a/b/secret/c"));
    // A stored document whose owner is someone else but the caller is an admin.
    let s2 = s.clone().with("docs/d2", json!({"owner": "zed"}));
    assert_succeeds(&rs, &s2, &authenticated("alice"), Op::Get("docs/d2"));
    assert_fails(&rs, &s2, &authenticated("bob"), Op::Get("docs/d2"));
}

#[test]
fn lookup_budget() {
    // 11 distinct documents: the 11th lookup is an error.
    let mut cond = String::from("allow read: if ");
    for i in 0..11 {
        cond.push_str(&format!(
            "exists(/databases/$(database)/documents/x/d{i}) == false && "
        ));
    }
    cond.push_str("true;");
    let rs = rules(&wrap(&cond));
    assert_fails(&rs, &doc(), &authenticated("a"), get());
    // The same document 11 times counts once.
    let mut same = String::from("allow read: if ");
    for _ in 0..11 {
        same.push_str("exists(/databases/$(database)/documents/x/d0) == false && ");
    }
    same.push_str("true;");
    let rs = rules(&wrap(&same));
    assert_succeeds(&rs, &doc(), &authenticated("a"), get());
}

#[test]
fn methods_and_wildcards() {
    let src = r#"
rules_version = '1';
service cloud.firestore {
  match /databases/{database}/documents {
    match /rooms/{room} {
      allow read;
      allow create: if request.resource.data.name is string && request.resource.data.name.size() < 10;
      allow update: if request.resource.data.name == resource.data.name;
      match /{rest=**} {
        allow get: if rest[0] == 'messages';
      }
    }
  }
}
"#;
    let rs = rules(src);
    let s = Store::default().with("rooms/r1", json!({"name": "one"}));
    let u = authenticated("a");
    assert_succeeds(&rs, &s, &u, Op::Get("rooms/r1"));
    assert_succeeds(&rs, &s, &u, Op::List("rooms"));
    assert_succeeds(&rs, &s, &u, Op::Create("rooms/r2", json!({"name": "two"})));
    assert_fails(&rs, &s, &u, Op::Create("rooms/r2", json!({"name": 2})));
    assert_fails(
        &rs,
        &s,
        &u,
        Op::Create("rooms/r2", json!({"name": "a very long name"})),
    );
    assert_succeeds(
        &rs,
        &s,
        &u,
        Op::Update("rooms/r1", json!({"name": "one", "x": 1})),
    );
    assert_fails(&rs, &s, &u, Op::Update("rooms/r1", json!({"name": "uno"})));
    assert_fails(&rs, &s, &u, Op::Delete("rooms/r1"));
    assert_succeeds(&rs, &s, &u, Op::Get("rooms/r1/messages/m1"));
    assert_fails(&rs, &s, &u, Op::Get("rooms/r1/other/m1"));
}

#[test]
fn recursive_wildcard_versions() {
    let src = |v: &str| {
        format!(
            "rules_version = '{v}'; service cloud.firestore {{ match /databases/{{database}}/documents {{ match /cities/{{city}}/{{rest=**}} {{ allow read: if true; }} }} }}"
        )
    };
    let s = Store::default();
    let u = unauthenticated();
    // Version 1: one or more segments; the city document itself is not matched.
    let v1 = rules(&src("1"));
    assert_fails(&v1, &s, &u, Op::Get("cities/sf"));
    assert_succeeds(&v1, &s, &u, Op::Get("cities/sf/landmarks/l1"));
    // Version 2: zero or more.
    let v2 = rules(&src("2"));
    assert_succeeds(&v2, &s, &u, Op::Get("cities/sf"));
    assert_succeeds(&v2, &s, &u, Op::Get("cities/sf/landmarks/l1"));
}

#[test]
fn compile_errors() {
    let cases: Vec<(String, &str, &str)> = vec![
        (wrap("allow read: if unknownName;"), "42601", "unknown name 'unknownName'"),
        (wrap("allow read: if f();"), "42601", "unknown function 'f'"),
        (wrap("allow read: if 'a'.nope();"), "42601", "unknown method 'nope'"),
        (wrap("allow read: if 'a'.size(1);"), "42601", "does not take"),
        (wrap("allow read: if math.nope(1);"), "42601", "unknown function 'math.nope'"),
        (wrap("function f() { return f(); } allow read: if f();"), "42601", "recursion"),
        // Refused whether or not a rule calls it, as Firebase's compiler does ("Recursive
        // call is not allowed"; hidane-rules agrees), also through another function, a let
        // binding or a nested match's function.
        (wrap("function f() { return f(); } allow read: if true;"), "42601", "calls itself"),
        (wrap("function f(x) { return g(x); } function g(y) { let z = f(y); return z; } allow read: if true;"), "42601", "which calls 'g' again"),
        ("service cloud.firestore { match /databases/{d}/documents { function k() { return true; } match /x/{y} { function k() { return m(); } function m() { return k(); } allow read: if true; } } }".into(), "42601", "recursion"),
        (wrap("function f(a, b, c, d, e, g, h, i) { return true; } allow read: if f(1,2,3,4,5,6,7,8);"), "42601", "limit is 7"),
        (wrap("function f() { let a = 1; let b = 1; let c = 1; let d = 1; let e = 1; let g = 1; let h = 1; let i = 1; let j = 1; let k = 1; let l = 1; return true; } allow read: if f();"), "42601", "limit is 10"),
        (wrap("function f(a) { return true; } allow read: if f();"), "42601", "takes 1 argument"),
        ("service firebase.storage { match /b/{bucket}/o { allow read; } }".into(), "0A000", "not supported"),
        ("rules_version = '1'; service cloud.firestore { match /databases/{d}/documents { match /{p=**}/x { allow read; } } }".into(), "42601", "last segment"),
        ("rules_version = '2'; service cloud.firestore { match /databases/{d}/documents { match /{p=**}/x/{q=**} { allow read; } } }".into(), "0A000", "more than one recursive"),
        ("service cloud.firestore { match /databases/{d}/documents { match /a/{x}/b/{x} { allow read; } } }".into(), "42601", "appears twice in one match path"),
        (wrap("allow read: if 'a\\x00';"), "0A000", "U+0000"),
    ];
    for (src, state, needle) in &cases {
        match docstore_rules::compile(src) {
            Ok(_) => panic!("compiled: {src}"),
            Err(e) => {
                assert_eq!(e.sqlstate(), *state, "{src}: {e}");
                assert!(e.message.contains(needle), "{src}: {e}");
                assert!(e.excerpt.contains('^'));
            }
        }
    }
    // Call depth: 21 nested functions.
    let mut fns = String::new();
    for i in 0..21 {
        fns.push_str(&format!("function f{i}() {{ return f{}(); }} ", i + 1));
    }
    fns.push_str("function f21() { return true; } allow read: if f0();");
    let e = docstore_rules::compile(&wrap(&fns)).unwrap_err();
    assert!(e.message.contains("deeper than 20"), "{e}");
    // 20 is fine.
    let mut ok = String::new();
    for i in 0..19 {
        ok.push_str(&format!("function f{i}() {{ return f{}(); }} ", i + 1));
    }
    ok.push_str("function f19() { return true; } allow read: if f0();");
    assert!(docstore_rules::compile(&wrap(&ok)).is_ok());
}

#[test]
fn error_display_matches_the_docs() {
    let src = wrap("allow read: if 'a'.nope();");
    let e = docstore_rules::compile(&src).unwrap_err();
    assert_eq!(
        e.to_string(),
        "5:22: unknown method 'nope'\n      allow read: if 'a'.nope();\n                     ^^^^^^^^^^"
    );
}

#[test]
fn list_of_a_collection_leaves_the_document_wildcard_unbound() {
    let src = r#"
service cloud.firestore {
  match /databases/{database}/documents {
    match /notes/{note} {
      allow list: if request.query.limit <= 10;
      allow get: if note == 'n1';
    }
    match /drafts/{draft} {
      allow list: if draft == 'x';
    }
  }
}
"#;
    let rs = rules(src);
    let s = Store::default();
    let u = authenticated("a");
    // The harness lists with limit 10.
    assert_succeeds(&rs, &s, &u, Op::List("notes"));
    assert_succeeds(&rs, &s, &u, Op::Get("notes/n1"));
    assert_fails(&rs, &s, &u, Op::Get("notes/n2"));
    // Reading the unbound document wildcard is an error: denied.
    assert_fails(&rs, &s, &u, Op::List("drafts"));
    // Per document (the RLS filter's question), the wildcard is bound.
    assert_succeeds(&rs, &s, &u, Op::List("drafts/x"));
    assert_fails(&rs, &s, &u, Op::List("drafts/y"));
}
