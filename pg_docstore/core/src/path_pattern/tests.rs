use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn params(pattern: &str, path: &str) -> Option<BTreeMap<String, String>> {
    let segments: Vec<&str> = path.split('/').collect();
    PathPattern::parse_document(pattern)
        .expect("a valid pattern")
        .params(&segments)
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn a_document_pattern_binds_its_wildcards() {
    let p = "restaurants/{id}/ratings/{rating}";
    assert_eq!(
        params(p, "restaurants/r1/ratings/x9"),
        Some(map(&[("id", "r1"), ("rating", "x9")]))
    );
    assert_eq!(params(p, "restaurants/r1/reviews/x9"), None);
    assert_eq!(params(p, "restaurants/r1"), None);
    assert_eq!(params(p, "restaurants/r1/ratings/x9/a/b"), None);
    assert_eq!(
        params("/users/{uid=*}", "users/u1"),
        Some(map(&[("uid", "u1")]))
    );
    assert_eq!(params("users/u1", "users/u1"), Some(map(&[])));
}

#[test]
fn a_recursive_wildcard_matches_the_remaining_segments() {
    assert_eq!(
        params("{doc=**}", "a/b/c/d"),
        Some(map(&[("doc", "a/b/c/d")]))
    );
    let p = "users/{uid}/{rest=**}";
    assert_eq!(
        params(p, "users/u1/posts/p1"),
        Some(map(&[("uid", "u1"), ("rest", "posts/p1")]))
    );
    // at least one segment: the user's own document is not under it
    assert_eq!(params(p, "users/u1"), None);
    assert_eq!(
        params("users/{rest=**}", "users/u1/posts/p1/c/d"),
        Some(map(&[("rest", "u1/posts/p1/c/d")]))
    );
    // only documents match: a collection path never does
    let odd: Vec<&str> = vec!["users", "u1", "posts"];
    let pattern = PathPattern::parse_document("users/{rest=**}").expect("valid");
    assert_eq!(pattern.params(&odd), None);
}

#[test]
fn bad_patterns_are_refused_with_their_reason() {
    let err = |p: &str| PathPattern::parse_document(p).expect_err(p);
    assert!(matches!(err(""), PatternError::Empty { .. }));
    assert!(matches!(err("/"), PatternError::Empty { .. }));
    assert!(matches!(err("a//b"), PatternError::EmptySegment { .. }));
    assert!(matches!(err("a/b/"), PatternError::EmptySegment { .. }));
    for bad in [
        "a/{}",
        "a/{1x}",
        "a/{x-y}",
        "a/{x=***}",
        "a/{x=y}",
        "a/b{x}",
        "a/{x",
        "a/x}",
        "a/{=**}",
    ] {
        assert!(
            matches!(err(bad), PatternError::BadWildcard { .. }),
            "{bad}"
        );
    }
    assert!(matches!(err("a/.."), PatternError::ReservedSegment { .. }));
    assert!(matches!(
        err("__x__/b"),
        PatternError::ReservedSegment { .. }
    ));
    assert!(matches!(
        err("{x=**}/b"),
        PatternError::RecursiveNotLast { .. }
    ));
    assert!(matches!(
        err("a/{x}/b/{x}"),
        PatternError::DuplicateName { .. }
    ));
    assert!(matches!(
        err("a/{x}/b/{x=**}"),
        PatternError::DuplicateName { .. }
    ));
    assert!(matches!(err("a"), PatternError::NotADocument { .. }));
    assert!(matches!(err("a/{x}/b"), PatternError::NotADocument { .. }));
    assert_eq!(err("a").kind(), ErrorKind::InvalidArgument);
}

#[test]
fn the_rules_binding_keeps_version_semantics() {
    let p = PathPattern::borrowed("/databases/{db}/documents/{path=**}/u1");
    let path = ["databases", "d", "documents", "u1"];
    assert!(p.bind(1, &path).is_none());
    let bound = p.bind(0, &path).expect("zero segments in version 2");
    assert_eq!(bound[0], ("db", Bound::Segment(&"d")));
    assert_eq!(bound[1], ("path", Bound::Segments(&path[3..3])));
}

/// A pattern and a document path built from it, with the values its wildcards take.
fn pattern_and_path() -> impl Strategy<Value = (String, Vec<String>, BTreeMap<String, String>)> {
    let id = "[a-z0-9]{1,6}";
    (
        prop::collection::vec((any::<bool>(), id, id), 1..5),
        prop::option::of(prop::collection::vec(id, 1..6)),
    )
        .prop_map(|(pairs, rest)| {
            let mut pattern = Vec::new();
            let mut path = Vec::new();
            let mut values = BTreeMap::new();
            for (i, (wild, collection, id)) in pairs.into_iter().enumerate() {
                pattern.push(collection.clone());
                path.push(collection);
                if wild {
                    pattern.push(format!("{{w{i}}}"));
                    values.insert(format!("w{i}"), id.clone());
                } else {
                    pattern.push(id.clone());
                }
                path.push(id);
            }
            if let Some(mut rest) = rest {
                if rest.len() % 2 != 0 {
                    rest.push("doc".to_owned());
                }
                pattern.push("{rest=**}".to_owned());
                values.insert("rest".to_owned(), rest.join("/"));
                path.extend(rest);
            }
            (pattern.join("/"), path, values)
        })
}

proptest! {
    #[test]
    fn a_path_built_from_a_pattern_matches_it((pattern, path, values) in pattern_and_path()) {
        let parsed = PathPattern::parse_document(&pattern).expect("a generated pattern is valid");
        prop_assert_eq!(parsed.params(&path), Some(values));
    }

    #[test]
    fn a_changed_literal_does_not_match((pattern, mut path, _values) in pattern_and_path()) {
        let parsed = PathPattern::parse_document(&pattern).expect("a generated pattern is valid");
        // the first segment is always a literal collection id
        path[0].push('X');
        prop_assert_eq!(parsed.params(&path), None);
    }
}
