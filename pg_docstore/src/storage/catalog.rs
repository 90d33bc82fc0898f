//! The index catalog: composite index definitions and field exemptions.

use pgrx::spi::SpiClient;
use pgrx::{PgBuiltInOids, PgOid};

use docstore_core::index::{IndexConfig, IndexDefinition, Scope};
use docstore_core::FieldPath;

use crate::errors::DocstoreError;
use crate::pg::jsonb::TypedJsonb;
use crate::pg::spi::plan;

const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);

/// An index row of the catalog.
#[derive(Debug, Clone)]
pub struct IndexRow {
    pub definition: IndexDefinition,
    pub database_id: String,
    pub state: String,
}

pub fn definition(
    id: i32,
    group: String,
    scope: &str,
    fields: &TypedJsonb,
) -> Result<IndexDefinition, DocstoreError> {
    let json: serde_json::Value = serde_json::from_str(&fields.0)
        .map_err(|e| DocstoreError::Internal(format!("index fields: {e}")))?;
    Ok(IndexDefinition {
        id: u32::try_from(id).map_err(|_| DocstoreError::Internal("negative index id".into()))?,
        collection_group: group,
        scope: Scope::parse(scope)
            .ok_or_else(|| DocstoreError::Internal(format!("index scope {scope}")))?,
        fields: IndexDefinition::parse_fields(&json)?,
    })
}

/// What writes to `collection_group` must maintain, from the per-backend cache.
pub fn index_config_cached(
    client: &mut SpiClient<'_>,
    database: &str,
    collection_group: &str,
) -> Result<IndexConfig, DocstoreError> {
    crate::pg::catalog_cache::get_or_load(client, database, collection_group, |client| {
        // The catalog is the extension's own: a role that may write documents reads it as the
        // extension's owner, as queries do.
        let _owner = crate::pg::owner::AsOwner::new(client)?;
        index_config(client, database, collection_group)
    })
}

/// Which composite indexes a caller wants from the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum States {
    /// CREATING and READY: what writes must maintain.
    Maintained,
    /// READY only: what queries may use.
    Usable,
}

/// What writes to `collection_group` must maintain: composite indexes that are CREATING or
/// READY, and the exempted fields. One statement.
pub fn index_config(
    client: &SpiClient<'_>,
    database: &str,
    collection_group: &str,
) -> Result<IndexConfig, DocstoreError> {
    index_config_in(client, database, collection_group, States::Maintained)
}

/// The composite indexes of `collection_group` in `states`, and its exempted fields.
pub fn index_config_in(
    client: &SpiClient<'_>,
    database: &str,
    collection_group: &str,
    states: States,
) -> Result<IndexConfig, DocstoreError> {
    let sql = match states {
        States::Maintained => {
            "select 'index' as kind, id, scope, fields, null::pg_catalog.text as field_path from docstore.indexes \
               where database_id = $1 and collection_group = $2 and state in ('CREATING', 'READY') \
             union all \
             select 'exemption', null, null, null, field_path from docstore.field_exemptions \
               where database_id = $1 and collection_group = $2"
        }
        States::Usable => {
            "select 'index' as kind, id, scope, fields, null::pg_catalog.text as field_path from docstore.indexes \
               where database_id = $1 and collection_group = $2 and state = 'READY' \
             union all \
             select 'exemption', null, null, null, field_path from docstore.field_exemptions \
               where database_id = $1 and collection_group = $2"
        }
    };
    let stmt = plan(client, sql, &[TEXT, TEXT])?;
    let rows = client.select(&*stmt, None, &[database.into(), collection_group.into()])?;
    let mut config = IndexConfig::default();
    for row in rows {
        let kind: Option<String> = row.get(1)?;
        if kind.as_deref() == Some("index") {
            let id: Option<i32> = row.get(2)?;
            let scope: Option<String> = row.get(3)?;
            let fields: Option<TypedJsonb> = row.get(4)?;
            if let (Some(id), Some(scope), Some(fields)) = (id, scope, fields) {
                config.composites.push(definition(
                    id,
                    collection_group.to_owned(),
                    &scope,
                    &fields,
                )?);
            }
        } else if let Some(path) = row.get::<String>(5)? {
            config.exemptions.push(FieldPath::parse(&path)?);
        }
    }
    Ok(config)
}

/// One index row by id.
pub fn index_by_id(client: &SpiClient<'_>, id: i32) -> Result<Option<IndexRow>, DocstoreError> {
    let sql = "select database_id, collection_group, scope, fields, state from docstore.indexes where id = $1";
    let stmt = plan(client, sql, &[PgOid::BuiltIn(PgBuiltInOids::INT4OID)])?;
    let rows = client.select(&*stmt, Some(1), &[id.into()])?;
    let Some(row) = rows.into_iter().next() else {
        return Ok(None);
    };
    let database_id: String = row.get(1)?.unwrap_or_default();
    let group: String = row.get(2)?.unwrap_or_default();
    let scope: String = row.get(3)?.unwrap_or_default();
    let fields: Option<TypedJsonb> = row.get(4)?;
    let state: String = row.get(5)?.unwrap_or_default();
    let fields = fields.ok_or_else(|| DocstoreError::Internal("index without fields".into()))?;
    Ok(Some(IndexRow {
        definition: definition(id, group, &scope, &fields)?,
        database_id,
        state,
    }))
}
