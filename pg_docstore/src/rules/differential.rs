//! Differential test: the SQL back end, run by Postgres over the `docstore.rules_*`
//! functions, against the evaluator, on seeded random rules conditions, documents and auths
//! full of edge values (missing fields, 2^53+1 next to floats, NaN-free doubles, non-BMP
//! strings, timestamps, `$map`-escaped keys, nested lists and maps). Both must decide alike.

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use pgrx::prelude::*;
    use serde_json::Value as Json;

    use docstore_core::{typed_json, ResourcePath, Timestamp};
    use docstore_rules::eval::{self, Budget, Decision, Document, NoDocuments, Request};
    use docstore_rules::{prim, Method};

    /// xorshift64*: a fixed seed gives the same cases on every run.
    struct Rng(u64);

    impl Rng {
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
        let mut rng = Rng(0x5EED_1234_ABCD_0001);
        let (mut compiled, mut allowed, mut cases) = (0, 0, 0);
        let mut disagreements = Vec::new();
        for _ in 0..400 {
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
                let mut data = serde_json::Map::new();
                for f in ["a", "b", "c", "m"] {
                    if rng.below(4) != 0 {
                        data.insert(f.into(), value(&mut rng, 2));
                    }
                }
                let data = Json::Object(data);
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
        assert!(
            disagreements.is_empty(),
            "{} of {cases} cases disagree, e.g.:\n{}",
            disagreements.len(),
            disagreements
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
        // The generator must exercise both outcomes on many compiled rulesets, or this test
        // could not fail.
        assert!(compiled > 200, "only {compiled} of 400 conditions compiled");
        assert!(
            allowed > 20 && allowed < cases - 20,
            "{allowed} of {cases} allowed"
        );
    }
}
