//! Differential test: the SQL back end, run by Postgres over the `docstore.rules_*`
//! functions, against the evaluator, on random rules conditions, documents and auths
//! full of edge values (missing fields, 2^53+1 next to floats, NaN-free doubles, non-BMP
//! strings, timestamps, `$map`-escaped keys, nested lists and maps). Both must decide alike.
//!
//! Two tests: `sql_and_evaluator_agree` compares one condition's SQL with the evaluator over
//! requests built in Rust; `policy_and_evaluator_agree` compares whole random rulesets
//! (versions 1 and 2, functions with `let`, nested and recursive `{x=**}` matches, several
//! `allow`s, string/list/map/math/hashing methods, `matches`, `get()`/`exists()` of stored
//! documents) as the extension runs them for plain SQL: `set_rules` installs the ruleset,
//! `docstore.rules_policy(database, path, data)` (the row-level-security function, with
//! `request` and `resource` built in SQL from `docstore.auth` and the row) decides each row,
//! stored first and read back from `docstore.entities` as row-level security passes it, and
//! the evaluator decides the same `list` with the same documents to look up. The same values
//! passed directly once the row is gone again must be false where the `list` rules look
//! documents up (the function decides only stored rows there, docs/security.md).
//!
//! Each test takes a fresh seed per run (`DOCSTORE_SEED` replays one: docstore-core's
//! src/test_env.rs), named in its failure messages (the backend's own output is in the
//! Postgres log, not the test's).

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use pgrx::prelude::*;
    use serde_json::Value as Json;

    use docstore_core::{typed_json, ResourcePath, Timestamp};
    use docstore_rules::eval::{self, Budget, Decision, Document, NoDocuments, Request};
    use docstore_rules::{prim, Method};

    /// xorshift64*: a seed gives the same cases on every run.
    struct Rng(u64);

    impl Rng {
        /// Test `test`'s seed and its generator (xorshift's state must not be 0).
        /// The run's seed comes as the setting `docstore_test.seed` (see `crate::pg_test`).
        fn for_test(test: &str) -> (u64, Rng) {
            let given = Spi::get_one::<String>(
                "select pg_catalog.current_setting('docstore_test.seed', true)",
            )
            .ok()
            .flatten()
            .filter(|s| !s.is_empty());
            let seed = docstore_core::test_env::seed_given(test, given.as_deref());
            (seed, Rng(seed.max(1)))
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
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    /// Rules literals, edge values included.
    const LITERALS: &[&str] = &[
        "0",
        "1",
        "-1",
        "2",
        "1.0",
        "0.5",
        "-0.0",
        "9007199254740993",
        "9007199254740992.0",
        "9223372036854775807",
        "'x'",
        "''",
        "'😀'",
        "'a😀b'",
        "true",
        "false",
        "null",
        "[1, 'x']",
        "[]",
        "{'k': 1}",
        "{}",
        "request.time",
        "duration.value(1, 's')",
        "timestamp.date(2020, 1, 2)",
    ];
    const FIELDS: &[&str] = &[
        "resource.data.a",
        "resource.data.b",
        "resource.data.c",
        "resource.data.m.k",
        "resource.data.missing",
        "resource.id",
        "request.auth.uid",
        "request.auth.token.role",
        "id",
    ];

    fn expr(rng: &mut Rng, depth: usize) -> String {
        if depth == 0 || rng.below(4) == 0 {
            return if rng.below(2) == 0 {
                rng.pick(LITERALS).to_owned()
            } else {
                rng.pick(FIELDS).to_owned()
            };
        }
        let a = expr(rng, depth - 1);
        let b = expr(rng, depth - 1);
        match rng.below(12) {
            0..=3 => {
                let op = rng.pick(&[
                    "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "&&", "||", "in",
                ]);
                format!("({a} {op} {b})")
            }
            4 => format!("!({a})"),
            5 => format!("({a} ? {b} : {})", expr(rng, depth - 1)),
            6 => format!(
                "({a} is {})",
                rng.pick(&[
                    "int",
                    "float",
                    "number",
                    "string",
                    "list",
                    "map",
                    "bool",
                    "null",
                    "timestamp"
                ])
            ),
            7 => format!("({a}).size()"),
            8 => format!("({a}).keys().hasAll([{b}])"),
            9 => format!("int({a})"),
            10 => format!("string({a})"),
            _ => format!("({a} == {b})"),
        }
    }

    /// A typed-JSON document value.
    fn value(rng: &mut Rng, depth: usize) -> Json {
        let pool = [
            r#"0"#,
            r#"1"#,
            r#"-1"#,
            r#"1.0"#,
            r#"0.5"#,
            r#"9007199254740993"#,
            r#"9007199254740992.0"#,
            r#"9223372036854775807"#,
            r#""x""#,
            r#""""#,
            r#""😀""#,
            r#"true"#,
            r#"null"#,
            r#"{"$timestamp": "2020-01-02T00:00:00.000001Z"}"#,
            r#"{"$double": "Infinity"}"#,
            r#"{"$bytes": "AAE="}"#,
            r#"{"$map": {"$ref": 1}}"#,
            r#"{"$geo": [1.5, -2.0]}"#,
        ];
        if depth > 0 && rng.below(5) == 0 {
            return if rng.below(2) == 0 {
                Json::Array((0..rng.below(3)).map(|_| value(rng, depth - 1)).collect())
            } else {
                let mut m = serde_json::Map::new();
                m.insert("k".into(), value(rng, depth - 1));
                Json::Object(m)
            };
        }
        serde_json::from_str(rng.pick(&pool)).unwrap()
    }

    #[pg_test]
    fn sql_and_evaluator_agree() {
        let (seed, mut rng) = Rng::for_test("sql_and_evaluator_agree");
        let (mut compiled, mut allowed, mut cases) = (0, 0, 0);
        let mut disagreements = Vec::new();
        // At least 400 conditions; then on until both outcomes were seen often enough, since
        // how often a random condition allows depends on the seed (one seed gave 20 of 1584).
        let mut conditions = 0;
        while conditions < 400 || ((allowed < 40 || cases - allowed < 40) && conditions < 4000) {
            conditions += 1;
            let condition = expr(&mut rng, 3);
            let source = format!(
                "rules_version = '2'; service cloud.firestore {{ match /databases/{{database}}/documents {{ match /c/{{id}} {{ allow get: if {condition}; }} }} }}"
            );
            let Ok(ruleset) = docstore_rules::compile(&source) else {
                continue;
            };
            compiled += 1;
            let sql = docstore_rules::sql::generate(&ruleset, "request", "resource");
            let get = sql
                .methods
                .iter()
                .find(|m| m.method == Method::Get)
                .unwrap();
            for _ in 0..4 {
                cases += 1;
                let data = document(&mut rng);
                let auth: Option<Json> = match rng.below(3) {
                    0 => None,
                    1 => Some(serde_json::json!({"sub": "u1", "role": "admin"})),
                    _ => Some(serde_json::json!({"sub": "😀", "role": 1})),
                };
                let path = ResourcePath::parse_document("c/d1").unwrap();
                let stored = (rng.below(5) != 0).then(|| Document {
                    path: path.clone(),
                    data: typed_json::map_from_json(&data).unwrap(),
                });
                let request = Request {
                    method: Method::Get,
                    database: "(default)".into(),
                    path: path.clone(),
                    auth: auth.into(),
                    resource: None,
                    time: Timestamp::from_micros(1_700_000_000_000_000).unwrap(),
                    query: None,
                };
                let by_evaluator = eval::evaluate(
                    &ruleset,
                    &request,
                    stored.as_ref(),
                    &NoDocuments,
                    &mut Budget::single(),
                ) == Decision::Allow;
                let request_json = prim::to_json(&eval::request_value(&request)).to_string();
                let resource_json = match &stored {
                    Some(_) => prim::to_json(&prim::document("(default)", "c/d1", &data).unwrap())
                        .to_string(),
                    None => "null".to_owned(),
                };
                let by_sql = Spi::get_one_with_args::<bool>(
                    &format!(
                        "select {} from (select $1::jsonb as request, $2::jsonb as resource) r",
                        get.expression
                    ),
                    &[request_json.as_str().into(), resource_json.as_str().into()],
                )
                .unwrap()
                .unwrap();
                allowed += usize::from(by_evaluator);
                if by_sql != by_evaluator {
                    disagreements.push(format!(
                        "{condition} | resource {resource_json} | request {request_json}: sql {by_sql}, evaluator {by_evaluator}"
                    ));
                }
            }
        }
        assert_agree(seed, &disagreements, cases, 5);
        // The generator must exercise both outcomes on many compiled rulesets, or this test
        // could not fail.
        assert!(
            compiled > conditions / 2,
            "only {compiled} of {conditions} conditions compiled (DOCSTORE_SEED={seed})"
        );
        assert!(
            allowed >= 40 && cases - allowed >= 40,
            "{allowed} of {cases} allowed (DOCSTORE_SEED={seed})"
        );
        pgrx::notice!(
            "rules SQL differential (DOCSTORE_SEED={seed}): {compiled} conditions, {cases} cases \
             compared, {allowed} allowed"
        );
    }

    /// More expression forms for whole rulesets: methods of every type, `matches`, `math`,
    /// `hashing`, slices, lookups of stored documents and the ruleset's function `f`.
    fn rich(rng: &mut Rng, depth: usize, names: &[&'static str], function: bool) -> String {
        if depth == 0 || rng.below(4) == 0 {
            return match rng.below(3) {
                0 => rng.pick(LITERALS).to_owned(),
                1 => rng.pick(FIELDS).to_owned(),
                _ => rng.pick(names).to_owned(),
            };
        }
        let a = rich(rng, depth - 1, names, function);
        let b = rich(rng, depth - 1, names, function);
        match rng.below(30) {
            0..=4 => {
                let op = rng.pick(&[
                    "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "&&", "||", "in",
                ]);
                format!("({a} {op} {b})")
            }
            5 => format!("!({a})"),
            6 => format!("({a} ? {b} : {})", rich(rng, depth - 1, names, function)),
            7 => format!(
                "({a} is {})",
                rng.pick(&["int", "float", "number", "string", "list", "map", "bool", "path"])
            ),
            8 => format!(
                "string({a}).matches('{}')",
                rng.pick(&["x", ".*", "[a-z]+", "a.b", "\\\\d+", "(x|😀)*", "["])
            ),
            9 => format!(
                "string({a}).{}",
                rng.pick(&[
                    "lower()",
                    "upper()",
                    "trim()",
                    "size()",
                    "split('x')",
                    "replace('x', 'yy')",
                    "toUtf8().size()",
                ])
            ),
            10 => format!(
                "({a}).{}([{b}])",
                rng.pick(&["hasAny", "hasAll", "hasOnly", "concat", "removeAll"])
            ),
            11 => format!("({a}).toSet().size()"),
            12 => format!("({a}).join(',')"),
            13 => format!("({a}).get('k', {b})"),
            14 => format!("({a}).get(['k', 'k'], {b})"),
            15 => format!(
                "({a}).diff({b}).{}().size()",
                rng.pick(&["affectedKeys", "addedKeys", "removedKeys", "changedKeys"])
            ),
            16 => format!("({a}).values().size()"),
            17 => format!(
                "math.{}({a})",
                rng.pick(&[
                    "abs",
                    "floor",
                    "ceil",
                    "round",
                    "sqrt",
                    "isNaN",
                    "isInfinite"
                ])
            ),
            18 => format!("math.pow({a}, {b})"),
            19 => format!(
                "hashing.{}({a}) == hashing.{}({b})",
                rng.pick(&["sha256", "md5", "crc32", "crc32c"]),
                rng.pick(&["sha256", "md5", "crc32", "crc32c"])
            ),
            20 => format!("({a})[{b}]"),
            21 => format!("({a})[0:1]"),
            22 => format!("exists(/databases/$(database)/documents/c/$({a}))"),
            23 => format!(
                "get(/databases/$(database)/documents/c/$({})).data.{}",
                rng.pick(&["'d1'", "'d2'", "id"]),
                rng.pick(&["a", "b", "m", "missing"])
            ),
            24 if function => format!("f({a})"),
            25 => format!("({a}).size() > 1"),
            26 => format!("timestamp.date(2020, 1, 2) + duration.value({a}, 's') > request.time"),
            27 => format!("int({a}) + float({b})"),
            _ => format!("({a} == {b})"),
        }
    }

    /// Conditions real rulesets use, often true: combined with a random one so that both
    /// outcomes are common (a random condition alone is mostly an error).
    const TYPICAL: &[&str] = &[
        "true",
        "request.auth != null",
        "request.auth.uid == id",
        "resource.data.a is int",
        "resource.data.keys().size() > 1",
        "'k' in resource.data.m",
        "exists(/databases/$(database)/documents/c/d1)",
        "get(/databases/$(database)/documents/c/d2).data.keys().size() > 0",
        "request.auth.token.role == 'admin'",
    ];

    /// The condition of one `allow`: a random one, alone or combined with a typical one.
    fn condition(rng: &mut Rng, names: &[&'static str], function: bool) -> String {
        let random = rich(rng, 3, names, function);
        let typical = rng.pick(TYPICAL);
        match rng.below(4) {
            0 => random,
            1 => format!("{random} || {typical}"),
            2 => format!("{typical} && ({random} || !({random}))"),
            _ => format!("{typical} && !({random} == false)"),
        }
    }

    /// A random ruleset over `/c/{id}` and deeper paths.
    fn ruleset(rng: &mut Rng) -> String {
        let v2 = rng.below(3) != 0;
        let function = rng.below(2) == 0;
        let mut body = String::new();
        if function {
            let y = rich(rng, 2, &["x"], false);
            let ret = rich(rng, 2, &["x", "y"], false);
            body.push_str(&format!("function f(x) {{ let y = {y}; return {ret}; }}\n"));
        }
        let top = &["id"];
        body.push_str(&format!(
            "match /c/{{id}} {{ allow list: if {};",
            condition(rng, top, function)
        ));
        if rng.below(2) == 0 {
            let method = rng.pick(&["read", "list", "get, list", "write", "read, write"]);
            body.push_str(&format!(
                " allow {method}: if {};",
                rich(rng, 3, top, function)
            ));
        }
        if rng.below(2) == 0 {
            body.push_str(&format!(
                " match /s/{{sub}} {{ allow list: if {}; }}",
                condition(rng, &["id", "sub"], function)
            ));
        }
        body.push_str(" }\n");
        match rng.below(3) {
            0 => body.push_str(&format!(
                "match /{{rest=**}} {{ allow list: if {}; }}\n",
                condition(rng, &["rest"], function)
            )),
            1 => body.push_str(&format!(
                "match /c/{{id}}/{{rest=**}} {{ allow read: if {}; }}\n",
                condition(rng, &["id", "rest"], function)
            )),
            _ => {}
        }
        format!(
            "rules_version = '{}';\nservice cloud.firestore {{ match /databases/{{database}}/documents {{\n{body}}} }}",
            if v2 { 2 } else { 1 }
        )
    }

    /// Stored documents the rules look up (`get`/`exists`), as the evaluator reads them.
    struct Stored(std::collections::HashMap<ResourcePath, docstore_core::value::Map>);

    impl eval::Documents for Stored {
        fn get(&self, path: &ResourcePath) -> Option<docstore_core::value::Map> {
            self.0.get(path).cloned()
        }
        fn get_after(&self, path: &ResourcePath) -> Option<docstore_core::value::Map> {
            self.get(path)
        }
    }

    fn document(rng: &mut Rng) -> Json {
        let mut data = serde_json::Map::new();
        for f in ["a", "b", "c", "m"] {
            if rng.below(4) != 0 {
                data.insert(f.into(), value(rng, 2));
            }
        }
        Json::Object(data)
    }

    /// Fail with the first `shown` of `disagreements` (out of `cases`) if there are any.
    fn assert_agree(seed: u64, disagreements: &[String], cases: usize, shown: usize) {
        assert!(
            disagreements.is_empty(),
            "{} of {cases} cases disagree (DOCSTORE_SEED={seed}), e.g.:\n{}",
            disagreements.len(),
            disagreements[..shown.min(disagreements.len())].join("\n")
        );
    }

    #[pg_test]
    fn policy_and_evaluator_agree() {
        const DB: &str = "rulesdiff";
        const RULESETS: usize = 1000;
        const ROWS: usize = 8;
        let (seed, mut rng) = Rng::for_test("policy_and_evaluator_agree");
        Spi::run("select docstore.create_database('rulesdiff')").unwrap();
        Spi::run("select set_config('docstore.database', 'rulesdiff', true)").unwrap();
        // The documents rules may look up: c/d1 and c/d2 (c/none is missing).
        let mut stored = std::collections::HashMap::new();
        let mut originals = std::collections::HashMap::new();
        for name in ["c/d1", "c/d2"] {
            let data = document(&mut rng);
            originals.insert(ResourcePath::parse_document(name).unwrap(), data.clone());
            Spi::run_with_args(
                "select docstore.set($1, $2::jsonb)",
                &[name.into(), data.to_string().as_str().into()],
            )
            .unwrap();
            stored.insert(
                ResourcePath::parse_document(name).unwrap(),
                typed_json::map_from_json(&data).unwrap(),
            );
        }
        let stored = Stored(stored);
        let now: i64 = Spi::get_one("select (extract(epoch from now()) * 1000000)::bigint")
            .unwrap()
            .unwrap();
        let time = Timestamp::from_micros(now).unwrap();
        let paths = [
            "c/d1",
            "c/none",
            "c/d1/s/x",
            "c/d2/s/d1",
            "other/d1",
            "c/d2/t/u/v/w",
        ];
        let (mut compiled, mut allowed, mut cases, mut refused) = (0, 0, 0, 0);
        let mut disagreements = Vec::new();
        for _ in 0..RULESETS {
            let source = ruleset(&mut rng);
            let Ok(ruleset) = docstore_rules::compile(&source) else {
                continue;
            };
            // A ruleset the extension refuses (e.g. over the lookup limit) is not a case.
            if Spi::run_with_args(
                "select docstore.set_rules($1, 'rulesdiff')",
                &[source.as_str().into()],
            )
            .is_err()
            {
                refused += 1;
                continue;
            }
            compiled += 1;
            // Whether the `list` rule reads other documents (get()/exists() in its SQL).
            let looks_up = docstore_rules::sql::generate(&ruleset, "request", "resource")
                .methods
                .iter()
                .any(|m| m.method == Method::List && m.expression.contains("rules_lookup("));
            for _ in 0..ROWS {
                cases += 1;
                let path = ResourcePath::parse_document(rng.pick(&paths)).unwrap();
                let data = document(&mut rng);
                let auth: Option<Json> = match rng.below(3) {
                    0 => None,
                    1 => Some(serde_json::json!({"sub": "d1", "role": "admin"})),
                    _ => Some(serde_json::json!({"sub": "😀", "role": 1})),
                };
                let auth_text = auth.as_ref().map_or("null".to_owned(), Json::to_string);
                Spi::run_with_args(
                    "select set_config('docstore.auth', $1, true)",
                    &[auth_text.as_str().into()],
                )
                .unwrap();
                let request = Request {
                    method: Method::List,
                    database: DB.into(),
                    path: path.clone(),
                    auth: auth.into(),
                    resource: None,
                    time,
                    query: None,
                };
                let row = Document {
                    path: path.clone(),
                    data: typed_json::map_from_json(&data).unwrap(),
                };
                // The policy decides stored rows (docs/security.md): store this one (the rules
                // may look it up too), decide it as row-level security does, then restore the
                // documents the rules look up.
                Spi::run_with_args(
                    "select docstore.set($1, $2::jsonb)",
                    &[
                        path.to_string().as_str().into(),
                        data.to_string().as_str().into(),
                    ],
                )
                .unwrap();
                let mut with_row = stored.0.clone();
                with_row.insert(path.clone(), row.data.clone());
                let by_evaluator = eval::evaluate(
                    &ruleset,
                    &request,
                    Some(&row),
                    &Stored(with_row),
                    &mut Budget::single(),
                ) == Decision::Allow;
                let by_policy = Spi::get_one_with_args::<bool>(
                    "select docstore.rules_policy(database_id, path, data) from docstore.entities \
                     where database_id = 'rulesdiff' and path = $1",
                    &[path.to_string().as_str().into()],
                )
                .unwrap()
                .unwrap_or(false);
                allowed += usize::from(by_evaluator);
                if by_policy != by_evaluator {
                    disagreements.push(format!(
                        "{source}\n  row {path} {data} auth {auth_text}: policy {by_policy}, evaluator {by_evaluator}"
                    ));
                }
                if let Some(original) = originals.get(&path) {
                    Spi::run_with_args(
                        "select docstore.set($1, $2::jsonb)",
                        &[
                            path.to_string().as_str().into(),
                            original.to_string().as_str().into(),
                        ],
                    )
                    .unwrap();
                } else {
                    Spi::run_with_args(
                        "select docstore.delete($1)",
                        &[path.to_string().as_str().into()],
                    )
                    .unwrap();
                    // Not stored any more: called directly with the same values, a rule that
                    // reads other documents denies (it decides stored rows only), one that
                    // reads none decides the values as before.
                    let made_up = Spi::get_one_with_args::<bool>(
                        "select docstore.rules_policy('rulesdiff', $1, $2::jsonb)",
                        &[
                            path.to_string().as_str().into(),
                            data.to_string().as_str().into(),
                        ],
                    )
                    .unwrap()
                    .unwrap_or(false);
                    let expected = by_evaluator && !looks_up;
                    if made_up != expected {
                        disagreements.push(format!(
                            "{source}\n  made-up row {path} {data} auth {auth_text}: policy {made_up}, expected {expected}"
                        ));
                    }
                }
            }
        }
        assert_agree(seed, &disagreements, cases, 3);
        // Both outcomes on many installed rulesets, or this test could not fail.
        assert!(
            compiled > RULESETS / 2,
            "only {compiled} of {RULESETS} rulesets installed ({refused} refused by set_rules; \
             DOCSTORE_SEED={seed})"
        );
        assert!(
            allowed > cases / 20 && allowed < cases - cases / 20,
            "{allowed} of {cases} allowed (DOCSTORE_SEED={seed})"
        );
        pgrx::notice!(
            "rules policy differential (DOCSTORE_SEED={seed}): {compiled} rulesets, {cases} rows \
             compared, {allowed} allowed"
        );
    }
}
