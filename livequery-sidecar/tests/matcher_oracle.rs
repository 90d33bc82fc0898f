//! Oracle property test of the matcher: random documents, random targets of every query
//! shape, random multi-write transactions. After each transaction every target's visible
//! result, rebuilt *only* from the deltas it reported (applied to a client-side list as a
//! Firestore client applies `DocumentChange`s), must equal docstore-core's `evaluate` /
//! `aggregate` of its query over the current documents. A target that asks for a requery is
//! given a fresh fetch and its `requeried` delta is applied the same way. Targets join at
//! random positions from snapshots behind (retained transactions handed off with
//! `apply_to`) or ahead of the decoded stream (transactions the snapshot saw are skipped by
//! its horizon), as the session's hand-off does.
//!
//! A fresh seed per run, printed at the start and in a failure; `DOCSTORE_SEED` (or
//! `MATCHER_ORACLE_SEED`, which wins) replays it (docstore-core's src/test_env.rs).
//! `MATCHER_ORACLE_CASES` sets the number of cases (default 1500).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use docstore_core::path::{FieldPath, ResourcePath};
use docstore_core::query::{
    aggregate, evaluate, AggregateFunction, Aggregation, Cursor, Direction, FieldOp, Filter, Limit,
    Order, Query, Selection, Source, UnaryOp,
};
use docstore_core::test_env;
use docstore_core::value::{Map, Timestamp, Value};
use docstore_sidecar::matcher::{
    DocChange, Document, Horizon, Matcher, MatcherConfig, TargetDelta, TargetId, TargetResult,
    TargetSpec, Write,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngSeed, TestRunner};

const PATHS: [&str; 14] = [
    "c/a", "c/b", "c/c", "c/d", "c/e", "c/f", "c/g", "c/h", "c/i", "x/p/c/g", "x/q/c/h", "x/p/c/k",
    "c/a/s/i", "x/p/d/j",
];
const FIELDS: [&str; 4] = ["a", "b", "tags", "m.x"];

fn path(i: usize) -> ResourcePath {
    ResourcePath::parse_document(PATHS[i % PATHS.len()]).unwrap()
}

fn field(i: usize) -> FieldPath {
    FieldPath::parse(FIELDS[i % FIELDS.len()]).unwrap()
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Boolean),
        (-2i64..=3).prop_map(Value::Integer),
        Just(Value::Integer(1 << 53)),
        Just(Value::Integer((1 << 53) + 1)),
        Just(Value::Double(9_007_199_254_740_992.0)),
        Just(Value::Double(1.0)),
        Just(Value::Double(2.5)),
        Just(Value::Double(0.1)),
        Just(Value::Double(-0.0)),
        Just(Value::Double(f64::NAN)),
        // Sums that overflow int64, cancel exactly or meet an infinity.
        Just(Value::Integer(i64::MAX)),
        Just(Value::Double(1e308)),
        Just(Value::Double(-1e308)),
        Just(Value::Double(f64::INFINITY)),
        Just(Value::String("SF".into())),
        Just(Value::String("LA".into())),
        Just(Value::String(String::new())),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => scalar(),
        2 => prop::collection::vec(scalar(), 0..3).prop_map(Value::Array),
        1 => scalar().prop_map(|v| Value::Map(Map::from([("x".to_owned(), v)]))),
    ]
}

fn document() -> impl Strategy<Value = Map> {
    (
        prop::option::weighted(0.8, value()),
        prop::option::weighted(0.7, value()),
        prop::option::weighted(0.5, value()),
        prop::option::weighted(0.3, value()),
    )
        .prop_map(|(a, b, tags, m)| {
            let mut doc = Map::new();
            for (name, v) in [("a", a), ("b", b), ("tags", tags), ("m", m)] {
                if let Some(v) = v {
                    doc.insert(name.to_owned(), v);
                }
            }
            doc
        })
}

fn leaf() -> impl Strategy<Value = Filter> {
    let ops = prop::sample::select(FieldOp::ALL.to_vec());
    let unary = prop::sample::select(UnaryOp::ALL.to_vec());
    prop_oneof![
        6 => (0..FIELDS.len(), ops, value(), prop::collection::vec(scalar(), 1..4)).prop_map(
            |(f, op, v, list)| {
                let operand = if op.takes_list() { Value::Array(list) } else { v };
                Filter::field(field(f), op, operand)
            }
        ),
        1 => (0..FIELDS.len(), unary).prop_map(|(f, op)| Filter::Unary { field: field(f), op }),
        1 => (0..PATHS.len()).prop_map(|p| Filter::field(
            FieldPath::single("__name__"),
            FieldOp::Eq,
            Value::Reference(path(p)),
        )),
    ]
}

fn filter() -> impl Strategy<Value = Option<Filter>> {
    prop_oneof![
        1 => Just(None),
        3 => leaf().prop_map(Some),
        2 => prop::collection::vec(leaf(), 2..4).prop_map(|l| Some(Filter::And(l))),
        1 => prop::collection::vec(leaf(), 2..3).prop_map(|l| Some(Filter::Or(l))),
        1 => (leaf(), prop::collection::vec(leaf(), 2..3))
            .prop_map(|(a, l)| Some(Filter::And(vec![a, Filter::Or(l)]))),
    ]
}

fn source() -> impl Strategy<Value = Source> {
    prop_oneof![
        4 => Just(Source::collection(&ResourcePath::parse_collection("c").unwrap()).unwrap()),
        2 => Just(Source::group(None, "c")),
        1 => Just(Source::group(Some(ResourcePath::parse_document("x/p").unwrap()), "c")),
        1 => Just(Source::collection(&ResourcePath::parse_collection("x/p/c").unwrap()).unwrap()),
    ]
}

fn selection() -> impl Strategy<Value = Selection> {
    let agg = |alias: &str, function| Aggregation {
        alias: alias.to_owned(),
        function,
    };
    prop_oneof![
        6 => Just(Selection::Documents),
        1 => Just(Selection::Fields(vec![field(0), field(3)])),
        1 => Just(Selection::Aggregations(vec![agg("n", AggregateFunction::Count { up_to: None })])),
        2 => Just(Selection::Aggregations(vec![
            agg("n", AggregateFunction::Count { up_to: Some(3) }),
            agg("s", AggregateFunction::Sum(field(0))),
            agg("v", AggregateFunction::Avg(field(1))),
        ])),
    ]
}

fn cursor() -> impl Strategy<Value = Option<Cursor>> {
    prop::option::weighted(
        0.2,
        (prop::collection::vec(scalar(), 1..3), any::<bool>())
            .prop_map(|(values, inclusive)| Cursor { values, inclusive }),
    )
}

/// A query, simplified until core validates it (so few cases are wasted).
fn query() -> impl Strategy<Value = Query> {
    let order = prop::collection::vec((0..FIELDS.len(), any::<bool>()), 0..3);
    let limit = prop_oneof![
        2 => Just(None),
        2 => (0u32..4).prop_map(|n| Some(Limit::First(n))),
        1 => (0u32..4).prop_map(|n| Some(Limit::Last(n))),
    ];
    (
        source(),
        filter(),
        order,
        limit,
        prop_oneof![3 => Just(0u32), 1 => 1u32..3],
        cursor(),
        cursor(),
        selection(),
    )
        .prop_map(
            |(source, filter, order, limit, offset, start, end, selection)| {
                let mut seen = HashSet::new();
                let order_by: Vec<Order> = order
                    .into_iter()
                    .filter(|(f, _)| seen.insert(*f))
                    .map(|(f, asc)| {
                        let direction = if asc {
                            Direction::Ascending
                        } else {
                            Direction::Descending
                        };
                        Order::new(field(f), direction)
                    })
                    .collect();
                let mut q = Query {
                    source,
                    selection,
                    filter,
                    order_by,
                    start,
                    end,
                    offset,
                    limit,
                };
                loop {
                    match q.clone().validate() {
                        Ok(valid) => return valid,
                        Err(_) if q.start.is_some() || q.end.is_some() => {
                            q.start = None;
                            q.end = None;
                        }
                        Err(_) if q.filter.is_some() => q.filter = None,
                        Err(_) if q.limit.is_some() => q.limit = None,
                        Err(e) => panic!("cannot simplify {q:?}: {e}"),
                    }
                }
            },
        )
}

#[derive(Debug, Clone)]
enum Spec {
    Query(Box<Query>),
    Document(usize),
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        8 => query().prop_map(|q| Spec::Query(Box::new(q))),
        1 => (0..PATHS.len()).prop_map(Spec::Document),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Set(usize, Map),
    Delete(usize),
    Truncate,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0..PATHS.len(), document()).prop_map(|(p, d)| Op::Set(p, d)),
        5 => (0..PATHS.len()).prop_map(Op::Delete),
        1 => Just(Op::Truncate),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    initial: Vec<(usize, Map)>,
    specs: Vec<Spec>,
    transactions: Vec<Vec<Op>>,
    slack: u32,
    /// Per target: the position it is added at (modulo transactions + 1) and where its
    /// snapshot is relative to it (negative: retained transactions are handed off to it;
    /// positive: the snapshot already sees transactions not yet decoded).
    joins: Vec<(usize, i64)>,
    /// Write and query partitions of the matcher (the case also runs at 1 x 1, and both runs
    /// must report the same deltas).
    partitions: (u16, u16),
}

fn partitions() -> impl Strategy<Value = (u16, u16)> {
    prop_oneof![Just((2, 2)), Just((1, 2)), Just((2, 1)), Just((3, 2))]
}

fn joins() -> impl Strategy<Value = Vec<(usize, i64)>> {
    prop::collection::vec(
        prop_oneof![
            2 => Just((0usize, 0i64)),
            3 => (0usize..32, -2i64..=2),
        ],
        5,
    )
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((0..PATHS.len(), document()), 0..14),
        prop::collection::vec(spec(), 1..5),
        prop::collection::vec(prop::collection::vec(op(), 1..5), 1..16),
        prop_oneof![Just(1u32), Just(2), Just(16)],
        joins(),
        partitions(),
    )
        .prop_map(
            |(initial, specs, transactions, slack, joins, partitions)| Case {
                initial,
                specs,
                transactions,
                slack,
                joins,
                partitions,
            },
        )
}

/// Sorted windows under churn: plain `order by a [desc] limit [last] n offset k` targets on
/// one collection with slack 1, so the kept rows run out and are refilled often.
fn window_case() -> impl Strategy<Value = Case> {
    let doc = (0i64..6).prop_map(|a| Map::from([("a".to_owned(), Value::Integer(a))]));
    let window =
        (any::<bool>(), any::<bool>(), 1u32..4, 0u32..3).prop_map(|(asc, last, n, offset)| {
            let mut q = Query::new(
                Source::collection(&ResourcePath::parse_collection("c").unwrap()).unwrap(),
            );
            let direction = if asc {
                Direction::Ascending
            } else {
                Direction::Descending
            };
            q.order_by = vec![Order::new(field(0), direction)];
            q.limit = Some(if last {
                Limit::Last(n)
            } else {
                Limit::First(n)
            });
            q.offset = offset;
            Spec::Query(Box::new(q.validate().unwrap()))
        });
    let op = prop_oneof![
        3 => (0..9usize, doc.clone()).prop_map(|(p, d)| Op::Set(p, d)),
        2 => (0..9usize).prop_map(Op::Delete),
    ];
    (
        prop::collection::vec((0..9usize, doc), 4..10),
        prop::collection::vec(window, 1..4),
        prop::collection::vec(prop::collection::vec(op, 1..4), 5..25),
        joins(),
        partitions(),
    )
        .prop_map(|(initial, specs, transactions, joins, partitions)| Case {
            initial,
            specs,
            transactions,
            slack: 1,
            joins,
            partitions,
        })
}

/// The client side of one target: what its deltas built.
#[derive(Debug)]
enum Client {
    Documents(Vec<Document>),
    Aggregate(Map),
}

impl Client {
    fn from_result(result: TargetResult) -> Client {
        match result {
            TargetResult::Documents(docs) => Client::Documents(docs),
            TargetResult::Aggregate(row) => Client::Aggregate(row),
        }
    }

    fn apply(&mut self, delta: &TargetDelta) {
        match (self, delta) {
            (Client::Documents(list), TargetDelta::Changes(changes)) => {
                assert!(!changes.is_empty(), "empty change list reported");
                let mut seen = HashSet::new();
                for change in changes {
                    assert!(
                        seen.insert(change.path().clone()),
                        "{} twice in one event",
                        change.path()
                    );
                    match change {
                        DocChange::Removed { path, old_index } => {
                            assert_eq!(&list[*old_index].path, path, "removed at wrong index");
                            list.remove(*old_index);
                        }
                        DocChange::Added { doc, new_index } => {
                            assert!(list.iter().all(|d| d.path != doc.path), "added twice");
                            list.insert(*new_index, doc.clone());
                        }
                        DocChange::Modified {
                            doc,
                            old_index,
                            new_index,
                        } => {
                            assert_eq!(list[*old_index].path, doc.path, "modified at wrong index");
                            list.remove(*old_index);
                            list.insert(*new_index, doc.clone());
                        }
                    }
                }
            }
            (Client::Aggregate(row), TargetDelta::Aggregate(new)) => {
                assert_ne!(row, new, "unchanged aggregation row reported");
                row.clone_from(new);
            }
            (client, delta) => panic!("delta {delta:?} does not fit client {client:?}"),
        }
    }
}

type Data = BTreeMap<ResourcePath, Document>;

fn pairs(data: &Data) -> Vec<(ResourcePath, Map)> {
    data.values()
        .map(|d| (d.path.clone(), (*d.fields).clone()))
        .collect()
}

/// Rows of a fetch query over the data (whole documents with their update times).
fn fetch(query: &Query, data: &Data) -> Vec<Document> {
    evaluate(query, &pairs(data))
        .into_iter()
        .map(|(path, _)| data[&path].clone())
        .collect()
}

fn check(spec: &Spec, client: &Client, data: &Data, context: &str) {
    match (spec, client) {
        (Spec::Query(query), Client::Aggregate(row)) => {
            assert_eq!(row, &aggregate(query, &pairs(data)), "{context}");
        }
        (Spec::Query(query), Client::Documents(list)) => {
            let expected = evaluate(query, &pairs(data));
            let got: Vec<(ResourcePath, Map)> = list
                .iter()
                .map(|d| (d.path.clone(), (*d.fields).clone()))
                .collect();
            assert_eq!(got, expected, "{context}");
            for d in list {
                assert_eq!(d.update_time, data[&d.path].update_time, "{context}");
            }
        }
        (Spec::Document(p), Client::Documents(list)) => {
            let expected: Vec<Document> = data.get(&path(*p)).cloned().into_iter().collect();
            assert_eq!(list, &expected, "{context}");
        }
        (spec, client) => panic!("{spec:?} has client {client:?}"),
    }
}

/// A snapshot that sees every transaction before `xid` (xids grow with commit order here).
#[derive(Debug)]
struct Before(u32);

impl Horizon for Before {
    fn sees(&self, xid: u32) -> bool {
        xid < self.0
    }
}

fn xid(t: usize) -> u32 {
    100 + u32::try_from(t).unwrap()
}

/// Hand a delta to a target's client; a requery is answered from `state` (the documents at
/// the position the target has reached).
fn deliver(
    matcher: &mut Matcher,
    id: TargetId,
    delta: TargetDelta,
    client: &mut Client,
    state: &Data,
) {
    if delta == TargetDelta::NeedsRequery {
        assert!(matcher.awaiting_requery(id));
        let rows = fetch(&matcher.fetch_query(id).unwrap(), state);
        if let Some(d) = matcher.requeried(id, rows, None).unwrap() {
            client.apply(&d);
        }
    } else {
        client.apply(&delta);
    }
}

/// Run a case at `(write, query)` partitions, checking every target against core after each
/// transaction; returns every delta reported, in order.
fn run(case: &Case, (write_partitions, query_partitions): (u16, u16)) -> Vec<String> {
    let config = MatcherConfig {
        initial_slack: case.slack,
        max_slack: case.slack * 4,
        write_partitions,
        query_partitions,
    };
    let mut log = Vec::new();
    let mut clock = 1_700_000_000_000_000_i64;
    let mut tick = || {
        clock += 1;
        Timestamp::from_micros(clock).unwrap()
    };
    // The documents after each transaction, and the transactions as the matcher gets them.
    let mut data = Data::new();
    for (p, doc) in &case.initial {
        let t = tick();
        data.insert(path(*p), Document::new(path(*p), doc.clone(), t, t));
    }
    let mut states = vec![data.clone()];
    let mut txns: Vec<Vec<Write>> = Vec::new();
    for ops in &case.transactions {
        let mut writes = Vec::new();
        for op in ops {
            match op {
                Op::Set(p, doc) => {
                    let t = tick();
                    let d = Document::new(path(*p), doc.clone(), t, t);
                    data.insert(path(*p), d.clone());
                    writes.push(Write::Set(d));
                }
                Op::Delete(p) => {
                    data.remove(&path(*p));
                    writes.push(Write::Delete(path(*p)));
                }
                Op::Truncate => {
                    data.clear();
                    writes.push(Write::Truncate);
                }
            }
        }
        txns.push(writes);
        states.push(data.clone());
    }
    let n = txns.len();
    let mut matcher = Matcher::new(config);
    let mut clients: Vec<Option<Client>> = case.specs.iter().map(|_| None).collect();
    let mut shown_from = vec![0usize; case.specs.len()];
    for t in 0..=n {
        for (i, spec) in case.specs.iter().enumerate() {
            let (join, offset) = case.joins[i % case.joins.len()];
            if join % (n + 1) != t {
                continue;
            }
            // The target's snapshot sees the first `s` transactions.
            let s = usize::try_from((t as i64 + offset).clamp(0, n as i64)).unwrap();
            let (target, rows) = match spec {
                Spec::Query(query) => {
                    let target = TargetSpec::query((**query).clone()).unwrap();
                    let rows = fetch(&target.fetch_query(&config).unwrap(), &states[s]);
                    (target, rows)
                }
                Spec::Document(p) => (
                    TargetSpec::Document(path(*p)),
                    states[s].get(&path(*p)).cloned().into_iter().collect(),
                ),
            };
            let id = TargetId(i as u64);
            let horizon: Arc<dyn Horizon> = Arc::new(Before(xid(s)));
            let result = matcher.add_target(id, target, rows, Some(horizon)).unwrap();
            let mut client = Client::from_result(result);
            // Retained transactions the snapshot did not see, handed off to this target.
            for u in s..t {
                if let Some(delta) = matcher.apply_to(id, xid(u), &txns[u]) {
                    log.push(format!("{id} at {u}: {delta:?}"));
                    deliver(&mut matcher, id, delta, &mut client, &states[u + 1]);
                }
            }
            shown_from[i] = s.max(t);
            let context = format!("target {i} added at {t} (snapshot {s})");
            check(spec, &client, &states[s.max(t)], &context);
            clients[i] = Some(client);
        }
        if t == n {
            break;
        }
        let deltas = matcher.apply(xid(t), &txns[t]);
        let mut seen = HashSet::new();
        for (id, delta) in deltas {
            assert!(seen.insert(id), "two deltas for target {id}");
            log.push(format!("{id} at {t}: {delta:?}"));
            let i = usize::try_from(id.0).unwrap();
            let client = clients[i].as_mut().expect("delta for a target not added");
            deliver(&mut matcher, id, delta, client, &states[t + 1]);
        }
        for (i, (spec, client)) in case.specs.iter().zip(&clients).enumerate() {
            let Some(client) = client else { continue };
            // A target whose snapshot is ahead shows that snapshot until the stream reaches it.
            let at = (t + 1).max(shown_from[i]);
            let context = format!("target {i} after transaction {t} ({write_partitions} x {query_partitions} partitions)");
            check(spec, client, &states[at], &context);
            let now = Client::from_result(matcher.result(TargetId(i as u64)).unwrap());
            check(
                spec,
                &now,
                &states[at],
                &format!("{context} (matcher's own result)"),
            );
        }
    }
    log
}

/// Both runs of a case: at 1 x 1, and at its partitions, which must report the same deltas.
fn run_both(case: &Case) {
    let one = run(case, (1, 1));
    let partitioned = run(case, case.partitions);
    assert_eq!(
        one, partitioned,
        "{:?} partitions report other deltas than one",
        case.partitions
    );
}

#[test]
fn matcher_deltas_rebuild_what_core_evaluates() {
    let cases = std::env::var("MATCHER_ORACLE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    let seed = test_env::seed(
        "matcher_deltas_rebuild_what_core_evaluates",
        Some("MATCHER_ORACLE_SEED"),
    );
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&case(), |case| {
        run_both(&case);
        Ok(())
    });
    if let Err(e) = result {
        panic!("matcher oracle failed (DOCSTORE_SEED={seed}): {e}");
    }
}

#[test]
fn matcher_sorted_windows_survive_churn() {
    let seed = test_env::seed("matcher_sorted_windows_survive_churn", None);
    let mut runner = TestRunner::new(Config {
        cases: 500,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&window_case(), |case| {
        run_both(&case);
        Ok(())
    });
    if let Err(e) = result {
        panic!("matcher window oracle failed (DOCSTORE_SEED={seed}): {e}");
    }
}

#[test]
fn matcher_oracle_generates_every_shape() {
    // The generator must reach the shapes the oracle claims to cover.
    let mut runner = TestRunner::new(Config {
        rng_seed: RngSeed::Fixed(1),
        ..Config::default()
    });
    let strategy = query();
    let (mut last, mut group, mut cursors, mut aggs, mut fields, mut or) =
        (false, false, false, false, false, false);
    // Aggregations kept incrementally (no offset, no limit) and over a window.
    let (mut running, mut windowed) = (false, false);
    for _ in 0..3000 {
        let q = strategy.new_tree(&mut runner).unwrap().current();
        last |= matches!(q.limit, Some(Limit::Last(_)));
        group |= q.source.all_descendants;
        cursors |= q.start.is_some() || q.end.is_some();
        aggs |= matches!(q.selection, Selection::Aggregations(_));
        let whole = q.limit.is_none() && q.offset == 0;
        running |= matches!(q.selection, Selection::Aggregations(_)) && whole;
        windowed |= matches!(q.selection, Selection::Aggregations(_)) && !whole;
        fields |= matches!(q.selection, Selection::Fields(_));
        or |= matches!(q.filter, Some(Filter::Or(_)));
    }
    assert!(last && group && cursors && aggs && fields && or && running && windowed);
}
