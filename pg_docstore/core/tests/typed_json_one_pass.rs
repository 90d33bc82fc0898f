//! `typed_json::parse` reads text in one pass (`typed_json::parse_with`); this checks it
//! against the two-pass reading it replaced (`json_from_str`, then `from_json`) on texts of
//! every shape: tags first, last, alone, with company, malformed, repeated keys, NUL, depth.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use docstore_core::test_env;
use docstore_core::typed_json::{self, TypedJsonError};
use docstore_core::Value;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::Value as Json;

fn two_passes(text: &str) -> Result<Value, TypedJsonError> {
    typed_json::from_json(&typed_json::json_from_str(text)?)
}

/// Keys: plain, every tag, empty, NUL.
fn key() -> impl Strategy<Value = String> {
    let plain = ["a", "b", "", "\u{0}"];
    let keys: Vec<&str> = plain
        .into_iter()
        .chain(typed_json::VALUE_TAGS)
        .chain(typed_json::TRANSFORM_TAGS)
        .collect();
    prop::sample::select(keys).prop_map(str::to_owned)
}

/// Leaves that fit a tag's argument or do not.
fn leaf() -> impl Strategy<Value = Json> {
    let number = prop::sample::select(vec![
        "0",
        "-1",
        "1.0",
        "1.5",
        "9223372036854775807",
        "9223372036854775808",
        "1e400",
        "-0.0",
        "2e3",
        "37.7",
        "-122.4",
    ])
    .prop_map(|t| serde_json::from_str::<Json>(t).unwrap());
    let string = prop::sample::select(vec![
        "",
        "x",
        "a\u{0}b",
        "2026-11-27T12:00:00.000001Z",
        "2026-11-27T12:00:00.0000001Z",
        "aGk=",
        "not base64!",
        "c/d",
        "c",
        "NaN",
        "-Infinity",
        "-0.0",
    ])
    .prop_map(|s| Json::String(s.to_owned()));
    prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number,
        string,
    ]
}

fn json() -> impl Strategy<Value = Json> {
    leaf().prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
            // Repeated keys in the text: a list of pairs, printed as is.
            prop::collection::vec((key(), inner), 0..4).prop_map(|pairs| {
                let text = format!(
                    "{{{}}}",
                    pairs
                        .iter()
                        .map(|(k, v)| format!("{}:{v}", Json::String(k.clone())))
                        .collect::<Vec<_>>()
                        .join(",")
                );
                // Kept as text: wrapped so the outer printer writes it verbatim.
                Json::String(format!("\u{1}{text}"))
            }),
        ]
    })
}

/// Print, writing the objects with repeated keys (marked strings) as their raw text.
fn print(json: &Json) -> String {
    match json {
        Json::String(s) if s.starts_with('\u{1}') => s[1..].to_owned(),
        Json::Array(items) => format!(
            "[{}]",
            items.iter().map(print).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

#[test]
fn one_pass_reads_as_two_passes() {
    let seed = test_env::seed("typed_json_one_pass::one_pass_reads_as_two_passes", None);
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases: 5_000,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let result = runner.run(&json(), |json| {
        let text = print(&json);
        prop_assert_eq!(typed_json::parse(&text), two_passes(&text), "{}", text);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e} (replay with DOCSTORE_SEED={seed})");
    }
}

#[test]
fn edges_read_as_two_passes() {
    let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    let deep_map = |n: usize| format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n));
    let texts = [
        r#"{"$map": {"$timestamp": 1}}"#.to_owned(),
        r#"{"$map": {"a": 1}, "b": 2}"#.to_owned(),
        r#"{"b": 2, "$map": {"a": 1}}"#.to_owned(),
        r#"{"$map": 1}"#.to_owned(),
        r#"{"$timestamp": "2026-11-27T12:00:00Z", "$timestamp": "2026-11-27T12:00:01Z"}"#
            .to_owned(),
        r#"{"a": 1, "a": 2}"#.to_owned(),
        r#"{"$ref": "c/d", "x": 1}"#.to_owned(),
        r#"{"$geo": [1, {"$double": "-0.0"}]}"#.to_owned(),
        r#"{"$vector": [1, 2.5, {"$double": "NaN"}]}"#.to_owned(),
        r#"{"$increment": 1}"#.to_owned(),
        r#"{"a": 1} x"#.to_owned(),
        r#"{"$serde_json::private::Number": "1"}"#.to_owned(),
        "  [1, 2.0, -0.0, 1e2, 18446744073709551616]  ".to_owned(),
        deep(64),
        deep(65),
        deep(66),
        deep(200),
        deep_map(65),
        deep_map(66),
    ];
    for text in &texts {
        assert_eq!(typed_json::parse(text), two_passes(text), "{text}");
    }
}
/// Counts the whole arrays and maps handed to `value` (the two-pass fallback's answer).
#[derive(Default)]
struct Count(std::cell::Cell<usize>);

impl typed_json::Build for Count {
    type Out = ();
    type Fields = ();
    fn value(&self, value: Value) {
        if matches!(value, Value::Array(_) | Value::Map(_)) {
            self.0.set(self.0.get() + 1);
        }
    }
    fn array(&self, _: Vec<()>) {}
    fn insert(&self, (): &mut (), _: String, (): ()) {}
    fn map(&self, (): ()) {}
}

/// Documents as Postgres prints them are read in the one pass, not read again.
#[test]
fn stored_documents_take_the_one_pass() {
    let texts = [
        r#"{"a": 1, "b": [1, -2, 2.5, 1e300, 18446744073709551615], "c": {"d": null, "e": true}}"#,
        r#"{"t": {"$timestamp": "2026-11-27T12:00:00.000001Z"}, "g": {"$geo": [1, 2]}, "v": {"$vector": [1.0, 2.0]}, "m": {"$map": {"$ref": 1}}, "r": {"$ref": "c/d"}, "x": {"$double": "NaN"}}"#,
    ];
    for text in texts {
        let count = Count::default();
        typed_json::parse_with(text, &count).unwrap();
        assert_eq!(count.0.get(), 0, "{text}");
    }
    // The control: a tagged object with more keys is read again.
    let count = Count::default();
    typed_json::parse_with(r#"{"$ref": "c/d", "x": 1}"#, &count).unwrap();
    assert_eq!(count.0.get(), 1);
}
