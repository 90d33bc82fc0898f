//! Firestore's `StructuredQuery` (the gRPC RunQuery, docs/grpc.md) as core's structured
//! query form ([`crate::query::structured`], docs/query.md): the same members in their JSON
//! spelling, values as typed JSON, the parent as a path. Feature `firestore-proto`. What the
//! structured form refuses (a bad operator, a bad field path) the query parser reports.
//!
//! `find_nearest` (vector search) is refused here: the gRPC front end does not serve it yet.

use googleapis_tonic_google_firestore_v1::google::firestore::v1::structured_aggregation_query::{
    aggregation::Operator as AggregationOperator, QueryType as AggregationQueryType,
};
use googleapis_tonic_google_firestore_v1::google::firestore::v1::structured_query::{
    composite_filter, field_filter, filter::FilterType, unary_filter, CollectionSelector,
    Direction, FieldReference, Filter, Order,
};
use googleapis_tonic_google_firestore_v1::google::firestore::v1::{
    value::ValueType, Cursor, StructuredAggregationQuery, StructuredQuery, Value as ProtoValue,
};
use serde_json::{json, Map as JsonMap, Value as Json};

use crate::path::ResourcePath;
use crate::proto::{value_from_proto, DatabaseName, ProtoError};
use crate::typed_json;

/// The structured form of `query` under `parent` (`None`: the database's root).
///
/// # Errors
/// [`ProtoError`] (INVALID_ARGUMENT) for a value that does not convert, an operator or
/// direction Firestore does not define, `find_nearest`.
pub fn query_from_proto(
    parent: Option<&ResourcePath>,
    query: &StructuredQuery,
    db: &DatabaseName,
) -> Result<Json, ProtoError> {
    if query.find_nearest.is_some() {
        return Err(bad_query(
            "find_nearest (vector search) is not served over gRPC yet",
        ));
    }
    let mut out = JsonMap::new();
    if let Some(parent) = parent {
        out.insert("parent".into(), Json::String(parent.to_string()));
    }
    out.insert(
        "from".into(),
        Json::Array(query.from.iter().map(selector).collect()),
    );
    if let Some(select) = &query.select {
        let fields: Vec<Json> = select.fields.iter().map(field).collect();
        out.insert("select".into(), json!({ "fields": fields }));
    }
    if let Some(filter) = &query.r#where {
        out.insert("where".into(), filter_json(filter, db)?);
    }
    if !query.order_by.is_empty() {
        let orders = query
            .order_by
            .iter()
            .map(order)
            .collect::<Result<Vec<_>, _>>()?;
        out.insert("orderBy".into(), Json::Array(orders));
    }
    if let Some(cursor) = &query.start_at {
        out.insert("startAt".into(), cursor_json(cursor, db)?);
    }
    if let Some(cursor) = &query.end_at {
        out.insert("endAt".into(), cursor_json(cursor, db)?);
    }
    if query.offset != 0 {
        out.insert("offset".into(), Json::from(query.offset));
    }
    if let Some(limit) = query.limit {
        out.insert("limit".into(), Json::from(limit));
    }
    Ok(Json::Object(out))
}

/// The structured form of an aggregation query: its query's form with `aggregations`
/// (`{"alias", "count": {"upTo"}}`, `{"alias", "sum": {"field"}}`, `{"alias", "avg": {"field"}}`).
///
/// # Errors
/// As [`query_from_proto`]; no aggregation ("Aggregations can not be empty"), an alias twice
/// ("Aggregation aliases contain duplicate alias"), an aggregation without an operator, a
/// missing query.
pub fn aggregation_query_from_proto(
    parent: Option<&ResourcePath>,
    query: &StructuredAggregationQuery,
    db: &DatabaseName,
) -> Result<Json, ProtoError> {
    let Some(AggregationQueryType::StructuredQuery(inner)) = &query.query_type else {
        return Err(bad_query("an aggregation query needs a structured_query"));
    };
    if query.aggregations.is_empty() {
        return Err(bad_query("Aggregations can not be empty"));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut aggregations = Vec::with_capacity(query.aggregations.len());
    for a in &query.aggregations {
        if !a.alias.is_empty() && !seen.insert(a.alias.as_str()) {
            return Err(bad_query(&format!(
                "Aggregation aliases contain duplicate alias {}",
                a.alias
            )));
        }
        let mut item = match &a.operator {
            Some(AggregationOperator::Count(c)) => match c.up_to {
                Some(n) => json!({"count": {"upTo": n}}),
                None => json!({"count": {}}),
            },
            Some(AggregationOperator::Sum(sum)) => {
                json!({"sum": {"field": sum.field.as_ref().map_or(Json::Null, field)}})
            }
            Some(AggregationOperator::Avg(avg)) => {
                json!({"avg": {"field": avg.field.as_ref().map_or(Json::Null, field)}})
            }
            None => return Err(bad_query("an aggregation needs count, sum or avg")),
        };
        if let (false, Some(obj)) = (a.alias.is_empty(), item.as_object_mut()) {
            obj.insert("alias".into(), Json::String(a.alias.clone()));
        }
        aggregations.push(item);
    }
    let mut json = query_from_proto(parent, inner, db)?;
    if let Some(obj) = json.as_object_mut() {
        obj.insert("aggregations".into(), Json::Array(aggregations));
    }
    Ok(json)
}

fn selector(s: &CollectionSelector) -> Json {
    json!({"collectionId": s.collection_id, "allDescendants": s.all_descendants})
}

fn field(f: &FieldReference) -> Json {
    json!({ "fieldPath": f.field_path })
}

fn order(o: &Order) -> Result<Json, ProtoError> {
    let field = o.field.as_ref().map_or(Json::Null, field);
    let direction = Direction::try_from(o.direction)
        .map_err(|_| bad_query(&format!("order direction {} is not defined", o.direction)))?;
    Ok(match direction {
        Direction::Unspecified => json!({ "field": field }),
        d => json!({"field": field, "direction": d.as_str_name()}),
    })
}

fn cursor_json(c: &Cursor, db: &DatabaseName) -> Result<Json, ProtoError> {
    let values = c
        .values
        .iter()
        .map(|v| match position_name(v, db) {
            Some(name) => Ok(Json::String(name)),
            None => value_from_proto(v, db).map(|v| typed_json::to_json(&v)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({"values": values, "before": c.before}))
}

/// A cursor's reference to `{collection}\0/__id-9223372036854775808__` (python-firestore's
/// `recursive()` end bound: after every document under `{collection}`) names no document, and
/// U+0000 is refused in names. Its position is the one before every document of the
/// collection `{collection}\u{1}` (no name lies between: no name holds U+0000), so it goes to
/// the query as that name's text, which the cursor normalisation reads as the position
/// (docs/query.md, "Cursors"). Any other value: `None` (converted as a value, which checks it).
fn position_name(v: &ProtoValue, db: &DatabaseName) -> Option<String> {
    let Some(ValueType::ReferenceValue(name)) = &v.value_type else {
        return None;
    };
    let (named, rest) = DatabaseName::split_name(name)?;
    let path = rest.strip_prefix("/documents/")?;
    let collection = path
        .strip_suffix(crate::query::MIN_NUMERIC_ID)?
        .strip_suffix("\0/")?;
    if named.database != db.database || collection.contains('\0') {
        return None;
    }
    Some(format!(
        "{collection}\u{1}/{}",
        crate::query::MIN_NUMERIC_ID
    ))
}

fn filter_json(f: &Filter, db: &DatabaseName) -> Result<Json, ProtoError> {
    Ok(match &f.filter_type {
        None => return Err(bad_query("a filter needs one of its kinds")),
        Some(FilterType::CompositeFilter(c)) => {
            let op = composite_filter::Operator::try_from(c.op)
                .map_err(|_| bad_query(&format!("composite operator {} is not defined", c.op)))?;
            let filters = c
                .filters
                .iter()
                .map(|f| filter_json(f, db))
                .collect::<Result<Vec<_>, _>>()?;
            json!({"compositeFilter": {"op": op.as_str_name(), "filters": filters}})
        }
        Some(FilterType::FieldFilter(ff)) => {
            let op = field_filter::Operator::try_from(ff.op)
                .map_err(|_| bad_query(&format!("field operator {} is not defined", ff.op)))?;
            let value = match &ff.value {
                Some(v) => typed_json::to_json(&value_from_proto(v, db)?),
                None => return Err(bad_query("a field filter needs a value")),
            };
            let field = ff.field.as_ref().map_or(Json::Null, field);
            json!({"fieldFilter": {"field": field, "op": op.as_str_name(), "value": value}})
        }
        Some(FilterType::UnaryFilter(u)) => {
            let op = unary_filter::Operator::try_from(u.op)
                .map_err(|_| bad_query(&format!("unary operator {} is not defined", u.op)))?;
            let field = match &u.operand_type {
                Some(unary_filter::OperandType::Field(f)) => field(f),
                None => Json::Null,
            };
            json!({"unaryFilter": {"field": field, "op": op.as_str_name()}})
        }
    })
}

fn bad_query(reason: &str) -> ProtoError {
    ProtoError::BadQuery {
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::ProtoValue;
    use crate::query::structured::parse_structured;
    use googleapis_tonic_google_firestore_v1::google::firestore::v1::structured_query::{
        CompositeFilter, FieldFilter, Projection, UnaryFilter,
    };
    use googleapis_tonic_google_firestore_v1::google::firestore::v1::value::ValueType;

    fn db() -> DatabaseName {
        DatabaseName {
            project: "p".into(),
            database: "(default)".into(),
        }
    }

    fn field_ref(p: &str) -> Option<FieldReference> {
        Some(FieldReference {
            field_path: p.into(),
        })
    }

    fn int(i: i64) -> ProtoValue {
        ProtoValue {
            value_type: Some(ValueType::IntegerValue(i)),
        }
    }

    #[test]
    fn every_member_converts_to_a_query_core_parses() {
        let or = Filter {
            filter_type: Some(FilterType::CompositeFilter(CompositeFilter {
                op: composite_filter::Operator::Or as i32,
                filters: vec![
                    Filter {
                        filter_type: Some(FilterType::FieldFilter(FieldFilter {
                            field: field_ref("a"),
                            op: field_filter::Operator::In as i32,
                            value: Some(ProtoValue {
                                value_type: Some(ValueType::ArrayValue(crate::proto::ArrayValue {
                                    values: vec![int(1), int(2)],
                                })),
                            }),
                        })),
                    },
                    Filter {
                        filter_type: Some(FilterType::UnaryFilter(UnaryFilter {
                            op: unary_filter::Operator::IsNull as i32,
                            operand_type: Some(unary_filter::OperandType::Field(FieldReference {
                                field_path: "b".into(),
                            })),
                        })),
                    },
                ],
            })),
        };
        let query = StructuredQuery {
            select: Some(Projection {
                fields: vec![FieldReference {
                    field_path: "a".into(),
                }],
            }),
            from: vec![CollectionSelector {
                collection_id: "c".into(),
                all_descendants: true,
            }],
            r#where: Some(or),
            order_by: vec![Order {
                field: field_ref("a"),
                direction: Direction::Descending as i32,
            }],
            start_at: Some(Cursor {
                values: vec![int(5)],
                before: true,
            }),
            end_at: Some(Cursor {
                values: vec![int(1)],
                before: false,
            }),
            offset: 2,
            limit: Some(3),
            find_nearest: None,
        };
        let parent = ResourcePath::parse("r/one").unwrap_or_else(|e| unreachable!("{e}"));
        let json =
            query_from_proto(Some(&parent), &query, &db()).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            json,
            json!({
                "parent": "r/one",
                "from": [{"collectionId": "c", "allDescendants": true}],
                "select": {"fields": [{"fieldPath": "a"}]},
                "where": {"compositeFilter": {"op": "OR", "filters": [
                    {"fieldFilter": {"field": {"fieldPath": "a"}, "op": "IN", "value": [1, 2]}},
                    {"unaryFilter": {"field": {"fieldPath": "b"}, "op": "IS_NULL"}}
                ]}},
                "orderBy": [{"field": {"fieldPath": "a"}, "direction": "DESCENDING"}],
                "startAt": {"values": [5], "before": true},
                "endAt": {"values": [1], "before": false},
                "offset": 2,
                "limit": 3
            })
        );
        parse_structured(&json).unwrap_or_else(|e| unreachable!("{e}"));
    }

    #[test]
    fn undefined_operators_and_vector_search_are_refused() {
        let bad_op = StructuredQuery {
            r#where: Some(Filter {
                filter_type: Some(FilterType::FieldFilter(FieldFilter {
                    field: field_ref("a"),
                    op: 99,
                    value: Some(int(1)),
                })),
            }),
            ..Default::default()
        };
        assert!(query_from_proto(None, &bad_op, &db()).is_err());
        let bad_direction = StructuredQuery {
            order_by: vec![Order {
                field: field_ref("a"),
                direction: 7,
            }],
            ..Default::default()
        };
        assert!(query_from_proto(None, &bad_direction, &db()).is_err());
        let empty_filter = StructuredQuery {
            r#where: Some(Filter { filter_type: None }),
            ..Default::default()
        };
        assert!(query_from_proto(None, &empty_filter, &db()).is_err());
    }
}
