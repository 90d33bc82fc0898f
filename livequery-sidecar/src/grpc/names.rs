//! The names of gRPC requests: `projects/{p}/databases/{d}` (a database),
//! `projects/{p}/databases/{d}/documents` and `.../documents/{path}` (a parent, a document),
//! and the `google-cloud-resource-prefix` metadata the SDKs send. `{p}` is read and ignored
//! (any project names this server); `{d}` is our database id (`(default)` or a named
//! database). A bad name is INVALID_ARGUMENT. The parsing itself is docstore-core's
//! (`proto::DatabaseName`), which references in values share.

use docstore_core::path::abbreviate;
use docstore_core::path::is_valid_database_id;
use docstore_core::proto::{DatabaseName, ProtoError};
use docstore_core::ResourcePath;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::error::{from_proto, invalid_argument};

/// The metadata that names the database of a request (the SDKs' routing header).
pub const RESOURCE_PREFIX: &str = "google-cloud-resource-prefix";

/// The database at the head of `name`, and what follows it (empty or starting with `/`).
fn head<'a>(name: &'a str, what: &str) -> Result<(DatabaseName, &'a str), Status> {
    let (db, rest) = DatabaseName::split_name(name).ok_or_else(|| {
        invalid_argument(format!(
            "{what} \"{}\" is not of the form projects/{{project}}/databases/{{database}}{}",
            abbreviate(name),
            if what == "database" {
                ""
            } else {
                "/documents..."
            }
        ))
    })?;
    if !is_valid_database_id(&db.database) {
        return Err(invalid_argument(format!(
            "\"{}\" is not a database id: (default), or 4-63 lowercase letters, digits and hyphens starting with a letter",
            abbreviate(&db.database)
        )));
    }
    Ok((db, rest))
}

/// The path `rest` names (what follows the database in `name`, from [`head`]): `None` for
/// the documents root (`/documents`), else a document or collection path. What
/// `DatabaseName::parse_name` answers for the whole name, without splitting off its database
/// a second time.
fn path_of(name: &str, rest: &str) -> Result<Option<ResourcePath>, Status> {
    if rest == "/documents" {
        return Ok(None);
    }
    let bad = |reason: String| from_proto(&ProtoError::BadName { reason });
    let path = rest.strip_prefix("/documents/").ok_or_else(|| {
        bad(format!(
            "\"{}\" is not of the form projects/{{project}}/databases/{{database}}/documents/{{path}}",
            abbreviate(name)
        ))
    })?;
    // Not `ResourcePath::parse`, which takes a leading `/`: `documents//c/d` is no name.
    ResourcePath::from_segments(path.split('/').map(str::to_owned).collect())
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// `projects/{p}/databases/{d}` exactly (the `database` of BatchGetDocuments, Commit, ...).
///
/// # Errors
/// INVALID_ARGUMENT.
pub fn database(name: &str) -> Result<DatabaseName, Status> {
    match head(name, "database")? {
        (db, "") => Ok(db),
        _ => Err(invalid_argument(format!(
            "database \"{}\" is not of the form projects/{{project}}/databases/{{database}}",
            abbreviate(name)
        ))),
    }
}

/// A `parent`: the documents root (`.../documents`, `None`) or a document
/// (`.../documents/{document path}`).
///
/// # Errors
/// INVALID_ARGUMENT, also for a collection path.
pub fn parent(name: &str) -> Result<(DatabaseName, Option<ResourcePath>), Status> {
    let (db, rest) = head(name, "parent")?;
    match path_of(name, rest)? {
        Some(path) if !path.is_document() => Err(invalid_argument(format!(
            "parent \"{}\" names a collection: a parent is .../documents or a document",
            abbreviate(name)
        ))),
        path => Ok((db, path)),
    }
}

/// A document's `name`: `.../documents/{document path}`.
///
/// # Errors
/// INVALID_ARGUMENT, also for the documents root or a collection path.
pub fn document(name: &str) -> Result<(DatabaseName, ResourcePath), Status> {
    let (db, rest) = head(name, "document name")?;
    match path_of(name, rest)? {
        Some(path) if path.is_document() => Ok((db, path)),
        _ => Err(invalid_argument(format!(
            "\"{}\" does not name a document (projects/{{project}}/databases/{{database}}/documents/{{collection}}/{{id}}...)",
            abbreviate(name)
        ))),
    }
}

/// Check the request's `google-cloud-resource-prefix`, when it has one: a database name, the
/// database of the request.
///
/// # Errors
/// INVALID_ARGUMENT for a prefix that is not a database name or names another database.
pub fn check_prefix(metadata: &MetadataMap, db: &DatabaseName) -> Result<(), Status> {
    let Some(value) = metadata.get(RESOURCE_PREFIX) else {
        return Ok(());
    };
    let text = value
        .to_str()
        .map_err(|_| invalid_argument(format!("{RESOURCE_PREFIX} is not ASCII")))?;
    let prefix = database(text)?;
    if prefix.database != db.database {
        return Err(invalid_argument(format!(
            "{RESOURCE_PREFIX} names database \"{}\" but the request names \"{}\"",
            prefix.database, db.database
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code<T: std::fmt::Debug>(r: Result<T, Status>) -> tonic::Code {
        match r {
            Ok(v) => unreachable!("accepted: {v:?}"),
            Err(s) => s.code(),
        }
    }

    #[test]
    fn databases() {
        let db = database("projects/any/databases/(default)").ok();
        assert_eq!(
            db.map(|d| (d.project, d.database)),
            Some(("any".into(), "(default)".into()))
        );
        assert!(database("projects/p/databases/my-db").is_ok());
        for bad in [
            "",
            "projects/p",
            "projects/p/databases/",
            "projects//databases/(default)",
            "projects/p/databases/(default)/documents",
            "projects/p/databases/Bad_Id",
            "projects/p/databases/ab",
            "databases/(default)",
        ] {
            assert_eq!(code(database(bad)), tonic::Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn parents() {
        let (db, path) = parent("projects/p/databases/(default)/documents")
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(db.database, "(default)");
        assert_eq!(path, None);
        let (_, path) = parent("projects/p/databases/(default)/documents/c/d")
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(path.map(|p| p.to_string()), Some("c/d".to_owned()));
        for bad in [
            "projects/p/databases/(default)/documents/c",
            "projects/p/databases/(default)",
            "projects/p/databases/(default)/documents/",
            "projects/p/databases/(default)/documents//c/d",
            "projects/p/databases/(default)/docs/c/d",
            "projects/p/databases/(default)/documents/c/__d__",
            "c/d",
        ] {
            assert_eq!(code(parent(bad)), tonic::Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn documents() {
        let (db, path) = document("projects/p/databases/db-2/documents/c/d/e/f")
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(db.database, "db-2");
        assert_eq!(path.to_string(), "c/d/e/f");
        for bad in [
            "projects/p/databases/(default)/documents",
            "projects/p/databases/(default)/documents/c",
            "projects/p/databases/(default)/documents/c/d/e",
            "projects/p/databases/UPPER/documents/c/d",
            "projects/p/databases/(default)/documents/c/d\u{0}",
            "/projects/p/databases/(default)/documents/c/d",
        ] {
            assert_eq!(code(document(bad)), tonic::Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn paths_as_core_parses_names() {
        // `path_of` answers what `DatabaseName::parse_name` answers for the whole name.
        for name in [
            "projects/p/databases/(default)/documents",
            "projects/p/databases/(default)/documents/c",
            "projects/p/databases/(default)/documents/c/d",
            "projects/p/databases/(default)/documents/",
            "projects/p/databases/(default)/documents//c/d",
            "projects/p/databases/(default)/documents/c/d/",
            "projects/p/databases/(default)/docs/c/d",
            "projects/p/databases/(default)/documentsx/c",
            "projects/p/databases/(default)/documents/c/__d__",
            "projects/p/databases/(default)/documents/c/d\u{0}",
        ] {
            let Ok((db, rest)) = head(name, "name") else {
                unreachable!("{name}")
            };
            let ours = path_of(name, rest).map_err(|s| (s.code(), s.message().to_owned()));
            let core = db
                .parse_name(name)
                .map_err(|e| from_proto(&e))
                .map_err(|s| (s.code(), s.message().to_owned()));
            assert_eq!(ours, core, "{name}");
        }
    }

    #[test]
    fn resource_prefix() {
        let db = database("projects/p/databases/(default)").unwrap_or_else(|e| unreachable!("{e}"));
        let with = |v: &'static str| {
            let mut m = MetadataMap::new();
            m.insert(
                RESOURCE_PREFIX,
                tonic::metadata::MetadataValue::from_static(v),
            );
            m
        };
        assert!(check_prefix(&MetadataMap::new(), &db).is_ok());
        assert!(check_prefix(&with("projects/other/databases/(default)"), &db).is_ok());
        assert_eq!(
            code(check_prefix(&with("projects/p/databases/other-db"), &db)),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            code(check_prefix(&with("nonsense"), &db)),
            tonic::Code::InvalidArgument
        );
    }
}
