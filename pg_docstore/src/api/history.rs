//! Reads at a past time (Firestore's `read_time`): the documents as they were at a time,
//! from the current entities and the version history (docs/storage.md, "Version history").
//! Each read first checks that the time is readable (`storage::versions::check_readable`:
//! inside the database's retention, or not before the newest commit), so a time older than
//! the history is refused (55000), never answered wrongly.

use std::collections::HashMap;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use docstore_core::encoding::{encode_name, ChildCollections};
use docstore_core::query::{aggregate, evaluate, result, Query, Selection};
use docstore_core::value::{Map, Value};
use docstore_core::ResourcePath;

use crate::errors::DocstoreError;
use crate::guc::database_id;
use crate::pg::jsonb::{JsonbOut, TypedJsonb};
use crate::pg::time::{from_timestamptz, to_timestamptz};
use crate::storage::versions::{self, Scope, Version};

/// The document `path` as it was at `read_time` (no row when it did not exist then), with its
/// create and update times; `get_document` at a past time. A client's read is decided by the
/// `get` rule on the document as it was (`resource` = null when it did not exist). 55000 for a
/// time older than the database's version history, 22023 for a time in the future.
///
/// ```sql
/// select * from docstore.get_document_at('restaurants/one', now() - interval '5 minutes');
/// ```
#[pg_extern(stable)]
fn get_document_at(
    path: &str,
    read_time: TimestampWithTimeZone,
) -> Result<
    TableIterator<
        'static,
        (
            name!(data, JsonbOut),
            name!(create_time, TimestampWithTimeZone),
            name!(update_time, TimestampWithTimeZone),
        ),
    >,
    ErrorReport,
> {
    let at = from_timestamptz(read_time);
    let path = ResourcePath::parse_document(path).map_err(DocstoreError::from)?;
    let database = database_id()?;
    let found = Spi::connect(|client| -> Result<Option<Version>, DocstoreError> {
        versions::check_readable(client, &database, at)?;
        let found = versions::read_at(client, &database, &encode_name(&path), at)?;
        if crate::pg::owner::caller_writes_as_client() {
            let _owner = crate::pg::owner::AsOwner::new(client)?;
            let fields = found.as_ref().map(Version::fields).transpose()?;
            super::documents::decide_get(&database, &path, fields)?;
        }
        Ok(found)
    })?;
    let row = match found {
        Some(v) => Some((
            JsonbOut::Text(v.data),
            to_timestamptz(v.create_time).map_err(ErrorReport::from)?,
            to_timestamptz(v.update_time).map_err(ErrorReport::from)?,
        )),
        None => None,
    };
    Ok(TableIterator::new(row))
}

/// A query in the structured JSON form (`run_query`'s argument) over the documents as they
/// were at `read_time`: the same rows as `run_query` would have answered then (documents,
/// projections, cursors, offset, limit and aggregations as core evaluates them). A client's
/// query is decided by its `list` rule first, as `run_query`'s; a kindless query (an empty
/// collection id with all descendants: every document under the parent, in name order) is
/// for administrators, as `run_query`'s. Cost: every document of the query's collection (or
/// collection group, or everything under the parent of a kindless query) then, read and
/// matched in memory; no index is used or needed. 55000 for a time older than the database's version history, 22023 for a
/// time in the future.
///
/// ```sql
/// select * from docstore.run_query_at('{"from": [{"collectionId": "restaurants"}]}',
///                                     now() - interval '5 minutes');
/// ```
#[pg_extern(stable)]
fn run_query_at(
    structured: TypedJsonb,
    read_time: TimestampWithTimeZone,
) -> Result<
    TableIterator<
        'static,
        (
            name!(path, String),
            name!(data, JsonbOut),
            name!(update_time, Option<TimestampWithTimeZone>),
            name!(create_time, Option<TimestampWithTimeZone>),
        ),
    >,
    ErrorReport,
> {
    let at = from_timestamptz(read_time);
    let query = super::query::parse_structured_text(&structured.0)?;
    let database = database_id()?;
    let rows = Spi::connect(|client| query_rows(client, &database, &query, at))?;
    Ok(TableIterator::new(rows))
}

type QueryRow = (
    String,
    JsonbOut,
    Option<TimestampWithTimeZone>,
    Option<TimestampWithTimeZone>,
);

fn query_rows(
    client: &pgrx::spi::SpiClient<'_>,
    database: &str,
    query: &Query,
    at: i64,
) -> Result<Vec<QueryRow>, DocstoreError> {
    let cap = crate::storage::databases::max_query_results(client, database)?;
    let _checked = crate::rules::query::authorize(client, database, query)?;
    versions::check_readable(client, database, at)?;
    let source = &query.source;
    let found = match source.collection_path() {
        Some(collection) => {
            let key = versions::collection_key(&collection);
            versions::scan_at(client, database, Scope::Collection(&key), at)?
        }
        None if source.is_kindless() => {
            // Every document below the parent (any collection, any depth): the parents in
            // the range of the parent's child collections, as ListCollectionIds scans them.
            let under = source
                .parent
                .as_ref()
                .map_or(&[][..], |parent| parent.segments());
            let scan = ChildCollections::under(under);
            let (from, to) = (scan.start(), scan.end());
            versions::scan_at(client, database, Scope::Parents(&from, &to), at)?
        }
        None => versions::scan_at(client, database, Scope::Group(&source.collection_id), at)?,
    };
    // Each path's (update time, create time).
    let mut times: HashMap<String, (i64, i64)> = HashMap::with_capacity(found.len());
    let mut docs: Vec<(ResourcePath, Map)> = Vec::with_capacity(found.len());
    for (_, version) in found {
        let path = ResourcePath::parse(&version.path)
            .map_err(|e| DocstoreError::Internal(format!("stored path {}: {e}", version.path)))?;
        if !source.contains(&path) {
            continue;
        }
        docs.push((path, version.fields()?));
        times.insert(version.path, (version.update_time, version.create_time));
    }
    if matches!(query.selection, Selection::Aggregations(_)) {
        let data = TypedJsonb::from_value(&Value::Map(aggregate(query, &docs)));
        return Ok(vec![(
            result::AGGREGATION_PATH.to_owned(),
            JsonbOut::Text(data),
            None,
            None,
        )]);
    }
    let rows = evaluate(query, &docs);
    if cap > 0 && u64::try_from(rows.len()).unwrap_or(u64::MAX) > cap {
        return Err(DocstoreError::ResultTooLarge(cap));
    }
    rows.into_iter()
        .map(|(path, data)| {
            let path = path.to_string();
            let (time, created) = times.get(&path).copied().unwrap_or_default();
            Ok((
                path,
                JsonbOut::Text(TypedJsonb::from_value(&Value::Map(data))),
                Some(to_timestamptz(time)?),
                Some(to_timestamptz(created)?),
            ))
        })
        .collect()
}

/// A listing at a past time is for administrators, as listing collections is.
fn administrators_only(what: &str) -> Result<(), DocstoreError> {
    if crate::pg::owner::caller_writes_as_client() {
        return Err(DocstoreError::PermissionDenied(format!(
            "{what} is for administrators"
        )));
    }
    Ok(())
}

/// The documents directly in `collection` as they were at `read_time`, in name order, with
/// their create and update times (ListDocuments at a read time). Administrators only (42501
/// for a client); 55000 for a time older than the database's version history, 22023 for a
/// time in the future.
///
/// ```sql
/// select path from docstore.list_documents_at('restaurants', now() - interval '5 minutes');
/// ```
#[pg_extern(stable)]
fn list_documents_at(
    collection: &str,
    read_time: TimestampWithTimeZone,
) -> Result<
    TableIterator<
        'static,
        (
            name!(path, String),
            name!(data, JsonbOut),
            name!(create_time, TimestampWithTimeZone),
            name!(update_time, TimestampWithTimeZone),
        ),
    >,
    ErrorReport,
> {
    administrators_only("listing documents at a read time")?;
    let at = from_timestamptz(read_time);
    let collection = ResourcePath::parse_collection(collection).map_err(DocstoreError::from)?;
    let database = database_id()?;
    let key = versions::collection_key(&collection);
    let found = Spi::connect(|client| -> Result<Vec<(Vec<u8>, Version)>, DocstoreError> {
        versions::check_readable(client, &database, at)?;
        versions::scan_at(client, &database, Scope::Collection(&key), at)
    })?;
    let rows = found
        .into_iter()
        .map(|(_, v)| {
            Ok((
                v.path,
                JsonbOut::Text(v.data),
                to_timestamptz(v.create_time)?,
                to_timestamptz(v.update_time)?,
            ))
        })
        .collect::<Result<Vec<_>, DocstoreError>>()?;
    Ok(TableIterator::new(rows))
}

/// The children of `parent` as they were at `read_time`, sorted: under a document (`''`: the
/// root), the ids of its collections that held a document, `direct` when one was directly in
/// the collection (ListCollectionIds at a read time lists those); under a collection, the ids
/// of its documents, existing or not, that had a document below them (ListDocuments'
/// `show_missing`). Administrators only (42501 for a client); 55000 for a time older than the
/// database's version history, 22023 for a time in the future.
///
/// ```sql
/// select id from docstore.child_ids_at('', now() - interval '5 minutes') where direct;
/// ```
#[pg_extern(stable)]
fn child_ids_at(
    parent: &str,
    read_time: TimestampWithTimeZone,
) -> Result<TableIterator<'static, (name!(id, String), name!(direct, bool))>, ErrorReport> {
    administrators_only("listing collections at a read time")?;
    let at = from_timestamptz(read_time);
    let segments = if parent.is_empty() {
        Vec::new()
    } else {
        ResourcePath::parse(parent)
            .map_err(DocstoreError::from)?
            .segments()
            .to_vec()
    };
    let database = database_id()?;
    let found = Spi::connect(|client| {
        versions::check_readable(client, &database, at)?;
        versions::children_at(client, &database, &segments, at)
    })?;
    Ok(TableIterator::new(found))
}
