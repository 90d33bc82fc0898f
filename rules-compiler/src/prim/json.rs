//! Rules values to and from typed JSON (core's typed JSON plus the rules-only tags).

use docstore_core::typed_json;
use docstore_core::{ResourcePath, Value};
use serde_json::{Map as JsonMap, Value as Json};

use super::time::{format_timestamp, parse_timestamp};
use super::{Map, MapDiff, Val};

const RULES_TAGS: [&str; 4] = ["$path", "$set", "$duration", "$mapdiff"];

/// A core value as rules see it; references become paths under `database`.
pub fn value_from_core(value: &Value, database: &str) -> Val {
    match value {
        Value::Null => Val::Null,
        Value::Boolean(b) => Val::Bool(*b),
        Value::Integer(i) => Val::Int(*i),
        Value::Double(d) => Val::Float(*d),
        Value::Timestamp(t) => Val::Timestamp(i128::from(t.micros()) * 1_000),
        Value::String(s) => Val::Str(s.clone()),
        Value::Bytes(b) => Val::Bytes(b.clone()),
        Value::Reference(r) => Val::Path(document_path(database, r)),
        Value::GeoPoint(g) => Val::LatLng(g.latitude, g.longitude),
        Value::Array(items) => {
            Val::List(items.iter().map(|v| value_from_core(v, database)).collect())
        }
        // Firestore stores a vector as this map; rules see the map.
        Value::Vector(items) => {
            let mut m = Map::new();
            m.insert("__type__".into(), Val::str("__vector__"));
            m.insert(
                "value".into(),
                Val::List(items.iter().map(|d| Val::Float(*d)).collect()),
            );
            Val::Map(m)
        }
        Value::Map(m) => Val::Map(
            m.iter()
                .map(|(k, v)| (k.clone(), value_from_core(v, database)))
                .collect(),
        ),
    }
}

/// The rules path of a document: `databases/<db>/documents/<segments>`.
pub fn document_path(database: &str, path: &ResourcePath) -> Vec<String> {
    let mut out = Vec::with_capacity(3 + path.segments().len());
    out.extend([
        "databases".to_owned(),
        database.to_owned(),
        "documents".to_owned(),
    ]);
    out.extend(path.segments().iter().cloned());
    out
}

/// A stored document as `resource` (and `get()`) gives it: `{data, id, __name__}`. `data`
/// is typed JSON; its references become paths under `database`. `None` if `path` is not a
/// document path or `data` is not a typed-JSON map.
pub fn document(database: &str, path: &str, data: &Json) -> Option<Val> {
    let path = ResourcePath::parse_document(path).ok()?;
    let fields = typed_json::map_from_json(data).ok()?;
    let data = fields
        .iter()
        .map(|(k, v)| (k.clone(), value_from_core(v, database)))
        .collect();
    Some(resource(document_path(database, &path), data))
}

/// The `resource` map of a document at `path` (from `databases`) with `data`.
pub fn resource(path: Vec<String>, data: Map) -> Val {
    let mut m = Map::new();
    m.insert(
        "id".into(),
        Val::Str(path.last().cloned().unwrap_or_default()),
    );
    m.insert("__name__".into(), Val::Path(path));
    m.insert("data".into(), Val::Map(data));
    Val::Map(m)
}

/// Typed JSON (with the rules tags) to a value; `None` if it is not one.
pub fn from_json(json: &Json) -> Option<Val> {
    match json {
        Json::Array(items) => items
            .iter()
            .map(from_json)
            .collect::<Option<_>>()
            .map(Val::List),
        Json::Object(fields) => {
            if fields.len() == 1 {
                let (k, v) = fields.iter().next()?;
                match k.as_str() {
                    "$path" => return strings(v).map(Val::Path),
                    "$set" => {
                        let Json::Array(items) = v else { return None };
                        let items = items.iter().map(from_json).collect::<Option<Vec<_>>>()?;
                        return Some(super::ops::to_set(items));
                    }
                    "$duration" => return v.as_str()?.parse::<i128>().ok().map(Val::Duration),
                    "$mapdiff" => {
                        let Json::Object(d) = v else { return None };
                        return Some(Val::MapDiff(Box::new(MapDiff {
                            added: strings(d.get("added")?)?,
                            removed: strings(d.get("removed")?)?,
                            changed: strings(d.get("changed")?)?,
                            unchanged: strings(d.get("unchanged")?)?,
                        })));
                    }
                    "$timestamp" => return parse_timestamp(v.as_str()?).map(Val::Timestamp),
                    "$map" => {
                        let Json::Object(inner) = v else { return None };
                        return map(inner);
                    }
                    "$ref" => return None,
                    _ if typed_json::is_tag(k) => {
                        return typed_json::from_json(json)
                            .ok()
                            .map(|v| value_from_core(&v, "(default)"));
                    }
                    _ => {}
                }
            }
            map(fields)
        }
        scalar => typed_json::from_json(scalar)
            .ok()
            .map(|v| value_from_core(&v, "(default)")),
    }
}

fn map(fields: &JsonMap<String, Json>) -> Option<Val> {
    fields
        .iter()
        .map(|(k, v)| Some((k.clone(), from_json(v)?)))
        .collect::<Option<Map>>()
        .map(Val::Map)
}

fn strings(v: &Json) -> Option<Vec<String>> {
    let Json::Array(items) = v else { return None };
    items
        .iter()
        .map(|s| s.as_str().map(str::to_owned))
        .collect()
}

fn tagged(tag: &str, body: Json) -> Json {
    let mut m = JsonMap::new();
    m.insert(tag.to_owned(), body);
    Json::Object(m)
}

fn string_list(items: &[String]) -> Json {
    Json::Array(items.iter().map(|s| Json::String(s.clone())).collect())
}

/// A value as typed JSON (with the rules tags). Always succeeds: every value prints.
pub fn to_json(v: &Val) -> Json {
    match v {
        Val::Null => Json::Null,
        Val::Bool(b) => Json::Bool(*b),
        Val::Int(i) => typed_json::to_json(&Value::Integer(*i)),
        Val::Float(f) => typed_json::to_json(&Value::Double(*f)),
        Val::Str(s) => Json::String(s.clone()),
        Val::Bytes(b) => typed_json::to_json(&Value::Bytes(b.clone())),
        Val::Timestamp(t) => tagged("$timestamp", Json::String(format_timestamp(*t))),
        Val::Duration(d) => tagged("$duration", Json::String(d.to_string())),
        Val::LatLng(lat, lng) => typed_json::to_json(&Value::GeoPoint(docstore_core::GeoPoint {
            latitude: *lat,
            longitude: *lng,
        })),
        Val::Path(p) => tagged("$path", string_list(p)),
        Val::List(items) => Json::Array(items.iter().map(to_json).collect()),
        Val::Set(items) => tagged("$set", Json::Array(items.iter().map(to_json).collect())),
        Val::Map(m) => {
            let fields: JsonMap<String, Json> =
                m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect();
            let only_tag = m.len() == 1
                && m.keys()
                    .next()
                    .is_some_and(|k| typed_json::is_tag(k) || RULES_TAGS.contains(&k.as_str()));
            if only_tag {
                tagged("$map", Json::Object(fields))
            } else {
                Json::Object(fields)
            }
        }
        Val::MapDiff(d) => {
            let mut m = JsonMap::new();
            m.insert("added".into(), string_list(&d.added));
            m.insert("removed".into(), string_list(&d.removed));
            m.insert("changed".into(), string_list(&d.changed));
            m.insert("unchanged".into(), string_list(&d.unchanged));
            tagged("$mapdiff", Json::Object(m))
        }
    }
}
