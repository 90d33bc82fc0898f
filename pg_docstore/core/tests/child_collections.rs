//! The skip scan of `listCollectionIds` (`encoding::ChildCollections`, docs/storage.md): run
//! against an ordered set of encoded `parent` values, it finds exactly the collections that
//! hold a document directly under the parent, sorted, with one probe per child collection.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use docstore_core::encoding::{encode_name, ChildCollections};
use docstore_core::ResourcePath;
use proptest::prelude::*;

/// The `parent` column of each document (the encoded collection path).
fn parents(documents: &[ResourcePath]) -> BTreeSet<Vec<u8>> {
    documents
        .iter()
        .map(|d| encode_name(&d.parent().unwrap()))
        .collect()
}

/// The scan as the sidecar runs it, against `index`; returns the ids and the probe count.
fn scan(index: &BTreeSet<Vec<u8>>, under: &[String]) -> (Vec<String>, usize) {
    let scan = ChildCollections::under(under);
    let (mut bound, end) = (scan.start(), scan.end());
    let (mut ids, mut probes) = (Vec::new(), 0);
    loop {
        probes += 1;
        let found = index
            .range::<Vec<u8>, _>((Bound::Included(&bound), Bound::Excluded(&end)))
            .next();
        let Some(found) = found else {
            return (ids, probes);
        };
        let child = scan.step(found).unwrap();
        if child.direct {
            ids.push(child.id);
        }
        assert!(child.next > bound, "the scan moves forward");
        bound = child.next;
    }
}

/// What the answer must be, computed from the paths.
fn expected(documents: &[ResourcePath], under: &[String]) -> Vec<String> {
    let mut ids: BTreeMap<Vec<u8>, String> = BTreeMap::new();
    for d in documents {
        let segments = d.segments();
        if segments.len() == under.len() + 2 && segments.starts_with(under) {
            let id = segments[under.len()].clone();
            ids.insert(id.as_bytes().to_vec(), id);
        }
    }
    ids.into_values().collect()
}

fn doc(path: &str) -> ResourcePath {
    ResourcePath::parse_document(path).unwrap()
}

#[test]
fn direct_collections_only_with_one_probe_each() {
    let documents: Vec<ResourcePath> = [
        "a/1",
        "a/2",
        "a-/1",
        "a/1/sub/x",
        "only-deep/1/sub/x",
        "b/1",
        "b/1/c/1",
        "b/1/c/2",
        "b/1/d/1/e/1",
        "b/1/c-/1",
        "b/2/z/1",
        "ab/1",
    ]
    .into_iter()
    .map(doc)
    .collect();
    let index = parents(&documents);
    let root: Vec<String> = Vec::new();
    // "only-deep" holds no document directly: not listed.
    let (ids, probes) = scan(&index, &root);
    assert_eq!(ids, ["a", "a-", "ab", "b"]);
    assert_eq!(
        probes, 6,
        "one probe per child collection and the last, empty one"
    );
    let b1: Vec<String> = vec!["b".into(), "1".into()];
    assert_eq!(scan(&index, &b1).0, ["c", "c-"]);
    let none: Vec<String> = vec!["nothing".into(), "here".into()];
    assert_eq!(scan(&index, &none), (Vec::new(), 1));
}

fn segment() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "a-", "ab", "b", "a\u{1}", "\u{ff}", "é", "a b"])
        .prop_map(String::from)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_scan_agrees_with_the_paths(
        raw in prop::collection::vec(prop::collection::vec(segment(), 1..4), 1..30),
        under_depth in 0usize..2,
    ) {
        let documents: Vec<ResourcePath> = raw
            .iter()
            .map(|pairs| {
                let segments: Vec<String> = pairs
                    .iter()
                    .enumerate()
                    .flat_map(|(i, s)| [s.clone(), format!("d{i}")])
                    .collect();
                ResourcePath::from_segments(segments).unwrap()
            })
            .collect();
        let index = parents(&documents);
        let under: Vec<String> = documents[0].segments()[..under_depth * 2].to_vec();
        prop_assert_eq!(scan(&index, &under).0, expected(&documents, &under));
    }
}
