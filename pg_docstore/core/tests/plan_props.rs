//! The planner against the oracle: for random documents and random valid queries, running the
//! plan over the documents' index entries (`plan::simulate`) returns exactly what
//! `query::evaluate` returns. When the planner asks for an index, the test creates exactly
//! the suggested one and plans again, so the suggestions are checked too.

// Test helpers outside #[test] functions unwrap and panic to report failures.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use common::generators::{composites, documents, exemptions, query};
use docstore_core::index::{IndexDefinition, Scope};
use docstore_core::plan::simulate::{simulate, MemoryStore};
use docstore_core::plan::{plan, Branch, Catalog, PlanError};
use docstore_core::query::{evaluate, FieldOp, Filter, Query};
use docstore_core::value::Map;
use docstore_core::{FieldPath, ResourcePath};

#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    invalid: bool,
    unsupported: bool,
    indexes_created: usize,
    rows: usize,
    branches: usize,
    zigzag: bool,
    listing: bool,
}

/// Plan (creating suggested indexes as asked), simulate and compare with the oracle.
fn check(
    docs: &[(ResourcePath, Map)],
    query: Query,
    mut composites: Vec<IndexDefinition>,
    exemptions: &[FieldPath],
) -> Result<Outcome, TestCaseError> {
    let Ok(query) = query.validate() else {
        return Ok(Outcome {
            invalid: true,
            ..Outcome::default()
        });
    };
    let mut outcome = Outcome::default();
    for _ in 0..40 {
        let catalog = Catalog {
            composites: composites.clone(),
            exemptions: exemptions.to_vec(),
        };
        match plan(&query, &catalog) {
            Ok(p) => {
                let exempt: Vec<(String, FieldPath)> = exemptions
                    .iter()
                    .map(|f| ("c".to_owned(), f.clone()))
                    .collect();
                let store = MemoryStore::new(docs, &composites, &exempt).unwrap();
                let got = simulate(&p, &query, &store)
                    .map_err(|e| TestCaseError::fail(format!("{e}\n{query}\n{p:#?}")))?;
                let expected = evaluate(&query, docs);
                prop_assert_eq!(
                    got.iter().map(|(p, _)| p.to_string()).collect::<Vec<_>>(),
                    expected
                        .iter()
                        .map(|(p, _)| p.to_string())
                        .collect::<Vec<_>>(),
                    "query: {}\nplan: {:#?}",
                    query,
                    p
                );
                prop_assert_eq!(&got, &expected);
                outcome.rows = got.len();
                outcome.branches = p.branches.len();
                outcome.zigzag = p
                    .branches
                    .iter()
                    .any(|b| matches!(b, Branch::Scans(s) if s.len() > 1));
                outcome.listing = p
                    .branches
                    .iter()
                    .any(|b| matches!(b, Branch::Collection(_)));
                return Ok(outcome);
            }
            Err(PlanError::MissingIndex {
                collection_group,
                scope,
                fields,
                call,
            }) => {
                prop_assert_eq!(collection_group.as_str(), "c");
                let group = query.source.all_descendants;
                prop_assert_eq!(scope == Scope::CollectionGroup, group);
                prop_assert_eq!(call.contains("collection_group"), group);
                // The suggestion is a definition create_index accepts, and is new.
                let parsed = IndexDefinition::parse_fields(&IndexDefinition::fields_json(&fields));
                prop_assert_eq!(parsed.as_ref().ok(), Some(&fields));
                prop_assert!(
                    !composites
                        .iter()
                        .any(|c| c.fields == fields && c.scope == scope),
                    "suggested an existing index: {}",
                    call
                );
                composites.push(IndexDefinition {
                    id: u32::try_from(composites.len()).unwrap() + 1,
                    collection_group,
                    scope,
                    fields,
                });
                outcome.indexes_created += 1;
            }
            Err(PlanError::Unsupported(reason)) => {
                let order = query.normalized_order();
                let name_not_last = order.last().is_none_or(|o| !o.field.is_document_id());
                let contains_ordered = query.filter.as_ref().is_some_and(|f| {
                    f.leaves().iter().any(|l| {
                        matches!(l, Filter::Field { field, op: FieldOp::ArrayContains | FieldOp::ArrayContainsAny, .. }
                            if order.iter().any(|o| o.field == *field))
                    })
                });
                prop_assert!(name_not_last || contains_ordered, "unsupported: {}", reason);
                outcome.unsupported = true;
                return Ok(outcome);
            }
        }
    }
    Err(TestCaseError::fail("the planner kept asking for indexes"))
}

/// Documents, a query, the composites that exist before planning, the exemptions.
type Case = (
    Vec<(ResourcePath, Map)>,
    Query,
    Vec<IndexDefinition>,
    Vec<FieldPath>,
);

fn case() -> impl Strategy<Value = Case> {
    (documents(), query(), composites(), exemptions())
}

proptest! {
    #![proptest_config(Config { cases: 2000, ..Config::default() })]

    #[test]
    fn plans_return_what_the_oracle_returns((docs, query, composites, exemptions) in case()) {
        check(&docs, query, composites, &exemptions)?;
    }
}

/// The generator exercises what the property is about (a property over mostly invalid or
/// empty queries could not fail).
#[test]
fn the_property_covers_the_interesting_cases() {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let strategy = case();
    let mut totals = [0usize; 8];
    let n = 600;
    for _ in 0..n {
        let (docs, query, composites, exemptions) =
            strategy.new_tree(&mut runner).unwrap().current();
        let outcome = check(&docs, query, composites, &exemptions).unwrap();
        let planned = !outcome.invalid && !outcome.unsupported;
        totals[0] += usize::from(outcome.invalid);
        totals[1] += usize::from(planned);
        totals[2] += usize::from(planned && outcome.rows > 0);
        totals[3] += usize::from(outcome.indexes_created > 0);
        totals[4] += usize::from(outcome.branches > 1);
        totals[5] += usize::from(outcome.zigzag);
        totals[6] += usize::from(outcome.listing);
        totals[7] += usize::from(outcome.unsupported);
    }
    eprintln!(
        "invalid, planned, nonempty, created, unions, zigzags, listings, unsupported: {totals:?}"
    );
    let [_, planned, nonempty, created, unions, zigzags, listings, _] = totals;
    assert!(planned * 2 >= n, "{totals:?}");
    assert!(nonempty * 4 >= n, "{totals:?}");
    assert!(created * 10 >= n, "{totals:?}");
    assert!(unions * 10 >= n, "{totals:?}");
    assert!(zigzags * 20 >= n, "{totals:?}");
    assert!(listings * 20 >= n, "{totals:?}");
}
