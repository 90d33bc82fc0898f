//! Index management: composite indexes (online build), exemptions, and `check_indexes`.

use std::collections::{BTreeMap, BTreeSet};

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;

use docstore_core::encoding::{decode_name, encode_segments};
use docstore_core::index::{self, document_entries, kind, IndexDefinition, Scope};
use docstore_core::{FieldPath, ResourcePath};

use crate::errors::DocstoreError;
use crate::guc::database_id;
use crate::pg::jsonb::TypedJsonb;
use crate::storage::{catalog, entries};

fn validate_group(group: &str) -> Result<(), DocstoreError> {
    // A collection group is a collection ID: one valid path segment.
    ResourcePath::parse_collection(group)?;
    if group.contains('/') {
        return Err(DocstoreError::InvalidArgument(format!(
            "collection group \"{group}\" must be a collection ID, not a path"
        )));
    }
    Ok(())
}

/// The smallest key greater than every key starting with `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return end;
        }
    }
    vec![0xFF; prefix.len() + 1]
}

/// Define a composite index (or a collection-group single-field index) and start building it.
/// Returns its id. The index is CREATING until it is backfilled (writes maintain it from now
/// on); then READY. The background index builder starts the backfill once this transaction
/// commits; `CALL docstore.build_indexes()` waits for it (or builds, where no builder runs).
/// See docs/storage.md.
///
/// ```sql
/// select docstore.create_index('restaurants', '[{"field": "city"}, {"field": "avgRating", "order": "desc"}]');
/// select docstore.create_index('ratings', '[{"field": "rating"}]', scope => 'collection_group');
/// call docstore.build_indexes();
/// ```
#[pg_extern(volatile)]
fn create_index(
    collection_group: &str,
    fields: TypedJsonb,
    scope: default!(&str, "'collection'"),
) -> Result<i32, ErrorReport> {
    validate_group(collection_group)?;
    let scope = Scope::parse(scope).ok_or_else(|| {
        DocstoreError::InvalidArgument(format!(
            "scope must be 'collection' or 'collection_group', not '{scope}'"
        ))
    })?;
    let json: serde_json::Value = serde_json::from_str(&fields.0)
        .map_err(|e| DocstoreError::InvalidArgument(format!("fields: {e}")))?;
    let parsed = IndexDefinition::parse_fields(&json).map_err(DocstoreError::from)?;
    let database = database_id()?;
    let canonical = TypedJsonb(IndexDefinition::fields_json(&parsed).to_string());
    let id = Spi::connect_mut(|client| -> Result<i32, DocstoreError> {
        // A single field already has automatic indexes in every collection, unless it (or a
        // parent field) is exempted in this group: then a single-field index is how it gets one.
        if scope == Scope::Collection && parsed.len() == 1 {
            let field = &parsed[0].path;
            let config = catalog::index_config(client, &database, collection_group)?;
            if !config.exemptions.iter().any(|e| field.starts_with(e)) {
                return Err(DocstoreError::InvalidArgument(format!(
                    "field {field} already has automatic single-field indexes in every collection; composite indexes need two or more fields (or scope => 'collection_group', or an exemption of the field)"
                )));
            }
        }
        define(client, &database, collection_group, scope, canonical)
    })?;
    crate::pg::background::request();
    Ok(id)
}

/// Insert the catalog row of a new index (CREATING) whose `fields` are canonical
/// ([`IndexDefinition::fields_json`]); [`DocstoreError::IndexExists`] when one with the same
/// definition is there (other than DELETING).
pub(crate) fn define(
    client: &mut SpiClient<'_>,
    database: &str,
    collection_group: &str,
    scope: Scope,
    canonical: TypedJsonb,
) -> Result<i32, DocstoreError> {
    let existing = client.select(
        "select id from docstore.indexes where database_id = $1 and collection_group = $2 \
     and scope = $3 and fields = $4 and state <> 'DELETING'",
        Some(1),
        &[
            database.into(),
            collection_group.into(),
            scope.as_str().into(),
            canonical.clone().into(),
        ],
    )?;
    if let Some(row) = existing.into_iter().next() {
        let id: Option<i32> = row.get(1)?;
        return Err(DocstoreError::IndexExists {
            id: id.unwrap_or(0),
            collection_group: collection_group.to_owned(),
        });
    }
    crate::pg::catalog_cache::invalidate(client)?;
    let rows = client.update(
    "insert into docstore.indexes (database_id, collection_group, scope, fields) values ($1, $2, $3, $4) returning id",
    Some(1),
    &[database.into(), collection_group.into(), scope.as_str().into(), canonical.into()],
    )?;
    rows.into_iter()
        .next()
        .and_then(|r| r.get::<i32>(1).ok().flatten())
        .ok_or_else(|| DocstoreError::Internal("insert returned no id".into()))
}

/// Stop using and maintaining an index; the background index builder (or `CALL
/// docstore.build_indexes()`) removes its entries.
///
/// ```sql
/// select docstore.drop_index(3);
/// ```
#[pg_extern(volatile)]
fn drop_index(id: i32) -> Result<(), ErrorReport> {
    let database = database_id()?;
    let changed = Spi::connect_mut(|client| -> Result<usize, DocstoreError> {
        crate::pg::catalog_cache::invalidate(client)?;
        Ok(client
            .update(
                "update docstore.indexes set state = 'DELETING' where id = $1 and database_id = $2 and state <> 'DELETING' returning id",
                None,
                &[id.into(), database.as_str().into()],
            )?
            .len())
    })?;
    if changed == 0 {
        return Err(DocstoreError::IndexNotFound { id }.into());
    }
    crate::pg::background::request();
    Ok(())
}

/// The indexes of the current database, their state, and why a build stopped (`error`, for
/// `NEEDS_REPAIR`).
#[pg_extern(stable)]
fn list_indexes() -> Result<
    TableIterator<
        'static,
        (
            name!(id, i32),
            name!(collection_group, String),
            name!(scope, String),
            name!(fields, TypedJsonb),
            name!(state, String),
            name!(documents_done, i64),
            name!(error, Option<String>),
        ),
    >,
    ErrorReport,
> {
    let database = database_id()?;
    let rows = Spi::connect(|client| -> Result<Vec<_>, DocstoreError> {
        let mut out = Vec::new();
        for row in client.select(
            "select id, collection_group, scope, fields, state, documents_done, error \
             from docstore.indexes where database_id = $1 order by id",
            None,
            &[database.as_str().into()],
        )? {
            out.push((
                row.get::<i32>(1)?.unwrap_or_default(),
                row.get::<String>(2)?.unwrap_or_default(),
                row.get::<String>(3)?.unwrap_or_default(),
                row.get::<TypedJsonb>(4)?.unwrap_or(TypedJsonb("[]".into())),
                row.get::<String>(5)?.unwrap_or_default(),
                row.get::<i64>(6)?.unwrap_or_default(),
                row.get::<String>(7)?,
            ));
        }
        Ok(out)
    })?;
    Ok(TableIterator::new(rows))
}

/// One batch of index building: backfill a CREATING index or remove a DELETING index's
/// entries. Returns true when that index is finished. Called by `docstore.build_indexes()`,
/// which commits after every batch (so a crash or cancel resumes where it stopped).
#[pg_extern(volatile)]
fn index_build_step(index_id: i32, batch_size: i32) -> Result<bool, ErrorReport> {
    let limit = i64::from(batch_size.max(1));
    Ok(Spi::connect_mut(|client| {
        build_step(client, index_id, limit)
    })?)
}

/// One batch of `index_build_step` (also run by a query that creates its index, see
/// `executor::auto_index`).
pub(crate) fn build_step(
    client: &mut SpiClient<'_>,
    index_id: i32,
    limit: i64,
) -> Result<bool, DocstoreError> {
    // One step of an index at a time: the background builder and a `CALL
    // docstore.build_indexes()` may both be at it; the second waits here, then reads the
    // first one's progress (a fresh snapshot per statement).
    client.update(
        "select 1 from docstore.indexes where id = $1 for update",
        None,
        &[index_id.into()],
    )?;
    let Some(row) = catalog::index_by_id(client, index_id)? else {
        return Ok(true);
    };
    let database = row.database_id.as_str();
    let index = &row.definition;
    let prefix = index.prefix(None);
    match row.state.as_str() {
        "CREATING" => {
            let docs = client.update(
                "select e.name, e.path, e.data from docstore.entities e, docstore.indexes i \
                 where i.id = $3 and e.database_id = $1 and e.collection_id = $2 \
                   and e.name > coalesce(i.backfill_cursor, ''::pg_catalog.bytea) \
                 order by e.name limit $4 for share of e",
                None,
                &[
                    database.into(),
                    index.collection_group.as_str().into(),
                    index_id.into(),
                    limit.into(),
                ],
            )?;
            let mut keys: Vec<Vec<u8>> = Vec::new();
            let mut names: Vec<Vec<u8>> = Vec::new();
            let mut last: Option<Vec<u8>> = None;
            let mut count = 0i64;
            for doc in docs {
                count += 1;
                let name: Vec<u8> = doc.get(1)?.unwrap_or_default();
                let path =
                    ResourcePath::parse_document(&doc.get::<String>(2)?.unwrap_or_default())?;
                let data: TypedJsonb = doc.get(3)?.unwrap_or(TypedJsonb("{}".into()));
                let fields = crate::storage::entities::stored_fields(&data)?;
                let mut entries = BTreeSet::new();
                if let Err(error) = index.entries(&path, &fields, &mut entries) {
                    return needs_repair(client, index_id, &error.to_string());
                }
                for key in entries {
                    keys.push(key);
                    names.push(name.clone());
                }
                last = Some(name);
            }
            entries::insert_missing(client, database, keys, names)?;
            let done = count < limit;
            if done {
                crate::pg::catalog_cache::invalidate(client)?;
            }
            client.update(
                "update docstore.indexes set backfill_cursor = coalesce($2, backfill_cursor), \
                 documents_done = documents_done + $3, \
                 state = case when $4 then 'READY' else state end, \
                 ready_at = case when $4 then clock_timestamp() end where id = $1",
                None,
                &[index_id.into(), last.into(), count.into(), done.into()],
            )?;
            Ok(done)
        }
        "DELETING" => {
            let deleted = client
                .update(
                    "delete from docstore.index_entries where database_id = $1 and key in \
                     (select key from docstore.index_entries where database_id = $1 \
                      and key >= $2 and key < $3 limit $4)",
                    None,
                    &[
                        database.into(),
                        prefix.clone().into(),
                        prefix_end(&prefix).into(),
                        limit.into(),
                    ],
                )?
                .len();
            let done = i64::try_from(deleted).unwrap_or(i64::MAX) < limit;
            if done {
                client.update(
                    "delete from docstore.indexes where id = $1",
                    None,
                    &[index_id.into()],
                )?;
            }
            Ok(done)
        }
        _ => Ok(true),
    }
}

/// Stop a build that cannot finish (a document's entry is over the key limit): the index
/// becomes NEEDS_REPAIR, which writes no longer maintain and queries do not use, as Firestore's
/// does. Its entries so far stay until it is dropped. Says why in a warning and in
/// `list_indexes().error`; the build is finished with this index.
fn needs_repair(
    client: &mut SpiClient<'_>,
    index_id: i32,
    error: &str,
) -> Result<bool, DocstoreError> {
    client.update(
        "update docstore.indexes set state = 'NEEDS_REPAIR', error = $2 where id = $1",
        None,
        &[index_id.into(), error.into()],
    )?;
    crate::pg::catalog_cache::invalidate(client)?;
    pgrx::warning!("index {index_id} needs repair: {error}; drop it with docstore.drop_index({index_id}), fix the document and create it again");
    Ok(true)
}

/// Key range prefixes of the automatic entries of `field` and its subfields in `parent`.
fn auto_field_prefixes(parent: &[u8], field: &FieldPath) -> Vec<Vec<u8>> {
    [kind::AUTO_VALUE, kind::AUTO_ARRAY_CONTAINS]
        .into_iter()
        .map(|k| {
            let mut prefix = vec![k];
            prefix.extend_from_slice(parent);
            let mut segments = Vec::new();
            encode_segments(&mut segments, field.segments());
            segments.pop(); // drop the list end: subfields share this prefix
            prefix.extend(segments);
            prefix
        })
        .collect()
}

/// Stop automatic indexing of a field (and its subfields) in a collection group; its existing
/// automatic entries are removed now. Queries that need it then need a composite index.
///
/// ```sql
/// select docstore.exempt_field('restaurants', 'description');
/// ```
#[pg_extern(volatile)]
fn exempt_field(collection_group: &str, field_path: &str) -> Result<(), ErrorReport> {
    validate_group(collection_group)?;
    let field = FieldPath::parse(field_path).map_err(DocstoreError::from)?;
    let database = database_id()?;
    Spi::connect_mut(|client| -> Result<(), DocstoreError> {
        let inserted = client
            .update(
                "insert into docstore.field_exemptions (database_id, collection_group, field_path) \
                 values ($1, $2, $3) on conflict do nothing returning 1",
                None,
                &[database.as_str().into(), collection_group.into(), field.to_string().into()],
            )?
            .len();
        if inserted == 0 {
            return Ok(());
        }
        crate::pg::catalog_cache::invalidate(client)?;
        let parents: Vec<Vec<u8>> = client
            .select(
                "select distinct parent from docstore.entities where database_id = $1 and collection_id = $2",
                None,
                &[database.as_str().into(), collection_group.into()],
            )?
            .filter_map(|r| r.get::<Vec<u8>>(1).ok().flatten())
            .collect();
        for parent in parents {
            for prefix in auto_field_prefixes(&parent, &field) {
                client.update(
                    "delete from docstore.index_entries where database_id = $1 and key >= $2 and key < $3",
                    None,
                    &[database.as_str().into(), prefix.clone().into(), prefix_end(&prefix).into()],
                )?;
            }
        }
        Ok(())
    })?;
    Ok(())
}

/// Resume automatic indexing of an exempted field; its entries are written now.
///
/// ```sql
/// select docstore.remove_exemption('restaurants', 'description');
/// ```
#[pg_extern(volatile)]
fn remove_exemption(collection_group: &str, field_path: &str) -> Result<bool, ErrorReport> {
    validate_group(collection_group)?;
    let field = FieldPath::parse(field_path).map_err(DocstoreError::from)?;
    let database = database_id()?;
    Ok(Spi::connect_mut(|client| -> Result<bool, DocstoreError> {
        let removed = client
            .update(
                "delete from docstore.field_exemptions where database_id = $1 and collection_group = $2 \
                 and field_path = $3 returning 1",
                None,
                &[database.as_str().into(), collection_group.into(), field.to_string().into()],
            )?
            .len();
        if removed == 0 {
            return Ok(false);
        }
        crate::pg::catalog_cache::invalidate(client)?;
        let config = catalog::index_config(client, &database, collection_group)?;
        let docs = client.select(
            "select name, path, data from docstore.entities where database_id = $1 and collection_id = $2",
            None,
            &[database.as_str().into(), collection_group.into()],
        )?;
        let mut keys = Vec::new();
        let mut names = Vec::new();
        for doc in docs {
            let name: Vec<u8> = doc.get(1)?.unwrap_or_default();
            let path = ResourcePath::parse_document(&doc.get::<String>(2)?.unwrap_or_default())?;
            let data: TypedJsonb = doc.get(3)?.unwrap_or(TypedJsonb("{}".into()));
            let fields = data.value()?;
            let docstore_core::Value::Map(fields) = fields else {
                continue;
            };
            let parent = crate::storage::entities::Keys::of(&path).parent;
            let prefixes = auto_field_prefixes(&parent, &field);
            for key in document_entries(&path, &fields, &config)? {
                if prefixes.iter().any(|p| key.starts_with(p)) {
                    keys.push(key);
                    names.push(name.clone());
                }
            }
        }
        entries::insert_missing(client, &database, keys, names)?;
        Ok(true)
    })?)
}

/// Recompute every document's expected index entries and report differences with
/// `index_entries` (the paper's data-validation job). Empty on a healthy database. Indexes
/// being built or dropped are skipped.
///
/// ```sql
/// select * from docstore.check_indexes();
/// ```
#[pg_extern(stable)]
fn check_indexes(
) -> Result<TableIterator<'static, (name!(path, String), name!(problem, String))>, ErrorReport> {
    let database = database_id()?;
    let problems = Spi::connect_mut(|client| -> Result<Vec<(String, String)>, DocstoreError> {
        // Expected entries per document name.
        let mut expected: BTreeMap<Vec<u8>, (String, BTreeSet<Vec<u8>>)> = BTreeMap::new();
        let mut configs = BTreeMap::new();
        let docs = client.select(
            "select name, path, collection_id, data from docstore.entities where database_id = $1",
            None,
            &[database.as_str().into()],
        )?;
        for doc in docs {
            let name: Vec<u8> = doc.get(1)?.unwrap_or_default();
            let path_text: String = doc.get(2)?.unwrap_or_default();
            let group: String = doc.get(3)?.unwrap_or_default();
            let data: TypedJsonb = doc.get(4)?.unwrap_or(TypedJsonb("{}".into()));
            if !configs.contains_key(&group) {
                // Indexes that are not READY are left out on both sides (below).
                configs.insert(
                    group.clone(),
                    catalog::index_config_in(client, &database, &group, catalog::States::Usable)?,
                );
            }
            let path = ResourcePath::parse_document(&path_text)?;
            let docstore_core::Value::Map(fields) = data.value()? else {
                continue;
            };
            let config = configs.get(&group).cloned().unwrap_or_default();
            let keys = document_entries(&path, &fields, &config)?;
            expected.insert(name, (path_text, keys.into_iter().collect()));
        }
        // Indexes whose entries are in flux are left out of the comparison.
        let unsettled: Vec<Vec<u8>> = client
            .select(
                "select id from docstore.indexes where database_id = $1 and state <> 'READY'",
                None,
                &[database.as_str().into()],
            )?
            .filter_map(|r| r.get::<i32>(1).ok().flatten())
            .map(|id| {
                let mut p = vec![kind::COMPOSITE];
                p.extend_from_slice(&(id as u32).to_be_bytes());
                p
            })
            .collect();
        let in_flux = |key: &[u8]| unsettled.iter().any(|p| key.starts_with(p));
        let mut problems = Vec::new();
        let mut seen: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>> = BTreeMap::new();
        for entry in client.select(
            "select key, name from docstore.index_entries where database_id = $1",
            None,
            &[database.as_str().into()],
        )? {
            let key: Vec<u8> = entry.get(1)?.unwrap_or_default();
            let name: Vec<u8> = entry.get(2)?.unwrap_or_default();
            if in_flux(&key) {
                continue;
            }
            match expected.get(&name) {
                Some((path, keys)) if !keys.contains(&key) => problems.push((
                    path.clone(),
                    format!("extra entry: {}", index::describe_key(&key)),
                )),
                Some(_) => {}
                None => {
                    let path = decode_name(&name)
                        .map(|p| p.to_string())
                        .unwrap_or_else(|_| "<undecodable name>".into());
                    problems.push((
                        path,
                        format!(
                            "entry for a missing document: {}",
                            index::describe_key(&key)
                        ),
                    ));
                }
            }
            seen.entry(name).or_default().insert(key);
        }
        for (name, (path, keys)) in &expected {
            let present = seen.get(name);
            for key in keys {
                if in_flux(key) {
                    continue;
                }
                if !present.is_some_and(|p| p.contains(key)) {
                    problems.push((
                        path.clone(),
                        format!("missing entry: {}", index::describe_key(key)),
                    ));
                }
            }
        }
        problems.sort();
        Ok(problems)
    })?;
    Ok(TableIterator::new(problems))
}
