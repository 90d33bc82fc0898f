//! The `list` check of a query: rules are not filters.
//!
//! Firestore decides a query once, before reading anything: the `list` rules must hold for
//! every document the query could return, whatever the data. [`decide_query`] evaluates the
//! `list` rules against a *constraint document*: `resource.data` holds only the fields the
//! query fixes by equality (`==`, `in` of one value, `is null`, `is nan`; `__name__ ==` fixes
//! `resource.__name__` and `resource.id`), and `request.query` holds `limit`, `offset` and
//! `orderBy`. Any other read of `resource` is an error, so a rule is allowed only when it is
//! provable from the constraints alone. This is sound: every result document has exactly
//! those values. It is stricter than Firestore, which also proves range implications (a
//! query `price < 50` under `resource.data.price < 100`): such queries are refused here
//! (docs/rules.md).
//!
//! `array_contains` (or `array_contains_any` of one value) fixes one thing about a list: a rule
//! `x in resource.data.f` is true when `x` is the contained value (values holding numbers are
//! not used, their int and float forms differ in lists); any other read of `f` is refused.
//!
//! Numbers: a query's `x == 1` also returns documents where `x` is `1.0` (and `0` matches
//! `-0.0`), which rules can tell apart (`is int`), so the rules are evaluated for every numeric
//! form of each fixed number and must allow all of them. A fixed map or list holding numbers
//! is not used as a constraint (a read of it is refused).
//!
//! Collection-group queries: only `allow list` statements under a recursive wildcard that
//! covers every depth (`match /{path=**}/<collection>/{doc}` directly under the query's parent,
//! rules_version '2') can allow them; the recursive wildcard and the document wildcard are
//! unbound (reading them is an error).

use docstore_core::query::{Direction, FieldOp, Filter, Limit, Query, UnaryOp};
use docstore_core::{ResourcePath, Value};

use crate::eval::{self, Budget, Decision, Documents, Request, Resource, UNBOUND};
use crate::ir::Rule;
use crate::parse::ast::{Method, Version};
use crate::prim::{self, Map, Val};

/// Most combinations of numeric forms evaluated; a query fixing more numbers is refused.
const MAX_COMBINATIONS: usize = 64;

/// What a query fixes: (key chain under `resource`, the possible forms of its value).
#[derive(Debug, Clone, Default)]
pub struct Constraints {
    pub fixed: Vec<(Vec<String>, Vec<Val>)>,
    /// (key chain, a value the list holds), from `array_contains` (and `array_contains_any`
    /// of one value) with a value holding no number.
    pub contains: Vec<(Vec<String>, Val)>,
}

/// The constraints of `query`'s filter: the equalities of its top-level conjunction.
pub fn constraints(query: &Query, database: &str) -> Constraints {
    let mut out = Constraints::default();
    if let Some(filter) = &query.filter {
        collect(filter, database, &mut out);
    }
    out
}

fn collect(filter: &Filter, database: &str, out: &mut Constraints) {
    match filter {
        Filter::And(children) => {
            for c in children {
                collect(c, database, out);
            }
        }
        // A disjunction fixes nothing for every document.
        Filter::Or(_) => {}
        Filter::Unary { field, op } => {
            let value = match op {
                UnaryOp::IsNull => Val::Null,
                UnaryOp::IsNan => Val::Float(f64::NAN),
                UnaryOp::IsNotNull | UnaryOp::IsNotNan => return,
            };
            fix_field(field.segments(), vec![value], out);
        }
        Filter::Field { field, op, value } => {
            if let (FieldOp::ArrayContains | FieldOp::ArrayContainsAny, v) = (op, value) {
                let v = match (op, v) {
                    (FieldOp::ArrayContainsAny, Value::Array(items)) if items.len() == 1 => {
                        &items[0]
                    }
                    (FieldOp::ArrayContains, v) => v,
                    _ => return,
                };
                let v = prim::value_from_core(v, database);
                if !holds_number(&v) {
                    let mut keys = vec!["data".to_owned()];
                    keys.extend(field.segments().iter().cloned());
                    out.contains.push((keys, v));
                }
                return;
            }
            let value = match (op, value) {
                (FieldOp::Eq, v) => v,
                (FieldOp::In, Value::Array(items)) if items.len() == 1 => &items[0],
                _ => return,
            };
            if field.is_document_id() {
                if let Value::Reference(path) = value {
                    fix_name(database, path, out);
                }
                return;
            }
            if let Some(forms) = forms(&prim::value_from_core(value, database)) {
                fix_field(field.segments(), forms, out);
            }
        }
    }
}

fn fix_field(segments: &[String], forms: Vec<Val>, out: &mut Constraints) {
    if forms.is_empty() {
        return;
    }
    let mut keys = vec!["data".to_owned()];
    keys.extend(segments.iter().cloned());
    // A field fixed twice (or below a fixed map): one constraint is enough to be sound.
    if out
        .fixed
        .iter()
        .any(|(k, _)| keys.starts_with(k) || k.starts_with(&keys))
    {
        return;
    }
    out.fixed.push((keys, forms));
}

fn fix_name(database: &str, path: &ResourcePath, out: &mut Constraints) {
    if out
        .fixed
        .iter()
        .any(|(k, _)| k.first().is_some_and(|f| f == "__name__"))
    {
        return;
    }
    let full = prim::json::document_path(database, path);
    let id = path.segments().last().cloned().unwrap_or_default();
    out.fixed
        .push((vec!["__name__".to_owned()], vec![Val::Path(full)]));
    out.fixed.push((vec!["id".to_owned()], vec![Val::Str(id)]));
}

/// Every value a document matching `== v` may hold, as rules tell them apart; `None` when that
/// is not a short list (maps and lists holding numbers).
fn forms(v: &Val) -> Option<Vec<Val>> {
    match v {
        Val::Int(i) => {
            let mut out = vec![Val::Int(*i)];
            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            let f = *i as f64;
            #[allow(clippy::cast_possible_truncation)]
            if f.is_finite() && f.abs() < 9.2e18 && f as i64 == *i {
                out.push(Val::Float(f));
                if *i == 0 {
                    out.push(Val::Float(-0.0));
                }
            }
            Some(out)
        }
        Val::Float(f) if f.is_nan() => Some(vec![Val::Float(*f)]),
        Val::Float(f) => {
            let mut out = vec![Val::Float(*f)];
            #[allow(clippy::cast_possible_truncation)]
            if f.fract() == 0.0 && f.abs() < 9.2e18 {
                out.push(Val::Int(*f as i64));
                if *f == 0.0 {
                    out.push(Val::Float(-*f));
                }
            }
            Some(out)
        }
        Val::List(items) => items
            .iter()
            .all(|i| !holds_number(i))
            .then(|| vec![v.clone()]),
        Val::Map(m) => m
            .values()
            .all(|i| !holds_number(i))
            .then(|| vec![v.clone()]),
        _ => Some(vec![v.clone()]),
    }
}

fn holds_number(v: &Val) -> bool {
    match v {
        Val::Int(_) | Val::Float(_) => true,
        Val::List(items) => items.iter().any(holds_number),
        Val::Map(m) => m.values().any(holds_number),
        _ => false,
    }
}

/// `request.query` of `query`.
pub fn request_query(query: &Query) -> eval::Query {
    eval::Query {
        limit: query.limit.map(|l| match l {
            Limit::First(n) | Limit::Last(n) => i64::from(n),
        }),
        offset: Some(i64::from(query.offset)),
        order_by: query
            .order_by
            .iter()
            .map(|o| {
                let dir = match o.direction {
                    Direction::Ascending => "ASC",
                    Direction::Descending => "DESC",
                };
                (o.field.to_string(), dir.to_owned())
            })
            .collect(),
    }
}

/// Decide the `list` of `query` once, for every document it could return. `request` is the
/// list request (method `List`, `path` the queried collection, or the parent of a collection
/// group; `query` is filled in here).
pub fn decide_query(
    ruleset: &crate::Ruleset,
    request: &Request,
    query: &Query,
    documents: &dyn Documents,
    budget: &mut Budget,
) -> Decision {
    let mut request = request.clone();
    request.method = Method::List;
    request.query = Some(request_query(query));
    let database = request.database.clone();
    let source = &query.source;
    let parent = source
        .parent
        .as_ref()
        .map_or(&[][..], ResourcePath::segments);
    let named = named_document(query, &database).filter(|p| source.contains(p));
    let group = source.all_descendants && named.is_none();
    let path = match &named {
        // `__name__ ==` fixes the one document the query can return: its wildcards are bound.
        Some(p) => prim::json::document_path(&database, p),
        None => {
            let mut path = vec![
                "databases".to_owned(),
                database.clone(),
                "documents".to_owned(),
            ];
            path.extend(parent.iter().cloned());
            if group {
                path.push(UNBOUND.to_owned());
            }
            path.push(source.collection_id.clone());
            path.push(UNBOUND.to_owned());
            path
        }
    };
    let head = 3 + parent.len();
    let collection_id = source.collection_id.clone();
    let eligible = |rule: &Rule| {
        !group || (ruleset.version == Version::V2 && covers_group(rule, head, &collection_id))
    };

    let Constraints { fixed, contains } = constraints(query, &database);
    let known: Vec<Vec<String>> = fixed.iter().map(|(k, _)| k.clone()).collect();
    let combinations = fixed
        .iter()
        .try_fold(1usize, |n, (_, forms)| n.checked_mul(forms.len()))
        .unwrap_or(usize::MAX);
    if combinations > MAX_COMBINATIONS {
        return Decision::Deny(format!(
            "'list' on {} denied: the query fixes too many numbers to check ({combinations} combinations of int and float forms, at most {MAX_COMBINATIONS})",
            request.path
        ));
    }
    for n in 0..combinations {
        let mut choice = n;
        let mut doc = Map::new();
        for (keys, forms) in &fixed {
            // Every list of forms is non-empty (`fix_field`, `fix_name`).
            let n = forms.len().max(1);
            if let Some(v) = forms.get(choice % n) {
                insert(&mut doc, keys, v.clone());
            }
            choice /= n;
        }
        if !doc.contains_key("data") {
            doc.insert("data".into(), Val::Map(Map::new()));
        }
        let resource = Resource {
            value: Val::Map(doc),
            known: Some(known.clone()),
            contains: contains.clone(),
        };
        let decision = eval::decide(
            ruleset, &request, &path, eligible, resource, documents, budget,
        );
        if decision != Decision::Allow {
            return decision;
        }
    }
    Decision::Allow
}

/// The document `__name__ ==` fixes, if any.
fn named_document(query: &Query, database: &str) -> Option<ResourcePath> {
    let mut c = Constraints::default();
    collect(query.filter.as_ref()?, database, &mut c);
    c.fixed
        .iter()
        .find_map(|(k, v)| match (k.first(), v.first()) {
            (Some(n), Some(Val::Path(full))) if n == "__name__" => {
                ResourcePath::from_segments(full.get(3..)?.to_vec()).ok()
            }
            _ => None,
        })
}

/// Whether `rule` applies to every document of a collection group `collection_id` under a
/// parent of `head` segments (with `databases/{db}/documents`): `<parent>/{x=**}/<id>/{doc}`.
fn covers_group(rule: &Rule, head: usize, collection_id: &str) -> bool {
    let segs: Vec<&str> = rule
        .pattern
        .strip_prefix('/')
        .unwrap_or(&rule.pattern)
        .split('/')
        .collect();
    match segs.iter().position(|s| s.ends_with("=**}")) {
        Some(k) => {
            k == head
                && segs.len() == k + 3
                && segs[k + 1] == collection_id
                && segs[k + 2].starts_with('{')
                && !segs[k + 2].ends_with("=**}")
        }
        None => false,
    }
}

fn insert(doc: &mut Map, keys: &[String], v: Val) {
    let Some((first, rest)) = keys.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.insert(first.clone(), v);
        return;
    }
    let entry = doc
        .entry(first.clone())
        .or_insert_with(|| Val::Map(Map::new()));
    if let Val::Map(m) = entry {
        insert(m, rest, v);
    }
}

#[cfg(test)]
mod tests;
