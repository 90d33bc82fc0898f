//! The hidane-rules crate (an independent implementation measured against Firebase's
//! emulator) as a third voter: the same request, decided by it.

use std::collections::BTreeMap;

use docstore_core::value::Map as CoreMap;
use docstore_core::Value;
use hidane_rules::eval::{self as h, Decision};
use serde_json::Value as Json;

pub fn compile(source: &str) -> Result<hidane_rules::Ruleset, String> {
    let c = hidane_rules::compile(&[hidane_rules::SourceFile {
        name: Some("firestore.rules".into()),
        content: source.to_owned(),
    }]);
    match c.ruleset {
        Some(r) if !c.has_errors() => Ok(r),
        _ => Err(c.error_message()),
    }
}

/// The full path of `p` (relative to the database's documents) as hidane's segments.
pub fn path(p: &str) -> Vec<String> {
    let mut out = vec![
        "databases".to_owned(),
        "(default)".to_owned(),
        "documents".to_owned(),
    ];
    out.extend(p.split('/').map(str::to_owned));
    out
}

pub fn value(v: &Value) -> h::Value {
    match v {
        Value::Null => h::Value::Null,
        Value::Boolean(b) => h::Value::Bool(*b),
        Value::Integer(i) => h::Value::Int(*i),
        Value::Double(d) => h::Value::Float(*d),
        Value::Timestamp(t) => h::Value::Timestamp(h::Timestamp {
            seconds: t.micros().div_euclid(1_000_000),
            nanos: i32::try_from(t.micros().rem_euclid(1_000_000) * 1_000).unwrap_or(0),
        }),
        Value::String(s) => h::Value::String(s.clone()),
        Value::Bytes(b) => h::Value::Bytes(b.clone()),
        Value::Reference(r) => h::Value::Path(path(&r.to_string())),
        Value::GeoPoint(g) => h::Value::LatLng(g.latitude, g.longitude),
        Value::Array(items) => h::Value::List(items.iter().map(value).collect()),
        Value::Vector(items) => h::Value::List(items.iter().map(|d| h::Value::Float(*d)).collect()),
        Value::Map(m) => h::Value::Map(m.iter().map(|(k, v)| (k.clone(), value(v))).collect()),
    }
}

fn json_value(j: &Json) -> h::Value {
    match j {
        Json::Null => h::Value::Null,
        Json::Bool(b) => h::Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) if !n.to_string().contains(['.', 'e', 'E']) => h::Value::Int(i),
            _ => h::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => h::Value::String(s.clone()),
        Json::Array(a) => h::Value::List(a.iter().map(json_value).collect()),
        Json::Object(o) => {
            h::Value::Map(o.iter().map(|(k, v)| (k.clone(), json_value(v))).collect())
        }
    }
}

/// A document at `p` (relative to the database's documents).
pub fn document(p: &str, data: &CoreMap) -> h::Document {
    h::Document {
        path: path(p),
        data: data.iter().map(|(k, v)| (k.clone(), value(v))).collect(),
    }
}

pub struct HStore<'a>(pub &'a BTreeMap<String, CoreMap>);

impl h::Documents for HStore<'_> {
    fn get(&self, p: &[String]) -> Option<h::Document> {
        let rel = p.get(3..)?.join("/");
        self.0.get(&rel).map(|d| document(&rel, d))
    }
    fn get_after(&self, p: &[String]) -> Option<h::Document> {
        self.get(p)
    }
}

/// Decide with hidane: true for allow.
#[allow(clippy::too_many_arguments)]
pub fn decide(
    rs: &hidane_rules::Ruleset,
    docs: &BTreeMap<String, CoreMap>,
    auth: Option<&Json>,
    method: docstore_rules::Method,
    p: &str,
    new: Option<&CoreMap>,
    time_micros: i64,
) -> bool {
    decide_with_query(rs, docs, auth, method, p, new, time_micros, None)
}

/// [`decide`] with `request.query` for a list (hidane decides a list from the query, with
/// no filter here: only its limit, offset and orderBy).
#[allow(clippy::too_many_arguments)]
pub fn decide_with_query(
    rs: &hidane_rules::Ruleset,
    docs: &BTreeMap<String, CoreMap>,
    auth: Option<&Json>,
    method: docstore_rules::Method,
    p: &str,
    new: Option<&CoreMap>,
    time_micros: i64,
    query: Option<&docstore_rules::eval::Query>,
) -> bool {
    authorize(rs, &HStore(docs), auth, method, p, new, time_micros, query)
}

/// [`decide_with_query`] with any store of documents for `get()`/`exists()`.
#[allow(clippy::too_many_arguments)]
pub fn authorize(
    rs: &hidane_rules::Ruleset,
    docs: &dyn h::Documents,
    auth: Option<&Json>,
    method: docstore_rules::Method,
    p: &str,
    new: Option<&CoreMap>,
    time_micros: i64,
    query: Option<&docstore_rules::eval::Query>,
) -> bool {
    let stored = docs.get(&path(p));
    use docstore_rules::Method as M;
    let method = match method {
        M::Get => h::Method::Get,
        M::List => h::Method::List,
        M::Create => h::Method::Create,
        M::Update => h::Method::Update,
        M::Delete => h::Method::Delete,
    };
    let auth = auth.map(|claims| h::Auth {
        uid: claims
            .get("sub")
            .and_then(|s| s.as_str())
            .map(str::to_owned),
        token: match json_value(claims) {
            h::Value::Map(m) => m,
            _ => Default::default(),
        },
    });
    let request = h::Request {
        method,
        upsert: false,
        path: path(p),
        auth,
        time: h::Timestamp {
            seconds: time_micros.div_euclid(1_000_000),
            nanos: i32::try_from(time_micros.rem_euclid(1_000_000) * 1_000).unwrap_or(0),
        },
        resource: new.map(|d| document(p, d)),
        query: query.map(|q| h::Query {
            limit: q.limit,
            offset: q.offset,
            order_by: q.order_by.clone(),
            ..Default::default()
        }),
        in_transaction: false,
        write_fields: None,
        transforms: None,
        auto_id: false,
        verify: false,
    };
    let mut budget = h::Budget::single();
    matches!(
        h::authorize(rs, &request, stored.as_ref(), docs, &mut budget),
        Decision::Allow
    )
}
