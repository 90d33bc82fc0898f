//! Failures by cause: what retrying cannot fix ends start-up with one message that names the
//! fix (docs/http.md, "Failures by cause"); what a retry can fix (connection refused, the
//! server starting or restarting) is left to the usual backoff.
//!
//! [`classify`] reads a connection error's SQLSTATE; [`judge`] reads the facts the start-up
//! query ([`check`]) gathers: `wal_level`, the role's REPLICATION right, the extension, and
//! the plugin of a slot that already has our slot's name. The live path uses the same two
//! when its replication connection fails after start-up (`source::supervisor`).

use std::fmt;

use super::{Db, PgError};

/// A permanent cause of failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// 28P01: the password of the URL's role is wrong.
    BadPassword,
    /// 28000: `pg_hba.conf` has no entry that lets the role in, or rejects it.
    NotAllowed,
    /// 3D000: the URL's database does not exist.
    NoDatabase,
    /// `pg_docstore` is not installed in the URL's database.
    NoExtension,
    /// Live queries need `wal_level = logical`; the server has this one.
    WalLevel(String),
    /// Live queries need a role with the REPLICATION attribute (or a superuser).
    NoReplicationRight,
    /// The slot of that name exists with another output plugin than pgoutput.
    SlotPlugin { slot: String, plugin: String },
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::BadPassword => f.write_str(
                "password authentication failed for the role of --database-url; \
                 fix: put the role's password in the URL (or set it with ALTER ROLE ... PASSWORD)",
            ),
            Cause::NotAllowed => f.write_str(
                "Postgres does not let the role of --database-url in (pg_hba.conf); \
                 fix: add a pg_hba.conf entry for this role, database and address, then select pg_reload_conf()",
            ),
            Cause::NoDatabase => f.write_str(
                "the database of --database-url does not exist; \
                 fix: create it, or name an existing one in the URL",
            ),
            Cause::NoExtension => f.write_str(
                "the extension pg_docstore is not installed in the database of --database-url; \
                 fix: create extension pg_docstore (as a superuser), or name the database that has it",
            ),
            Cause::WalLevel(level) => write!(
                f,
                "live queries need wal_level = logical, the server has {level}; \
                 fix: alter system set wal_level = logical and restart Postgres, or run with --live false"
            ),
            Cause::NoReplicationRight => f.write_str(
                "live queries need a role with the REPLICATION attribute, the role of --database-url has not; \
                 fix: alter role ... replication, or run with --live false",
            ),
            Cause::SlotPlugin { slot, plugin } => write!(
                f,
                "the replication slot {slot} exists with the output plugin {plugin}, live queries need pgoutput; \
                 fix: name another slot with --slot, or drop this one (select pg_drop_replication_slot('{slot}'))"
            ),
        }
    }
}

impl Cause {
    /// The cause's name in metrics (`docstore_source_failure{cause}`).
    pub fn label(&self) -> &'static str {
        match self {
            Cause::BadPassword => "bad_password",
            Cause::NotAllowed => "not_allowed",
            Cause::NoDatabase => "no_database",
            Cause::NoExtension => "no_extension",
            Cause::WalLevel(_) => "wal_level",
            Cause::NoReplicationRight => "no_replication_right",
            Cause::SlotPlugin { .. } => "slot_plugin",
        }
    }
}

/// The permanent cause of a connection error's SQLSTATE; `None`: a retry may help.
pub fn classify(sqlstate: &str) -> Option<Cause> {
    match sqlstate {
        "28P01" => Some(Cause::BadPassword),
        "28000" => Some(Cause::NotAllowed),
        "3D000" => Some(Cause::NoDatabase),
        _ => None,
    }
}

/// The permanent cause of `error`, if it has one.
pub fn cause_of(error: &PgError) -> Option<Cause> {
    let db = match error {
        PgError::Db(e) | PgError::Connect(e) => e,
        PgError::Pool(deadpool_postgres::PoolError::Backend(e)) => e,
        _ => return None,
    };
    db.code().and_then(|code| classify(code.code()))
}

/// What the start-up query finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub wal_level: String,
    /// REPLICATION or superuser.
    pub replication: bool,
    pub extension: bool,
    /// The plugin of the slot named `--slot`, if it exists.
    pub slot_plugin: Option<String>,
}

/// The first permanent cause in `facts`; the live ones only when `live`.
pub fn judge(facts: &Facts, slot: &str, live: bool) -> Option<Cause> {
    if !facts.extension {
        return Some(Cause::NoExtension);
    }
    if !live {
        return None;
    }
    if facts.wal_level != "logical" {
        return Some(Cause::WalLevel(facts.wal_level.clone()));
    }
    if !facts.replication {
        return Some(Cause::NoReplicationRight);
    }
    match &facts.slot_plugin {
        Some(plugin) if plugin != "pgoutput" => Some(Cause::SlotPlugin {
            slot: slot.to_owned(),
            plugin: plugin.clone(),
        }),
        _ => None,
    }
}

const FACTS_SQL: &str = "select current_setting('wal_level'), \
       (select rolreplication or rolsuper from pg_roles where rolname = current_user), \
       exists (select from pg_extension where extname = 'pg_docstore'), \
       (select plugin::text from pg_replication_slots where slot_name = $1)";

/// Why the sidecar cannot start.
#[derive(Debug)]
pub enum Failure {
    /// Retrying cannot help.
    Permanent(Cause),
    /// The database does not answer (yet): serve, `/healthz` says 503 until it does.
    Transient(PgError),
}

/// Gather the facts and judge them.
///
/// # Errors
/// [`Failure::Permanent`] with the cause, or [`Failure::Transient`].
///
/// # Cancel safety
/// One read-only statement: dropped mid-way, nothing is left behind.
pub async fn check(db: &Db, slot: &str, live: bool) -> Result<(), Failure> {
    let fail = |e: PgError| match cause_of(&e) {
        Some(cause) => Failure::Permanent(cause),
        None => Failure::Transient(e),
    };
    let client = db.pool.get().await.map_err(|e| fail(e.into()))?;
    let facts = facts(&client, slot).await.map_err(fail)?;
    match judge(&facts, slot, live) {
        Some(cause) => Err(Failure::Permanent(cause)),
        None => Ok(()),
    }
}

/// The facts [`judge`] reads, from `client`'s server.
///
/// # Errors
/// The query's error.
///
/// # Cancel safety
/// One read-only statement: dropped mid-way, nothing is left behind.
pub async fn facts(client: &tokio_postgres::Client, slot: &str) -> Result<Facts, PgError> {
    let row = client.query_one(FACTS_SQL, &[&slot]).await?;
    let get = |e: tokio_postgres::Error| PgError::Decode(e.to_string());
    Ok(Facts {
        wal_level: row.try_get(0).map_err(get)?,
        replication: row
            .try_get::<_, Option<bool>>(1)
            .map_err(get)?
            .unwrap_or(false),
        extension: row.try_get(2).map_err(get)?,
        slot_plugin: row.try_get(3).map_err(get)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> Facts {
        Facts {
            wal_level: "logical".into(),
            replication: true,
            extension: true,
            slot_plugin: None,
        }
    }

    #[test]
    fn sqlstates_of_permanent_causes() {
        assert_eq!(classify("28P01"), Some(Cause::BadPassword));
        assert_eq!(classify("28000"), Some(Cause::NotAllowed));
        assert_eq!(classify("3D000"), Some(Cause::NoDatabase));
        // Starting up, shutting down, too many connections: a retry helps.
        for transient in ["57P03", "57P01", "53300", "08006", "08001"] {
            assert_eq!(classify(transient), None, "{transient}");
        }
    }

    #[test]
    fn facts_judged_in_order() {
        assert_eq!(judge(&healthy(), "s", true), None);
        let f = Facts {
            extension: false,
            ..healthy()
        };
        assert_eq!(judge(&f, "s", false), Some(Cause::NoExtension));
        let f = Facts {
            wal_level: "replica".into(),
            replication: false,
            ..healthy()
        };
        assert_eq!(
            judge(&f, "s", true),
            Some(Cause::WalLevel("replica".into()))
        );
        assert_eq!(
            judge(&f, "s", false),
            None,
            "without live queries the slot needs nothing"
        );
        let f = Facts {
            replication: false,
            ..healthy()
        };
        assert_eq!(judge(&f, "s", true), Some(Cause::NoReplicationRight));
        let f = Facts {
            slot_plugin: Some("test_decoding".into()),
            ..healthy()
        };
        assert_eq!(
            judge(&f, "s", true),
            Some(Cause::SlotPlugin {
                slot: "s".into(),
                plugin: "test_decoding".into()
            })
        );
        let f = Facts {
            slot_plugin: Some("pgoutput".into()),
            ..healthy()
        };
        assert_eq!(judge(&f, "s", true), None);
    }

    #[test]
    fn every_message_names_a_fix() {
        let causes = [
            Cause::BadPassword,
            Cause::NotAllowed,
            Cause::NoDatabase,
            Cause::NoExtension,
            Cause::WalLevel("replica".into()),
            Cause::NoReplicationRight,
            Cause::SlotPlugin {
                slot: "s".into(),
                plugin: "p".into(),
            },
        ];
        for cause in causes {
            assert!(cause.to_string().contains("; fix: "), "{cause}");
        }
    }
}
