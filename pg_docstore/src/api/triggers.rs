//! Write triggers from SQL (docs/triggers.md): `create_trigger`, `drop_trigger`,
//! `retry_trigger` (`list_triggers` is plain SQL, in sql/triggers.sql). Administrators only:
//! sql/roles.sql revokes them from clients, as it does `set_rules`.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use serde_json::Value as Json;

use docstore_core::path_pattern::PathPattern;

use crate::errors::DocstoreError;
use crate::guc;

/// The events a trigger may name; `write` stands for all three.
const EVENTS: [&str; 3] = ["create", "update", "delete"];
const MODES: [&str; 2] = ["at_least_once", "exactly_once"];
/// The keys `options` may hold.
const OPTIONS: [&str; 2] = ["secret", "role"];

fn invalid(message: String) -> DocstoreError {
    DocstoreError::InvalidArgument(message)
}

/// A trigger's name: a letter, then up to 62 letters, digits, `_` or `-`.
fn check_name(name: &str) -> Result<(), DocstoreError> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "trigger name \"{name}\" is invalid: a letter, then up to 62 letters, digits, _ or -"
        )))
    }
}

/// The events, expanded (`write`) and in the order of [`EVENTS`].
fn check_events(events: &[Option<String>]) -> Result<Vec<String>, DocstoreError> {
    if events.is_empty() {
        return Err(invalid(
            "events is empty: name create, update, delete or write".into(),
        ));
    }
    let mut chosen = [false; 3];
    for event in events {
        match event.as_deref() {
            Some("write") => chosen = [true; 3],
            Some(e) if EVENTS.contains(&e) => {
                if let Some(i) = EVENTS.iter().position(|x| *x == e) {
                    chosen[i] = true;
                }
            }
            other => {
                return Err(invalid(format!(
                    "unknown event {}: a trigger's events are create, update, delete or write",
                    other.map_or("NULL".to_owned(), |e| format!("\"{e}\""))
                )))
            }
        }
    }
    Ok(EVENTS
        .iter()
        .zip(chosen)
        .filter(|(_, on)| *on)
        .map(|(e, _)| (*e).to_owned())
        .collect())
}

/// The URL must be http(s) and start with one of `docstore.trigger_url_prefixes` (`*`: any).
fn check_url(url: &str) -> Result<(), DocstoreError> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(invalid(format!(
            "trigger URL \"{url}\" is not an http:// or https:// URL"
        )));
    }
    let prefixes = guc::trigger_url_prefixes();
    let allowed = prefixes
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .any(|p| p == "*" || url.starts_with(p));
    if allowed {
        Ok(())
    } else {
        Err(DocstoreError::PermissionDenied(format!(
            "trigger URL \"{url}\" does not start with a prefix of docstore.trigger_url_prefixes \
             ('{prefixes}')"
        )))
    }
}

/// The options without the secret, and the secret if given.
fn check_options(options: Json) -> Result<(Json, Option<String>), DocstoreError> {
    let Json::Object(mut map) = options else {
        return Err(invalid("options must be a JSON object".into()));
    };
    if let Some(key) = map.keys().find(|k| !OPTIONS.contains(&k.as_str())) {
        return Err(invalid(format!(
            "unknown option \"{key}\": a trigger's options are secret and role"
        )));
    }
    let secret = match map.remove("secret") {
        None => None,
        Some(Json::String(s)) if s.len() >= 16 => Some(s),
        Some(_) => {
            return Err(invalid(
                "option secret must be a string of at least 16 characters".into(),
            ))
        }
    };
    match map.get("role") {
        None | Some(Json::String(_)) => {}
        Some(_) => return Err(invalid("option role must be a role name".into())),
    }
    Ok((Json::Object(map), secret))
}

/// Create a write trigger of the session's database (`docstore.database`): every committed
/// change of a document matching `pattern` whose event is in `events` will be POSTed to `url`
/// (docs/triggers.md). Returns the generated secret, this once (NULL when `options` gave one).
///
/// ```sql
/// select docstore.create_trigger('avg', 'restaurants/{id}/ratings/{rating}', '{create}',
///                                'https://functions.example.com/avg', 'exactly_once');
/// ```
#[pg_extern(volatile)]
fn create_trigger(
    name: &str,
    pattern: &str,
    events: Vec<Option<String>>,
    url: &str,
    mode: default!(&str, "'at_least_once'"),
    options: default!(pgrx::JsonB, "'{}'"),
) -> Result<Option<String>, ErrorReport> {
    check_name(name)?;
    PathPattern::parse_document(pattern).map_err(DocstoreError::from)?;
    let events = check_events(&events)?;
    if !MODES.contains(&mode) {
        return Err(invalid(format!(
            "unknown mode \"{mode}\": at_least_once or exactly_once"
        ))
        .into());
    }
    check_url(url)?;
    let (options, secret) = check_options(options.0)?;
    let database = guc::database_id()?;
    let generated = secret.is_none();
    let stored = Spi::connect_mut(|client| -> Result<Option<String>, DocstoreError> {
        let rows = client.update(
            "insert into docstore.triggers \
               (name, database_id, pattern, events, url, mode, options, secret) \
             values ($1, $2, $3, string_to_array($4, ','), $5, $6, $7::jsonb, \
               coalesce($8, 'whsec_' || replace(gen_random_uuid()::text, '-', '') \
                                     || replace(gen_random_uuid()::text, '-', ''))) \
             on conflict (name) do nothing returning secret",
            Some(1),
            &[
                name.into(),
                database.as_str().into(),
                pattern.into(),
                events.join(",").into(),
                url.into(),
                mode.into(),
                options.to_string().into(),
                secret.into(),
            ],
        )?;
        let Some(row) = rows.into_iter().next() else {
            return Err(DocstoreError::TriggerExists {
                name: name.to_owned(),
            });
        };
        Ok(row.get::<String>(1)?)
    })?;
    Ok(if generated { stored } else { None })
}

/// Drop a trigger with its undelivered changes and acknowledgements.
#[pg_extern(volatile)]
fn drop_trigger(name: &str) -> Result<(), ErrorReport> {
    Spi::connect_mut(|client| -> Result<(), DocstoreError> {
        let dropped = client
            .update(
                "delete from docstore.triggers where name = $1 returning 1",
                None,
                &[name.into()],
            )?
            .len();
        if dropped == 0 {
            return Err(DocstoreError::TriggerNotFound {
                name: name.to_owned(),
            });
        }
        client.update(
            "delete from docstore.trigger_deliveries where trigger_name = $1",
            None,
            &[name.into()],
        )?;
        client.update(
            "delete from docstore.trigger_acks where trigger_name = $1",
            None,
            &[name.into()],
        )?;
        Ok(())
    })?;
    Ok(())
}

/// Put a trigger's parked changes back to pending, due now with their attempts reset; returns
/// how many.
#[pg_extern(volatile)]
fn retry_trigger(name: &str) -> Result<i64, ErrorReport> {
    let retried = Spi::connect_mut(|client| -> Result<usize, DocstoreError> {
        let known = client
            .select(
                "select 1 from docstore.triggers where name = $1",
                Some(1),
                &[name.into()],
            )?
            .len();
        if known == 0 {
            return Err(DocstoreError::TriggerNotFound {
                name: name.to_owned(),
            });
        }
        Ok(client
            .update(
                "update docstore.trigger_deliveries \
                 set state = 'pending', attempts = 0, next_attempt = now() \
                 where trigger_name = $1 and state = 'parked' returning 1",
                None,
                &[name.into()],
            )?
            .len())
    })?;
    Ok(i64::try_from(retried).unwrap_or(i64::MAX))
}
