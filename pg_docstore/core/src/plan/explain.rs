//! A JSON description of a plan, for `docstore.explain(text)`.
//!
//! ```json
//! {"order": ["avgRating desc", "__name__ desc"],
//!  "branches": [{"zigzag": [{"index": {"composite": 1}, "prefix": "03000000010150...",
//!                            "ranges": [], "backward": false, "key_filters": []}, ...]}],
//!  "reverse_output": false, "recheck": false}
//! ```
//!
//! A branch is `{"scan": scan}`, `{"zigzag": [scan, ...]}` or `{"list": {...}}`; an index is
//! `{"automatic": field}`, `{"automatic_contains": field}` or `{"composite": id}`; byte
//! strings are lowercase hex.

use serde_json::{json, Value as Json};

use crate::query::Direction;

use super::{Branch, CollectionScan, IndexRef, KeyRange, Plan, Scan};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn ranges(ranges: &[KeyRange]) -> Json {
    Json::Array(
        ranges
            .iter()
            .map(|r| json!([hex(&r.start), hex(&r.end)]))
            .collect(),
    )
}

fn scan(scan: &Scan) -> Json {
    let index = match &scan.index {
        IndexRef::Auto {
            field,
            contains: false,
        } => json!({ "automatic": field.to_string() }),
        IndexRef::Auto {
            field,
            contains: true,
        } => json!({ "automatic_contains": field.to_string() }),
        IndexRef::Composite { id } => json!({ "composite": id }),
    };
    let mut out = json!({
        "index": index,
        "prefix": hex(&scan.prefix),
        "ranges": ranges(&scan.ranges),
        "backward": scan.backward,
        "key_filters": scan
            .key_filters
            .iter()
            .map(|f| f.filter.to_string())
            .collect::<Vec<_>>(),
    });
    if let (Some(parent), Json::Object(members)) = (&scan.name_under, &mut out) {
        members.insert("name_under".into(), parent.to_string().into());
    }
    out
}

fn list(listing: &CollectionScan) -> Json {
    json!({
        "collection_id": listing.collection_id,
        "parent": listing.parent.as_ref().map(ToString::to_string),
        "all_descendants": listing.all_descendants,
        "ranges": ranges(&listing.ranges),
        "backward": listing.backward,
    })
}

/// The plan as JSON (see the module docs).
pub fn explain(plan: &Plan) -> Json {
    let branches: Vec<Json> = plan
        .branches
        .iter()
        .map(|branch| match branch {
            Branch::Collection(listing) => json!({ "list": list(listing) }),
            Branch::Scans(scans) => match scans.as_slice() {
                [one] => json!({ "scan": scan(one) }),
                many => json!({ "zigzag": many.iter().map(scan).collect::<Vec<_>>() }),
            },
        })
        .collect();
    let order: Vec<String> = plan
        .order
        .iter()
        .map(|o| match o.direction {
            Direction::Ascending => o.field.to_string(),
            Direction::Descending => format!("{} desc", o.field),
        })
        .collect();
    json!({
        "order": order,
        "branches": branches,
        "reverse_output": plan.reverse_output,
        "recheck": plan.recheck,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{plan, Catalog};
    use crate::query::parse_query;

    #[test]
    fn describes_a_zigzag() {
        let query =
            parse_query("select * from /r where a = 1 and b = 2 order by __name__ desc").unwrap();
        let p = plan(&query, &Catalog::default()).unwrap();
        let described = explain(&p);
        assert_eq!(described["order"], json!(["__name__ desc"]));
        let zigzag = &described["branches"][0]["zigzag"];
        assert_eq!(zigzag[0]["index"], json!({"automatic": "a"}));
        assert_eq!(zigzag[1]["index"], json!({"automatic": "b"}));
        assert_eq!(zigzag[1]["backward"], json!(true));
        assert!(zigzag[0]["prefix"].as_str().unwrap().starts_with("0101"));
    }
}
