//! Differential test: our evaluator against the hidane-rules crate (an independent
//! implementation measured against Firebase's emulator) on random (ruleset, auth, document,
//! operation) cases from a small grammar. Each test takes a fresh seed per run (printed at its
//! start; `DOCSTORE_SEED=<seed>` replays it: docstore-core's src/test_env.rs).
//!
//! Run with `-- --nocapture` to see the agreement figures and the disagreements.

#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::*;
use docstore_rules::eval::Decision;
use serde_json::{json, Value as Json};

/// xorshift64*: deterministic given its seed, no dependency.
struct Rng(u64);

impl Rng {
    /// The generator of test `test`'s seed (xorshift's state must not be 0).
    fn for_test(test: &str) -> Rng {
        Rng(docstore_core::test_env::seed(test, None).max(1))
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const FIELDS: [&str; 5] = ["a", "b", "owner", "n", "tags"];

/// Expressions whose values are probed one by one (`probe_values_agree`).
const PROBED: &[&str] = &[
    "'a,,b,'.split(',')",
    "''.split(',')",
    "'abc'.replace('b', '$1')",
    "'ÉCOLE'.lower()",
    "' \\t x '.trim()",
    "'٣'.matches('\\\\d')",
    "'ab'.matches('a')",
    "'a\\nb'.matches('a.b')",
    "string(1000000000000000000000.0)",
    "string(0.0001)",
    "string(-0.0)",
    "string(100.0)",
    "string(1.0 / 0)",
    "float('1e3')",
    "float(' 2 ')",
    "int(' 7')",
    "int(-2.9)",
    "int(1000000000000000000000000000000.0)",
    "-0.0 == 0",
    "math.round(-2.5)",
    "math.sqrt(-1.0)",
    "math.pow(2, 0.5)",
    "math.abs(-0.0)",
    "math.ceil(-0.5)",
    "9007199254740993 == 9007199254740992.0",
    "9007199254740993 > 9007199254740992.0",
    "{'a': 1} == {'a': 1.0}",
    "[1, 2].toSet() == [2.0, 1].toSet()",
    "[1, 2].toSet().hasAll([1.0])",
    "[1, 2].hasAll([1.0])",
    "1.0 in [1]",
    "1 in [1, 2].toSet()",
    "{'b': 1, 'a': 2, 'é': 3, 'Z': 4}.keys()",
    "{'b': 1, 'a': 2}.values()",
    "duration.value(1, 'd').seconds()",
    "duration.value(-1500, 'ms').nanos()",
    "duration.value(-1500, 'ms').seconds()",
    "timestamp.date(2024, 12, 31).dayOfYear()",
    "timestamp.date(1970, 1, 1).dayOfWeek()",
    "timestamp.value(-1).toMillis()",
    "timestamp.value(-1).nanos()",
    "request.time.date() == request.time",
    "request.time.time()",
    "(request.time + duration.value(1, 'h')).hours()",
    "7 / -2",
    "-7 % 2",
    "7.5 % 2",
    "-9223372036854775808 / -1",
    "'abc' < 'abd'",
    "'a' + 1",
    "[1] + [2]",
    "b'\\x01\\x02'.toBase64()",
    "b'\\xff'.size()",
    "hashing.crc32('abc')",
    "hashing.crc32c(b'')",
    "latlng.value(1, 2).latitude()",
    "latlng.value(91, 0)",
    "/databases/x/documents/a/b[3]",
    "string(/databases/x/documents/a%20b)",
    "path('a/b') == /a/b",
    "{'a': 1}.get('a', 0)",
    "{'a': {'b': 2}}.get(['a', 'c'], 5)",
    "[1, 'a', null].join('-')",
    "[1, 2, 1].removeAll([1])",
    "['a'].concat(['b']).size()",
    "['a', 'b'].hasOnly([])",
    "[].hasAll([])",
    "{'a': 1, 'b': 2}.diff({'a': 1, 'c': 3}).affectedKeys()",
    "{'a': 1}.diff({'a': 1.0}).changedKeys()",
    "resource.data.a == resource.data.b",
    "resource.data.a + resource.data.b",
    "resource.data.n * 3 - resource.data.n",
    "string(resource.data.a)",
    "resource.data.a.toMillis()",
    "(request.time - resource.data.a) < duration.value(1, 'd')",
    "resource.data.a + duration.value(90, 'm')",
    "resource.data.tags.toSet().union(['a', 1.0].toSet()).size()",
    "resource.data.tags.toSet() == request.resource.data.tags.toSet()",
    "resource.data.tags.removeAll(['a']).concat([1])",
    "resource.data.owner.split('l')",
    "resource.data.owner.replace('[aeiou]', '$0$0')",
    "math.round(resource.data.n)",
    "resource.data.n / resource.data.b",
    "resource.data.n % 2 == 1",
    "resource.data.a in resource.data.tags",
    "request.resource.data.diff(resource.data).unchangedKeys().size()",
    "resource.data.keys().join('')",
    "resource.data.b.year()",
    "float(resource.data.a) == resource.data.a",
    "int(resource.data.owner)",
    "hashing.md5(resource.data.owner).toHexString()",
    "resource.data.a is timestamp && resource.data.a < request.time",
    "resource.data.tags[0:1]",
    "resource.data.tags[-1]",
    "-resource.data.n",
    "resource.data.owner.size() == 2",
    "resource.__name__ == /databases/$(database)/documents/docs/$(doc)",
    "resource.data.a == /databases/$(database)/documents/users/alice",
];

fn value(r: &mut Rng, depth: usize) -> Json {
    match r.below(if depth == 0 { 9 } else { 11 }) {
        0 => Json::Null,
        1 => json!(r.chance(50)),
        2 => json!(*r.pick(&[
            0_i64,
            1,
            -1,
            3,
            9_007_199_254_740_992,
            9_007_199_254_740_993,
            i64::MAX,
            i64::MIN
        ])),
        3 => match r.below(6) {
            0 => json!({"$double": "NaN"}),
            1 => json!({"$double": "Infinity"}),
            2 => json!({"$double": "-0.0"}),
            _ => json!(*r.pick(&[1.0_f64, 1.5, 0.5, 3.0, 9_007_199_254_740_992.0, -2.5])),
        },
        4..=6 => json!(*r.pick(&["", "a", "alice", "bob", "A", "é", "😀x", "a,b", "Alice"])),
        7 => {
            json!({"$timestamp": *r.pick(&["2023-11-14T22:13:20.000000Z", "2020-01-01T00:00:00.000001Z"])})
        }
        8 => json!({"$ref": "users/alice"}),
        9 => Json::Array((0..r.below(4)).map(|_| value(r, depth - 1)).collect()),
        _ => {
            let mut m = serde_json::Map::new();
            for _ in 0..r.below(4) {
                m.insert((*r.pick(&FIELDS)).to_owned(), value(r, depth - 1));
            }
            Json::Object(m)
        }
    }
}

/// Values that exercise numbers inside collections and equal-looking pairs.
fn tricky(r: &mut Rng) -> Json {
    r.pick(&[
        json!([1, 2]),
        json!([1.0, 2]),
        json!(["a", 1]),
        json!({"a": 1}),
        json!({"a": 1.0}),
        json!(9_007_199_254_740_993_i64),
        json!(9_007_199_254_740_992.0),
        json!("alice"),
        json!("a,l"),
        json!({"$timestamp": "2023-11-14T22:13:20.000000Z"}),
        json!(2),
        json!(0),
        json!(-7),
        json!(i64::MIN),
    ])
    .clone()
}

fn document(r: &mut Rng) -> Json {
    let mut m = serde_json::Map::new();
    for _ in 0..r.below(5) {
        let v = if r.chance(40) { tricky(r) } else { value(r, 2) };
        m.insert((*r.pick(&FIELDS)).to_owned(), v);
    }
    Json::Object(m)
}

fn literal(r: &mut Rng) -> String {
    match r.below(7) {
        0 => r
            .pick(&[
                "0",
                "1",
                "-1",
                "3",
                "9007199254740993",
                "9223372036854775807",
            ])
            .to_string(),
        1 => r.pick(&["1.0", "1.5", "0.5", "3.0"]).to_string(),
        2 => format!("'{}'", r.pick(&["", "a", "alice", "bob", "A", "é", "a,b"])),
        3 => r.pick(&["true", "false"]).to_string(),
        4 => "null".to_owned(),
        5 => format!(
            "['{}', {}]",
            r.pick(&FIELDS),
            r.pick(&["1", "'alice'", "null"])
        ),
        _ => format!(
            "{{'{}': {}}}",
            r.pick(&FIELDS),
            r.pick(&["1", "'a'", "true"])
        ),
    }
}

fn leaf(r: &mut Rng) -> String {
    match r.below(10) {
        0..=2 => literal(r),
        3 | 4 => format!("resource.data.{}", r.pick(&FIELDS)),
        5 => format!("request.resource.data.{}", r.pick(&FIELDS)),
        6 => r
            .pick(&[
                "request.auth.uid",
                "request.auth.token.admin",
                "request.auth",
            ])
            .to_string(),
        7 => r
            .pick(&["doc", "resource.id", "request.method"])
            .to_string(),
        8 => r
            .pick(&["resource.data", "request.resource.data"])
            .to_string(),
        _ => r.pick(&["request.time", "resource"]).to_string(),
    }
}

fn expr(r: &mut Rng, depth: usize) -> String {
    if depth == 0 || r.chance(25) {
        return leaf(r);
    }
    let d = depth - 1;
    match r.below(12) {
        0..=3 => {
            let op = r.pick(&[
                "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "&&", "||", "in", "&&",
                "||", "==",
            ]);
            format!("({} {op} {})", expr(r, d), expr(r, d))
        }
        4 => format!("!({})", expr(r, d)),
        5 => format!("-({})", expr(r, d)),
        6 => format!(
            "({} is {})",
            expr(r, d),
            r.pick(&[
                "string",
                "int",
                "float",
                "number",
                "bool",
                "map",
                "list",
                "timestamp",
                "path",
                "null"
            ])
            .replace("null", "map")
        ),
        7 => format!("({} ? {} : {})", expr(r, d), expr(r, d), expr(r, d)),
        8 => {
            let m = r.pick(&[
                "size()",
                "keys()",
                "lower()",
                "upper()",
                "trim()",
                "toSet()",
                "values()",
                "matches('a.*')",
                "matches('[a-z]+')",
                "split(',')",
                "join(',')",
                "hasAll(['a'])",
                "hasAny(['alice', 1])",
                "hasOnly(['a', 'b'])",
                "get('a', 0)",
                "get(['a', 'b'], null)",
            ]);
            format!("{}.{m}", expr(r, d))
        }
        9 => format!(
            "{}({})",
            r.pick(&[
                "string",
                "int",
                "float",
                "math.abs",
                "math.floor",
                "math.isNaN"
            ]),
            expr(r, d)
        ),
        10 => format!("{}[{}]", expr(r, d), r.pick(&["0", "1", "'a'", "'owner'"])),
        11 if r.chance(50) => r.pick(PROBED).to_string(),
        _ => r
            .pick(&[
                "request.resource.data.diff(resource.data).affectedKeys()",
                "request.resource.data.diff(resource.data).changedKeys().hasOnly(['a'])",
                "resource.data.keys().hasAll(['a'])",
                "exists(/databases/$(database)/documents/users/$(request.auth.uid))",
                "get(/databases/$(database)/documents/users/alice).data.role == 'admin'",
            ])
            .to_string(),
    }
}

/// A condition biased toward being true sometimes: comparisons against values the documents
/// hold, membership, type tests, combined with && || !, and now and then any expression.
fn cond(r: &mut Rng, depth: usize) -> String {
    if depth == 0 {
        return match r.below(6) {
            0 => "true".to_owned(),
            1 => format!("{} == {}", leaf(r), literal(r)),
            2 => format!(
                "'{}' in {}",
                r.pick(&FIELDS),
                r.pick(&["resource.data", "request.resource.data"])
            ),
            3 => format!(
                "{} is {}",
                leaf(r),
                r.pick(&["string", "int", "float", "number", "bool", "map", "list"])
            ),
            4 => format!(
                "{} {} {}",
                leaf(r),
                r.pick(&["==", "!=", "<", ">=", "in"]),
                leaf(r)
            ),
            _ => expr(r, 2),
        };
    }
    match r.below(5) {
        0 => format!("({} && {})", cond(r, depth - 1), cond(r, depth - 1)),
        1 | 2 => format!("({} || {})", cond(r, depth - 1), cond(r, depth - 1)),
        3 => format!("!({})", cond(r, depth - 1)),
        _ => cond(r, 0),
    }
}

fn ruleset(r: &mut Rng) -> String {
    let version = if r.chance(50) { "2" } else { "1" };
    let mut allows = String::new();
    for _ in 0..1 + r.below(3) {
        let methods = r.pick(&[
            "read",
            "write",
            "get",
            "create",
            "update",
            "delete",
            "read, write",
            "get, update",
        ]);
        let c = if r.chance(70) { cond(r, 2) } else { expr(r, 3) };
        allows.push_str(&format!("      allow {methods}: if {c};\n"));
    }
    let recursive = if r.chance(20) {
        "    match /{path=**} { allow get: if resource.data.a == 1; }\n"
    } else {
        ""
    };
    format!(
        "rules_version = '{version}';\nservice cloud.firestore {{\n  match /databases/{{database}}/documents {{\n    match /docs/{{doc}} {{\n{allows}    }}\n{recursive}  }}\n}}\n"
    )
}

fn auth(r: &mut Rng) -> Ctx {
    match r.below(4) {
        0 => unauthenticated(),
        1 => authenticated("alice"),
        2 => authenticated_with("bob", json!({"admin": true})),
        _ => authenticated_with("alice", json!({"admin": false, "n": 1.5})),
    }
}

#[test]
fn evaluator_agrees_with_hidane() {
    let mut r = Rng::for_test("evaluator_agrees_with_hidane");
    let cases = 6000;
    let (mut both, mut agree, mut ours_only, mut theirs_only, mut neither) = (0, 0, 0, 0, 0);
    let mut allowed = 0;
    let mut disagreements = Vec::new();
    for _ in 0..cases {
        let src = ruleset(&mut r);
        let ctx = auth(&mut r);
        let mut store = Store::default();
        if r.chance(60) {
            store = store.with("docs/d1", document(&mut r));
        }
        if r.chance(50) {
            store = store.with("users/alice", json!({"role": *r.pick(&["admin", "user"])}));
        }
        let new = document(&mut r);
        let op = match r.below(5) {
            0 => Op::Get("docs/d1"),
            1 => Op::Create("docs/d1", new),
            2 => Op::Update("docs/d1", new),
            3 => Op::Delete("docs/d1"),
            _ => Op::Get("docs/d1"),
        };
        let ours = docstore_rules::compile(&src);
        let theirs = hidane::compile(&src);
        match (&ours, &theirs) {
            (Ok(rs), Ok(_)) => {
                both += 1;
                let a = decide(rs, &store, &ctx, &op) == Decision::Allow;
                let b = decide_hidane(&src, &store, &ctx, &op).unwrap();
                allowed += usize::from(a);
                if a == b {
                    agree += 1;
                } else {
                    disagreements.push(format!(
                        "ours {a}, hidane {b}\n{src}auth {:?} op {op:?} store {:?}",
                        ctx.auth, store.docs
                    ));
                }
            }
            (Ok(_), Err(e)) => {
                theirs_only += 1;
                if theirs_only <= 3 {
                    eprintln!("hidane refuses, we accept:\n{src}{e}");
                }
            }
            (Err(e), Ok(_)) => {
                ours_only += 1;
                if ours_only <= 3 {
                    eprintln!("we refuse, hidane accepts:\n{src}{e}");
                }
            }
            (Err(_), Err(_)) => neither += 1,
        }
    }
    eprintln!(
        "differential: {cases} cases; both compiled {both}; decisions agree {agree} ({:.2}%), allowed {allowed}; \
         only we refuse {ours_only}, only hidane refuses {theirs_only}, both refuse {neither}",
        100.0 * agree as f64 / both.max(1) as f64
    );
    for d in disagreements.iter().take(12) {
        eprintln!("---\n{d}");
    }
    assert!(both > cases / 2, "too few cases compiled by both: {both}");
    assert!(
        allowed > both / 20,
        "too few allows to be a meaningful test: {allowed}"
    );
    assert_eq!(
        disagreements.len(),
        0,
        "{} disagreements",
        disagreements.len()
    );
    // Both compilers accept and refuse the same rulesets.
    assert_eq!((ours_only, theirs_only), (0, 0));
}

/// Disagreements judged, each with the reason we keep our answer.
const JUDGED: &[(&str, &str)] = &[(
    "(-9223372036854775808 / -1)",
    "hidane wraps to -2^63 as Java's long division does; we report integer overflow as an \
     error, like every other overflow (+ - * neg abs), the semantics the design asks for; \
     the difference can only turn an allow into a deny",
)];

/// Value-level agreement: each probed expression (`@`), on random documents, tested with `is`
/// for every type, compared with itself (false only for an error or NaN) and with a few
/// literals; each probe a separate decision.
#[test]
fn probe_values_agree() {
    let mut r = Rng::for_test("probe_values_agree");
    let probes = [
        "@ is string",
        "@ is int",
        "@ is float",
        "@ is bool",
        "@ is list",
        "@ is map",
        "@ is set",
        "@ is timestamp",
        "@ is duration",
        "@ is path",
        "@ is bytes",
        "@ == @",
        "@ == 1",
        "@ == 2",
        "@ == 'alice'",
        "@ == true",
        "@ == null",
        "@ == []",
        "@ == 0",
        "@ == 'a'",
        "@ == -7",
        "@ == 9007199254740992",
        "@ == ''",
        "@ == 1.0",
        "@ == '1.0'",
        "@ == '1.0E21'",
        "@ == 'NaN'",
        "@ == -3",
        "@ == -4",
        "@ == 3",
        "@ == -1",
        "@ == ['a', '', 'b']",
        "@ == ['']",
        "@ == 'école'",
        "@ == 'x'",
        "@ == -2",
        "@ == 'Infinity'",
        "@ == '1.0E-4'",
        "@ == '-0.0'",
        "@ == 86400",
        "@ == ['a', 'b', 'é', 'Z']",
        "@ == ['Z', 'a', 'b', 'é']",
        "@ == '/databases/x/documents/a b'",
        "@ == 'AQI='",
        "@ == 'AQI'",
        "@ == 366",
        "@ == 4",
        "@ == 1.5",
        "@ == [2]",
        "@ == ['a']",
        "@ == ['b', 'c'].toSet()",
        "@ == ['c', 'b'].toSet()",
        "@ == [].toSet()",
        "@ == 'a-1-null'",
        "@ == '1-a-null'",
        "@ == 1000000000000000000000.0",
        "@ == 9223372036854775807",
        "@ == 'ÉCOLE'",
        "@ == 'École'",
    ];
    let (mut total, mut agree) = (0, 0);
    let mut disagreements = Vec::new();
    for e in PROBED {
        // Expressions of the documents on 12 random pairs; constant ones twice.
        let rounds = if e.contains("resource") { 12 } else { 2 };
        for _ in 0..rounds {
            let store = Store::default().with("docs/d1", document(&mut r));
            let new = document(&mut r);
            let ctx = authenticated("alice");
            for p in probes {
                let cond = p.replace('@', &format!("({e})"));
                let src = format!(
                    "rules_version = '2';\nservice cloud.firestore {{\n  match /databases/{{database}}/documents {{\n    match /docs/{{doc}} {{\n      allow update: if {cond};\n    }}\n  }}\n}}\n"
                );
                let op = Op::Update("docs/d1", new.clone());
                let ours = decide(&rules(&src), &store, &ctx, &op) == Decision::Allow;
                let Some(theirs) = decide_hidane(&src, &store, &ctx, &op) else {
                    panic!("hidane refuses {src}");
                };
                total += 1;
                if ours == theirs {
                    agree += 1;
                } else {
                    disagreements.push(format!(
                        "{cond}: ours {ours}, hidane {theirs}; stored {:?}; new {new}",
                        store.docs
                    ));
                }
            }
        }
    }
    eprintln!(
        "probes: {total}, agree {agree} ({:.2}%)",
        100.0 * agree as f64 / total as f64
    );
    let mut seen = std::collections::BTreeSet::new();
    for d in &disagreements {
        let probe = d.split(": ours").next().unwrap_or("");
        if seen.insert(probe.to_owned()) {
            eprintln!("--- {d}");
        }
    }
    let (known, unknown): (Vec<&String>, Vec<&String>) = disagreements
        .iter()
        .partition(|d| JUDGED.iter().any(|(e, _)| d.contains(e)));
    assert!(unknown.is_empty(), "{unknown:#?}");
    // The judged list cannot go stale: each entry still differs.
    for (e, why) in JUDGED {
        assert!(
            known.iter().any(|d| d.contains(e)),
            "{e} no longer differs ({why})"
        );
    }
}
