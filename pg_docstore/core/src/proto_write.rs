//! Firestore's `Write` (the gRPC Commit, docs/grpc.md) as items of our commit format
//! ([`crate::commit`], `docstore.commit`'s argument). Feature `firestore-proto`.
//!
//! One `Write` becomes one or two items; [`CommitWrite::last`] is the item whose update time
//! is the write's result:
//! - `delete` -> `{"delete"}`.
//! - `update` without a mask and without transforms -> `{"set", "data", "merge": false}`, or
//!   `{"create", "data"}` with the precondition `exists: false` (what the SDKs' `create()`
//!   sends: an existing document is ALREADY_EXISTS, as Firestore answers).
//! - `update` without a mask with transforms -> that set, then `{"update", "fields"}` with
//!   the transforms (the document exists by then).
//! - `update` with a mask: every masked field path is set to its value in the document, or
//!   deleted when the document does not hold it; transforms join them. With the precondition
//!   `exists: true` (what the SDKs' `update()` sends) it is one `{"update"}` item without
//!   the precondition (an update needs its document: a missing one is NOT_FOUND, as
//!   Firestore's "No document to update"); otherwise the document is first created when missing
//!   (`{"set", "data": {}, "merge": true}` with the precondition), as Firestore's upsert.
//! - `transform` (a write that is only transforms) -> `{"update", "fields"}` (the document
//!   must exist).
//!
//! Transforms: `set_to_server_value: REQUEST_TIME` -> `$serverTimestamp`, `increment`,
//! `maximum`, `minimum` -> `$increment`, `$max`, `$min`, `append_missing_elements` ->
//! `$arrayUnion`, `remove_all_from_array` -> `$arrayRemove`.
//!
//! A precondition `update_time` later than `now` is refused (INVALID_ARGUMENT), as Firestore
//! does: no document can have been updated in the future.

use googleapis_tonic_google_firestore_v1::google::firestore::v1::document_transform::field_transform::{
    ServerValue, TransformType,
};
use googleapis_tonic_google_firestore_v1::google::firestore::v1::document_transform::FieldTransform;
use googleapis_tonic_google_firestore_v1::google::firestore::v1::precondition::ConditionType;
use googleapis_tonic_google_firestore_v1::google::firestore::v1::write::Operation;
use googleapis_tonic_google_firestore_v1::google::firestore::v1::{
    Precondition as ProtoPrecondition, Write as ProtoWrite,
};
use serde_json::{json, Map as JsonMap, Value as Json};

use crate::path::{FieldPath, ResourcePath};
use crate::proto::{
    fields_from_proto, timestamp_from_proto, value_from_proto, DatabaseName, ProtoError,
};
use crate::typed_json;
use crate::value::{Map, Timestamp, Value};

/// One `Write` in our commit format.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitWrite {
    /// The document written.
    pub path: ResourcePath,
    /// Its commit items, in order.
    pub items: Vec<Json>,
    /// Whether it deletes its document (Firestore reports no update time then).
    pub delete: bool,
    /// The fields of its transforms, in order (its `transform_results` has one value each:
    /// [`transform_results`]).
    pub transforms: Vec<FieldPath>,
}

/// The commit items of `write` on database `db`, at time `now` (to refuse future preconditions).
///
/// # Errors
/// [`ProtoError`] (INVALID_ARGUMENT) for a write with no operation, a bad name or value, a
/// field path that does not parse, an unknown transform, a future `update_time` precondition.
pub fn write_from_proto(
    write: &ProtoWrite,
    db: &DatabaseName,
    now: Timestamp,
) -> Result<CommitWrite, ProtoError> {
    let precondition = write
        .current_document
        .as_ref()
        .map(|p| precondition_from_proto(p, now))
        .transpose()?
        .flatten();
    let mut transforms = transforms_from_proto(&write.update_transforms, db)?;
    let (path, items, delete) = match &write.operation {
        None => {
            return Err(bad_write(
                "a write needs an operation (update, delete or transform)",
            ))
        }
        Some(Operation::Delete(name)) => {
            let path = document_path(db, name)?;
            let mut item = json!({"delete": path.to_string()});
            with_precondition(&mut item, precondition);
            (path, vec![item], true)
        }
        Some(Operation::Transform(t)) => {
            let path = document_path(db, &t.document)?;
            transforms = transforms_from_proto(&t.field_transforms, db)?
                .into_iter()
                .chain(transforms)
                .collect();
            let fields: JsonMap<String, Json> = transforms.iter().cloned().collect();
            let mut item = json!({"update": path.to_string(), "fields": fields});
            with_precondition(&mut item, precondition);
            (path, vec![item], false)
        }
        Some(Operation::Update(doc)) => {
            let path = document_path(db, &doc.name)?;
            let data = fields_from_proto(&doc.fields, db)?;
            let items = match &write.update_mask {
                None => set_items(&path, &data, &transforms, precondition),
                Some(mask) => {
                    masked_items(&path, &data, &mask.field_paths, &transforms, precondition)?
                }
            };
            (path, items, false)
        }
    };
    let transforms = transforms
        .iter()
        .map(|(field, _)| {
            FieldPath::parse(field)
                .map_err(|e| bad_write(&format!("transform field path \"{field}\": {e}")))
        })
        .collect::<Result<Vec<FieldPath>, ProtoError>>()?;
    Ok(CommitWrite {
        path,
        items,
        delete,
        transforms,
    })
}

/// A write's `transform_results`: per transform of `write`, in order, its field's value in
/// `fields` (the document's fields after the write), or null where the document does not hold
/// it (none: a deleted or missing document).
pub fn transform_results(
    write: &CommitWrite,
    fields: Option<&Map>,
    db: &DatabaseName,
) -> Vec<crate::proto::ProtoValue> {
    write
        .transforms
        .iter()
        .map(|field| {
            let value = fields
                .and_then(|f| crate::index::lookup(f, field))
                .unwrap_or(&Value::Null);
            crate::proto::value_to_proto(value, db)
        })
        .collect()
}

/// A replacing set, then the transforms.
fn set_items(
    path: &ResourcePath,
    data: &Map,
    transforms: &[(String, Json)],
    precondition: Option<Json>,
) -> Vec<Json> {
    let data = typed_json::to_json(&Value::Map(data.clone()));
    let set = if precondition == Some(json!({"exists": false})) {
        // What the SDKs' `create()` sends: an existing document is ALREADY_EXISTS.
        json!({"create": path.to_string(), "data": data})
    } else {
        let mut set = json!({"set": path.to_string(), "data": data, "merge": false});
        with_precondition(&mut set, precondition);
        set
    };
    let mut items = vec![set];
    if !transforms.is_empty() {
        let fields: JsonMap<String, Json> = transforms.iter().cloned().collect();
        items.push(json!({"update": path.to_string(), "fields": fields}));
    }
    items
}

/// The masked fields (value or delete) and the transforms, on an existing document or an
/// upsert.
fn masked_items(
    path: &ResourcePath,
    data: &Map,
    mask: &[String],
    transforms: &[(String, Json)],
    precondition: Option<Json>,
) -> Result<Vec<Json>, ProtoError> {
    let mut fields = JsonMap::new();
    for text in mask {
        let field = FieldPath::parse(text)
            .map_err(|e| bad_write(&format!("update_mask field path \"{text}\": {e}")))?;
        let value =
            value_at(data, &field).map_or_else(|| json!({"$delete": true}), typed_json::to_json);
        fields.insert(text.clone(), value);
    }
    fields.extend(transforms.iter().cloned());
    let update_of =
        |fields: JsonMap<String, Json>| json!({"update": path.to_string(), "fields": fields});
    if precondition == Some(json!({"exists": true})) {
        // An update needs its document: a missing one is NOT_FOUND (Firestore's "No document
        // to update"), not a failed precondition.
        return Ok(vec![update_of(fields)]);
    }
    let mut create = json!({"set": path.to_string(), "data": {}, "merge": true});
    with_precondition(&mut create, precondition);
    Ok(vec![create, update_of(fields)])
}

/// The value at `field` in `data`, if any.
fn value_at<'a>(data: &'a Map, field: &FieldPath) -> Option<&'a Value> {
    let mut segments = field.segments().iter();
    let mut at = data.get(segments.next()?.as_str())?;
    for segment in segments {
        let Value::Map(map) = at else { return None };
        at = map.get(segment.as_str())?;
    }
    Some(at)
}

/// Each field transform as a field path and our transform's JSON.
fn transforms_from_proto(
    transforms: &[FieldTransform],
    db: &DatabaseName,
) -> Result<Vec<(String, Json)>, ProtoError> {
    transforms
        .iter()
        .map(|t| {
            FieldPath::parse(&t.field_path).map_err(|e| {
                bad_write(&format!("transform field path \"{}\": {e}", t.field_path))
            })?;
            let value = |v: &crate::proto::ProtoValue| -> Result<Json, ProtoError> {
                Ok(typed_json::to_json(&value_from_proto(v, db)?))
            };
            let elements = |a: &crate::proto::ArrayValue| -> Result<Json, ProtoError> {
                a.values
                    .iter()
                    .map(value)
                    .collect::<Result<Vec<_>, _>>()
                    .map(Json::Array)
            };
            let transform = match &t.transform_type {
                Some(TransformType::SetToServerValue(v))
                    if *v == ServerValue::RequestTime as i32 =>
                {
                    json!({"$serverTimestamp": true})
                }
                Some(TransformType::Increment(v)) => json!({"$increment": value(v)?}),
                Some(TransformType::Maximum(v)) => json!({"$max": value(v)?}),
                Some(TransformType::Minimum(v)) => json!({"$min": value(v)?}),
                Some(TransformType::AppendMissingElements(a)) => {
                    json!({"$arrayUnion": elements(a)?})
                }
                Some(TransformType::RemoveAllFromArray(a)) => json!({"$arrayRemove": elements(a)?}),
                Some(TransformType::SetToServerValue(_)) | None => {
                    return Err(bad_write(&format!(
                        "the transform of \"{}\" is not one Firestore defines",
                        t.field_path
                    )))
                }
            };
            Ok((t.field_path.clone(), transform))
        })
        .collect()
}

/// Our precondition JSON (`None`: the precondition is empty).
fn precondition_from_proto(
    p: &ProtoPrecondition,
    now: Timestamp,
) -> Result<Option<Json>, ProtoError> {
    Ok(match &p.condition_type {
        None => None,
        Some(ConditionType::Exists(b)) => Some(json!({"exists": b})),
        Some(ConditionType::UpdateTime(t)) => {
            let t = timestamp_from_proto(t)?;
            if t > now {
                return Err(bad_write(&format!(
                    "the update_time precondition {} is in the future",
                    t.to_rfc3339()
                )));
            }
            Some(json!({"updateTime": t.to_rfc3339()}))
        }
    })
}

fn with_precondition(item: &mut Json, precondition: Option<Json>) {
    if let (Some(p), Some(obj)) = (precondition, item.as_object_mut()) {
        obj.insert("precondition".into(), p);
    }
}

/// The path of a document name of `db`.
fn document_path(db: &DatabaseName, name: &str) -> Result<ResourcePath, ProtoError> {
    match db.parse_name(name)? {
        Some(path) if path.is_document() => Ok(path),
        _ => Err(ProtoError::BadName {
            reason: format!(
                "\"{name}\" is not a document name of database \"{}\"",
                db.database
            ),
        }),
    }
}

fn bad_write(reason: &str) -> ProtoError {
    ProtoError::BadWrite {
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit::parse;
    use crate::proto::{timestamp_to_proto, ProtoValue};
    use googleapis_tonic_google_firestore_v1::google::firestore::v1::value::ValueType;
    use googleapis_tonic_google_firestore_v1::google::firestore::v1::{
        ArrayValue, Document, DocumentMask,
    };

    fn db() -> DatabaseName {
        DatabaseName {
            project: "p".into(),
            database: "(default)".into(),
        }
    }

    const NAME: &str = "projects/p/databases/(default)/documents/c/d";

    fn int(i: i64) -> ProtoValue {
        ProtoValue {
            value_type: Some(ValueType::IntegerValue(i)),
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_micros(1_700_000_000_000_000).unwrap_or_else(|| unreachable!())
    }

    fn update(fields: &[(&str, ProtoValue)]) -> ProtoWrite {
        ProtoWrite {
            operation: Some(Operation::Update(Document {
                name: NAME.into(),
                fields: fields
                    .iter()
                    .map(|(k, v)| ((*k).into(), v.clone()))
                    .collect(),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn exists(b: bool) -> Option<ProtoPrecondition> {
        Some(ProtoPrecondition {
            condition_type: Some(ConditionType::Exists(b)),
        })
    }

    /// The items of `write`, checked to be a commit core's parser accepts.
    fn items(write: &ProtoWrite) -> Vec<Json> {
        let converted =
            write_from_proto(write, &db(), now()).unwrap_or_else(|e| unreachable!("{e}"));
        parse(&Json::Array(converted.items.clone())).unwrap_or_else(|e| unreachable!("{e}"));
        converted.items
    }

    #[test]
    fn updates_become_sets_creates_and_masked_updates() {
        assert_eq!(
            items(&update(&[("a", int(1))])),
            [json!({"set": "c/d", "data": {"a": 1}, "merge": false})]
        );
        let mut create = update(&[("a", int(1))]);
        create.current_document = exists(false);
        assert_eq!(items(&create), [json!({"create": "c/d", "data": {"a": 1}})]);
        let mut masked = update(&[("a", int(1))]);
        masked.update_mask = Some(DocumentMask {
            field_paths: vec!["a".into(), "b.c".into()],
        });
        assert_eq!(
            items(&masked),
            [
                json!({"set": "c/d", "data": {}, "merge": true}),
                json!({"update": "c/d", "fields": {"a": 1, "b.c": {"$delete": true}}})
            ]
        );
        masked.current_document = exists(true);
        assert_eq!(
            items(&masked),
            [json!({"update": "c/d", "fields": {"a": 1, "b.c": {"$delete": true}}})]
        );
    }

    #[test]
    fn every_transform_converts() {
        let array = ArrayValue {
            values: vec![int(1)],
        };
        let mut write = update(&[]);
        write.update_transforms = [
            TransformType::SetToServerValue(ServerValue::RequestTime as i32),
            TransformType::Increment(int(1)),
            TransformType::Maximum(int(2)),
            TransformType::Minimum(int(3)),
            TransformType::AppendMissingElements(array.clone()),
            TransformType::RemoveAllFromArray(array),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, t)| FieldTransform {
            field_path: format!("f{i}"),
            transform_type: Some(t),
        })
        .collect();
        assert_eq!(
            items(&write)[1],
            json!({"update": "c/d", "fields": {
                "f0": {"$serverTimestamp": true}, "f1": {"$increment": 1}, "f2": {"$max": 2},
                "f3": {"$min": 3}, "f4": {"$arrayUnion": [1]}, "f5": {"$arrayRemove": [1]}
            }})
        );
        write.update_transforms[0].transform_type = Some(TransformType::SetToServerValue(0));
        assert!(write_from_proto(&write, &db(), now()).is_err());
    }

    #[test]
    fn transform_results_are_the_fields_after_the_write_in_order() {
        let mut write = update(&[]);
        write.update_transforms = ["b", "a.`x y`", "missing"]
            .into_iter()
            .map(|f| FieldTransform {
                field_path: f.into(),
                transform_type: Some(TransformType::Increment(int(1))),
            })
            .collect();
        let converted = write_from_proto(&write, &db(), now()).unwrap_or_else(|e| panic!("{e}"));
        let fields = match typed_json::parse(r#"{"a": {"x y": 7}, "b": 3}"#) {
            Ok(Value::Map(m)) => m,
            other => panic!("{other:?}"),
        };
        let null = ProtoValue {
            value_type: Some(ValueType::NullValue(0)),
        };
        assert_eq!(
            transform_results(&converted, Some(&fields), &db()),
            [int(3), int(7), null.clone()]
        );
        assert_eq!(
            transform_results(&converted, None, &db()),
            [null.clone(), null.clone(), null]
        );
    }

    #[test]
    fn deletes_and_preconditions() {
        let delete = ProtoWrite {
            operation: Some(Operation::Delete(NAME.into())),
            current_document: Some(ProtoPrecondition {
                condition_type: Some(ConditionType::UpdateTime(timestamp_to_proto(now()))),
            }),
            ..Default::default()
        };
        let converted =
            write_from_proto(&delete, &db(), now()).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(converted.delete);
        assert_eq!(
            converted.items,
            [json!({"delete": "c/d", "precondition": {"updateTime": now().to_rfc3339()}})]
        );
        let earlier = Timestamp::from_micros(now().micros() - 1).unwrap_or_else(|| unreachable!());
        let error = write_from_proto(&delete, &db(), earlier).err();
        assert!(
            matches!(error, Some(ProtoError::BadWrite { .. })),
            "{error:?}"
        );
        let none = ProtoWrite::default();
        assert!(write_from_proto(&none, &db(), now()).is_err());
        let other_db = ProtoWrite {
            operation: Some(Operation::Delete(
                "projects/p/databases/x/documents/c/d".into(),
            )),
            ..Default::default()
        };
        assert!(write_from_proto(&other_db, &db(), now()).is_err());
        let collection = ProtoWrite {
            operation: Some(Operation::Delete(
                "projects/p/databases/(default)/documents/c".into(),
            )),
            ..Default::default()
        };
        assert!(write_from_proto(&collection, &db(), now()).is_err());
    }
}
