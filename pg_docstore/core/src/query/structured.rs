//! The structured JSON form: Firestore's `StructuredQuery` (REST/JSON spelling) with values in
//! typed JSON instead of Firestore's `Value` proto, plus `parent`, `limitToLast` and
//! `aggregations` (Firestore's `StructuredAggregationQuery.aggregations`). See
//! `docs/query.md`.
//!
//! ```json
//! {"parent": "restaurants/one",
//!  "from": [{"collectionId": "ratings", "allDescendants": false}],
//!  "where": {"fieldFilter": {"field": {"fieldPath": "rating"}, "op": "GREATER_THAN_OR_EQUAL", "value": 3}},
//!  "orderBy": [{"field": {"fieldPath": "time"}, "direction": "DESCENDING"}],
//!  "limit": 10}
//! ```

use serde_json::{json, Map as JsonMap, Value as Json};

use crate::path::{FieldPath, ResourcePath};
use crate::typed_json;
use crate::value::Value;

use super::ast::{
    AggregateFunction, Aggregation, Cursor, Direction, FieldOp, Filter, Limit, Order, Query,
    Selection, Source, UnaryOp, MAX_LIMIT,
};
use super::error::QueryError;

type Result<T> = std::result::Result<T, QueryError>;

const QUERY_MEMBERS: [&str; 11] = [
    "parent",
    "from",
    "select",
    "where",
    "orderBy",
    "startAt",
    "endAt",
    "offset",
    "limit",
    "limitToLast",
    "aggregations",
];

/// Parse the structured JSON form from text.
///
/// # Errors
/// [`QueryError::Syntax`] (with line and column) for malformed JSON, otherwise as
/// [`parse_structured`].
pub fn parse_structured_str(text: &str) -> Result<Query> {
    crate::typed_json::refuse_reserved(text).map_err(|source| QueryError::InvalidValue {
        at: "<root>".into(),
        source,
    })?;
    let json: Json = serde_json::from_str(text).map_err(|e| {
        let (line, column) = (e.line() as u64, e.column() as u64);
        let offset = text
            .split_inclusive('\n')
            .take(e.line().saturating_sub(1))
            .map(str::len)
            .sum::<usize>()
            + e.column().saturating_sub(1);
        QueryError::Syntax {
            message: format!("invalid JSON: {e}"),
            line,
            column,
            offset: offset.min(text.len()),
        }
    })?;
    parse_structured(&json)
}

/// Parse the structured JSON form into a validated [`Query`]. Also accepts Firestore's
/// wrappers `{"structuredQuery": {..}, "aggregations": [..]}` and
/// `{"structuredAggregationQuery": {..}}`.
///
/// # Errors
/// [`QueryError::InvalidStructure`] for a wrong shape (unknown members are refused),
/// [`QueryError::InvalidValue`] for bad typed JSON, and the rules of [`Query::validate`].
pub fn parse_structured(json: &Json) -> Result<Query> {
    let root = "<root>";
    let Json::Object(members) = json else {
        return Err(invalid(root, "expected a JSON object"));
    };
    if let Some(inner) = members.get("structuredAggregationQuery") {
        only(members, root, &["structuredAggregationQuery"])?;
        return parse_structured(inner);
    }
    if let Some(inner) = members.get("structuredQuery") {
        only(members, root, &["structuredQuery", "aggregations"])?;
        let mut query = plain_query(inner, "structuredQuery", false)?;
        if let Some(aggregations) = members.get("aggregations") {
            query.selection =
                Selection::Aggregations(parse_aggregations(aggregations, "aggregations")?);
        }
        return query.validate();
    }
    plain_query(json, root, true)?.validate()
}

fn invalid(at: &str, message: impl Into<String>) -> QueryError {
    QueryError::InvalidStructure {
        at: at.to_owned(),
        message: message.into(),
    }
}

fn child(at: &str, key: &str) -> String {
    if at == "<root>" {
        key.to_owned()
    } else {
        format!("{at}.{key}")
    }
}

fn only(members: &JsonMap<String, Json>, at: &str, allowed: &[&str]) -> Result<()> {
    match members.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(invalid(
            &child(at, key),
            format!("unknown member (expected {})", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

fn object<'j>(json: &'j Json, at: &str, allowed: &[&str]) -> Result<&'j JsonMap<String, Json>> {
    let Json::Object(members) = json else {
        return Err(invalid(at, "expected an object"));
    };
    only(members, at, allowed)?;
    Ok(members)
}

fn required<'j>(members: &'j JsonMap<String, Json>, at: &str, key: &str) -> Result<&'j Json> {
    members
        .get(key)
        .ok_or_else(|| invalid(&child(at, key), "missing"))
}

fn string<'j>(json: &'j Json, at: &str) -> Result<&'j str> {
    json.as_str()
        .ok_or_else(|| invalid(at, "expected a string"))
}

fn array<'j>(json: &'j Json, at: &str) -> Result<&'j [Json]> {
    json.as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| invalid(at, "expected an array"))
}

fn boolean(json: Option<&Json>, at: &str) -> Result<bool> {
    match json {
        None | Some(Json::Null) => Ok(false),
        Some(Json::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(at, "expected true or false")),
    }
}

/// An integer: a JSON number or a decimal string (proto JSON writes int64 as a string), or
/// `{"value": n}` (a wrapper type).
fn integer(json: &Json, at: &str) -> Result<i128> {
    match json {
        Json::Number(n) => n
            .to_string()
            .parse::<i128>()
            .map_err(|_| invalid(at, "expected a whole number")),
        Json::String(s) => s
            .parse::<i128>()
            .map_err(|_| invalid(at, "expected a whole number")),
        Json::Object(members) if members.len() == 1 => match members.get("value") {
            Some(inner) => integer(inner, &child(at, "value")),
            None => Err(invalid(at, "expected a whole number")),
        },
        _ => Err(invalid(at, "expected a whole number")),
    }
}

fn limit_value(json: &Json, at: &str, what: &'static str) -> Result<u32> {
    let n = integer(json, at)?;
    u32::try_from(n)
        .ok()
        .filter(|n| *n <= MAX_LIMIT)
        .ok_or_else(|| QueryError::InvalidLimit {
            what,
            value: n.to_string(),
            reason: "must be between 0 and 2147483647",
        })
}

fn value(json: &Json, at: &str) -> Result<Value> {
    typed_json::from_json(json).map_err(|source| QueryError::InvalidValue {
        at: at.to_owned(),
        source,
    })
}

fn field_reference(json: &Json, at: &str) -> Result<FieldPath> {
    let members = object(json, at, &["fieldPath"])?;
    let text = string(required(members, at, "fieldPath")?, &child(at, "fieldPath"))?;
    FieldPath::parse(text).map_err(|e| QueryError::InvalidFieldPath {
        path: text.to_owned(),
        reason: e.to_string(),
    })
}

fn plain_query(json: &Json, at: &str, aggregations_allowed: bool) -> Result<Query> {
    let allowed: &[&str] = if aggregations_allowed {
        &QUERY_MEMBERS
    } else {
        &QUERY_MEMBERS[..QUERY_MEMBERS.len() - 1]
    };
    let members = object(json, at, allowed)?;
    let parent = match members.get("parent") {
        None | Some(Json::Null) => None,
        Some(json) => {
            let at = child(at, "parent");
            let text = string(json, &at)?;
            parse_parent(text)?
        }
    };
    let from_at = child(at, "from");
    let from = array(required(members, at, "from")?, &from_at)?;
    let [selector] = from else {
        return Err(invalid(
            &from_at,
            "expected exactly one collection selector",
        ));
    };
    let selector_at = format!("{from_at}[0]");
    let selector = object(selector, &selector_at, &["collectionId", "allDescendants"])?;
    let collection_id = string(
        required(selector, &selector_at, "collectionId")?,
        &child(&selector_at, "collectionId"),
    )?;
    let all_descendants = boolean(
        selector.get("allDescendants"),
        &child(&selector_at, "allDescendants"),
    )?;
    let mut query = Query::new(Source {
        parent,
        collection_id: collection_id.to_owned(),
        all_descendants,
    });
    if let Some(select) = members.get("select") {
        let select_at = child(at, "select");
        let select = object(select, &select_at, &["fields"])?;
        let fields_at = child(&select_at, "fields");
        let fields = match select.get("fields") {
            None => &[][..],
            Some(fields) => array(fields, &fields_at)?,
        };
        query.selection = Selection::Fields(
            fields
                .iter()
                .enumerate()
                .map(|(i, f)| field_reference(f, &format!("{fields_at}[{i}]")))
                .collect::<Result<_>>()?,
        );
    }
    if let Some(filter) = members.get("where") {
        query.filter = Some(parse_filter(filter, &child(at, "where"))?);
    }
    if let Some(orders) = members.get("orderBy") {
        let orders_at = child(at, "orderBy");
        for (i, order) in array(orders, &orders_at)?.iter().enumerate() {
            let order_at = format!("{orders_at}[{i}]");
            let members = object(order, &order_at, &["field", "direction"])?;
            let field = field_reference(
                required(members, &order_at, "field")?,
                &child(&order_at, "field"),
            )?;
            let direction = match members.get("direction") {
                None | Some(Json::Null) => Direction::Ascending,
                Some(d) => match string(d, &child(&order_at, "direction"))? {
                    "ASCENDING" | "DIRECTION_UNSPECIFIED" => Direction::Ascending,
                    "DESCENDING" => Direction::Descending,
                    other => {
                        return Err(invalid(
                            &child(&order_at, "direction"),
                            format!(
                                "unknown direction \"{other}\" (expected ASCENDING or DESCENDING)"
                            ),
                        ))
                    }
                },
            };
            query.order_by.push(Order::new(field, direction));
        }
    }
    if let Some(start) = members.get("startAt") {
        let (values, before) = parse_cursor(start, &child(at, "startAt"))?;
        query.start = Some(Cursor {
            values,
            inclusive: before,
        });
    }
    if let Some(end) = members.get("endAt") {
        let (values, before) = parse_cursor(end, &child(at, "endAt"))?;
        query.end = Some(Cursor {
            values,
            inclusive: !before,
        });
    }
    if let Some(offset) = members.get("offset") {
        query.offset = limit_value(offset, &child(at, "offset"), "offset")?;
    }
    match (members.get("limit"), members.get("limitToLast")) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                &child(at, "limitToLast"),
                "limit and limitToLast cannot both be given",
            ))
        }
        (Some(limit), None) => {
            query.limit = Some(Limit::First(limit_value(
                limit,
                &child(at, "limit"),
                "limit",
            )?));
        }
        (None, Some(limit)) => {
            query.limit = Some(Limit::Last(limit_value(
                limit,
                &child(at, "limitToLast"),
                "limitToLast",
            )?));
        }
        (None, None) => {}
    }
    if let Some(aggregations) = members.get("aggregations") {
        if matches!(query.selection, Selection::Fields(_)) {
            return Err(invalid(
                &child(at, "aggregations"),
                "a query has either select or aggregations, not both",
            ));
        }
        query.selection = Selection::Aggregations(parse_aggregations(
            aggregations,
            &child(at, "aggregations"),
        )?);
    }
    Ok(query)
}

fn parse_parent(text: &str) -> Result<Option<ResourcePath>> {
    if text.trim_matches('/').is_empty() {
        return Ok(None);
    }
    let invalid = |reason: String| QueryError::InvalidCollection {
        path: text.to_owned(),
        reason,
    };
    let path = ResourcePath::parse(text).map_err(|e| invalid(e.to_string()))?;
    if !path.is_document() {
        return Err(invalid(
            "parent must be a document path (or empty for the root)".into(),
        ));
    }
    Ok(Some(path))
}

fn parse_cursor(json: &Json, at: &str) -> Result<(Vec<Value>, bool)> {
    let members = object(json, at, &["values", "before"])?;
    let values_at = child(at, "values");
    let values = array(required(members, at, "values")?, &values_at)?
        .iter()
        .enumerate()
        .map(|(i, v)| value(v, &format!("{values_at}[{i}]")))
        .collect::<Result<_>>()?;
    Ok((
        values,
        boolean(members.get("before"), &child(at, "before"))?,
    ))
}

fn parse_filter(json: &Json, at: &str) -> Result<Filter> {
    let members = object(json, at, &["fieldFilter", "compositeFilter", "unaryFilter"])?;
    let mut entries = members.iter();
    let (Some((kind, body)), None) = (entries.next(), entries.next()) else {
        return Err(invalid(
            at,
            "expected exactly one of fieldFilter, compositeFilter, unaryFilter",
        ));
    };
    let at = child(at, kind);
    match kind.as_str() {
        "fieldFilter" => {
            let members = object(body, &at, &["field", "op", "value"])?;
            let field = field_reference(required(members, &at, "field")?, &child(&at, "field"))?;
            let op_at = child(&at, "op");
            let op_name = string(required(members, &at, "op")?, &op_at)?;
            let op = FieldOp::ALL
                .into_iter()
                .find(|op| op.structured_name() == op_name)
                .ok_or_else(|| {
                    invalid(
                        &op_at,
                        format!(
                            "unknown field filter operator \"{op_name}\" (expected one of {})",
                            FieldOp::ALL.map(FieldOp::structured_name).join(", ")
                        ),
                    )
                })?;
            let value = value(required(members, &at, "value")?, &child(&at, "value"))?;
            Ok(Filter::Field { field, op, value })
        }
        "unaryFilter" => {
            let members = object(body, &at, &["field", "op"])?;
            let field = field_reference(required(members, &at, "field")?, &child(&at, "field"))?;
            let op_at = child(&at, "op");
            let op_name = string(required(members, &at, "op")?, &op_at)?;
            let op = UnaryOp::ALL
                .into_iter()
                .find(|op| op.structured_name() == op_name)
                .ok_or_else(|| {
                    invalid(
                        &op_at,
                        format!(
                            "unknown unary filter operator \"{op_name}\" (expected IS_NULL, IS_NAN, IS_NOT_NULL or IS_NOT_NAN)"
                        ),
                    )
                })?;
            Ok(Filter::Unary { field, op })
        }
        _ => {
            let members = object(body, &at, &["op", "filters"])?;
            let op_at = child(&at, "op");
            let and = match string(required(members, &at, "op")?, &op_at)? {
                "AND" => true,
                "OR" => false,
                other => {
                    return Err(invalid(
                        &op_at,
                        format!("unknown composite operator \"{other}\" (expected AND or OR)"),
                    ))
                }
            };
            let filters_at = child(&at, "filters");
            let filters = array(required(members, &at, "filters")?, &filters_at)?
                .iter()
                .enumerate()
                .map(|(i, f)| parse_filter(f, &format!("{filters_at}[{i}]")))
                .collect::<Result<Vec<_>>>()?;
            Ok(if and {
                Filter::And(filters)
            } else {
                Filter::Or(filters)
            })
        }
    }
}

fn parse_aggregations(json: &Json, at: &str) -> Result<Vec<Aggregation>> {
    let mut unnamed = 0;
    array(json, at)?
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let at = format!("{at}[{i}]");
            let members = object(item, &at, &["alias", "count", "sum", "avg"])?;
            let functions: Vec<&String> = members.keys().filter(|k| *k != "alias").collect();
            let [kind] = functions.as_slice() else {
                return Err(invalid(&at, "expected exactly one of count, sum, avg"));
            };
            let body_at = child(&at, kind);
            let body = members.get(kind.as_str()).unwrap_or(&Json::Null);
            let function = match kind.as_str() {
                "count" => {
                    let count = object(body, &body_at, &["upTo"])?;
                    let up_to = match count.get("upTo") {
                        None | Some(Json::Null) => None,
                        Some(n) => {
                            let n = integer(n, &child(&body_at, "upTo"))?;
                            Some(u64::try_from(n).map_err(|_| QueryError::InvalidLimit {
                                what: "count upTo",
                                value: n.to_string(),
                                reason: "must be between 1 and 9223372036854775807",
                            })?)
                        }
                    };
                    AggregateFunction::Count { up_to }
                }
                "sum" | "avg" => {
                    let members = object(body, &body_at, &["field"])?;
                    let field = field_reference(
                        required(members, &body_at, "field")?,
                        &child(&body_at, "field"),
                    )?;
                    if kind.as_str() == "sum" {
                        AggregateFunction::Sum(field)
                    } else {
                        AggregateFunction::Avg(field)
                    }
                }
                _ => return Err(invalid(&at, "expected exactly one of count, sum, avg")),
            };
            let alias = match members.get("alias") {
                None | Some(Json::Null) => {
                    unnamed += 1;
                    format!("field_{unnamed}")
                }
                Some(alias) => string(alias, &child(&at, "alias"))?.to_owned(),
            };
            Ok(Aggregation { alias, function })
        })
        .collect()
}

fn field_json(field: &FieldPath) -> Json {
    json!({ "fieldPath": field.to_string() })
}

fn filter_json(filter: &Filter) -> Json {
    match filter {
        Filter::Field { field, op, value } => json!({"fieldFilter": {
            "field": field_json(field),
            "op": op.structured_name(),
            "value": typed_json::to_json(value),
        }}),
        Filter::Unary { field, op } => json!({"unaryFilter": {
            "op": op.structured_name(),
            "field": field_json(field),
        }}),
        Filter::And(children) | Filter::Or(children) => json!({"compositeFilter": {
            "op": if matches!(filter, Filter::And(_)) { "AND" } else { "OR" },
            "filters": children.iter().map(filter_json).collect::<Vec<_>>(),
        }}),
    }
}

fn cursor_json(cursor: &Cursor, before: bool) -> Json {
    json!({
        "values": cursor.values.iter().map(typed_json::to_json).collect::<Vec<_>>(),
        "before": before,
    })
}

/// The structured JSON form of a query (every member spelled out; `parse_structured` of it
/// gives the query back).
pub fn to_structured(query: &Query) -> Json {
    let mut out = JsonMap::new();
    if let Some(parent) = &query.source.parent {
        out.insert("parent".into(), Json::String(parent.to_string()));
    }
    out.insert(
        "from".into(),
        json!([{
            "collectionId": query.source.collection_id,
            "allDescendants": query.source.all_descendants,
        }]),
    );
    match &query.selection {
        Selection::Documents => {}
        Selection::Fields(fields) => {
            out.insert(
                "select".into(),
                json!({"fields": fields.iter().map(field_json).collect::<Vec<_>>()}),
            );
        }
        Selection::Aggregations(aggregations) => {
            let items = aggregations
                .iter()
                .map(|a| match &a.function {
                    AggregateFunction::Count { up_to: None } => {
                        json!({"alias": a.alias, "count": {}})
                    }
                    AggregateFunction::Count { up_to: Some(n) } => {
                        json!({"alias": a.alias, "count": {"upTo": n}})
                    }
                    AggregateFunction::Sum(field) => {
                        json!({"alias": a.alias, "sum": {"field": field_json(field)}})
                    }
                    AggregateFunction::Avg(field) => {
                        json!({"alias": a.alias, "avg": {"field": field_json(field)}})
                    }
                })
                .collect::<Vec<_>>();
            out.insert("aggregations".into(), Json::Array(items));
        }
    }
    if let Some(filter) = &query.filter {
        out.insert("where".into(), filter_json(filter));
    }
    if !query.order_by.is_empty() {
        let orders = query
            .order_by
            .iter()
            .map(|o| {
                json!({
                    "field": field_json(&o.field),
                    "direction": match o.direction {
                        Direction::Ascending => "ASCENDING",
                        Direction::Descending => "DESCENDING",
                    },
                })
            })
            .collect::<Vec<_>>();
        out.insert("orderBy".into(), Json::Array(orders));
    }
    if let Some(start) = &query.start {
        out.insert("startAt".into(), cursor_json(start, start.inclusive));
    }
    if let Some(end) = &query.end {
        out.insert("endAt".into(), cursor_json(end, !end.inclusive));
    }
    if query.offset > 0 {
        out.insert("offset".into(), json!(query.offset));
    }
    match query.limit {
        Some(Limit::First(n)) => {
            out.insert("limit".into(), json!(n));
        }
        Some(Limit::Last(n)) => {
            out.insert("limitToLast".into(), json!(n));
        }
        None => {}
    }
    Json::Object(out)
}

impl Query {
    /// See [`parse_structured`].
    ///
    /// # Errors
    /// As [`parse_structured`].
    pub fn from_structured(json: &Json) -> Result<Query> {
        parse_structured(json)
    }

    /// See [`to_structured`].
    pub fn to_structured(&self) -> Json {
        to_structured(self)
    }
}
