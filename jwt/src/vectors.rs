//! The shared token table tests/vectors/jwt.json, minted at a given time: the crate's unit
//! test, the sidecar's tests and the extension's `#[pg_test]` check every case against
//! their verifier.

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::{Map, Value as Json};

use crate::keys::Settings;

/// The table's text.
pub const TEXT: &str = include_str!("../../tests/vectors/jwt.json");

/// One case, minted.
#[derive(Debug, Clone)]
pub struct Case {
    /// What it shows.
    pub name: String,
    /// The verifier's settings.
    pub settings: Settings,
    /// The token.
    pub token: String,
    /// `"ok"` or the name of the expected [`crate::ErrorKind`].
    pub expect: String,
}

fn field<'a>(value: &'a Json, key: &str) -> Result<&'a Json, String> {
    value.get(key).ok_or_else(|| format!("missing {key}"))
}

fn text(value: &Json, key: &str) -> Result<String, String> {
    field(value, key)?
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{key} is not a string"))
}

/// `{"now": N}` anywhere in the claims becomes `now + N` (integer or fractional).
fn resolve(value: &Json, now: u64) -> Result<Json, String> {
    Ok(match value {
        Json::Object(map) if map.len() == 1 && map.contains_key("now") => {
            let offset = &map["now"];
            #[allow(clippy::cast_possible_wrap, clippy::cast_precision_loss)]
            match offset.as_i64() {
                Some(n) => Json::from(now as i64 + n),
                None => {
                    let f = offset.as_f64().ok_or("now: not a number")?;
                    Json::from(now as f64 + f)
                }
            }
        }
        Json::Object(map) => Json::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), resolve(v, now)?)))
                .collect::<Result<Map<_, _>, String>>()?,
        ),
        other => other.clone(),
    })
}

fn settings(value: &Json, keys: &Json) -> Result<Settings, String> {
    let opt = |key: &str| value.get(key).and_then(Json::as_str).map(str::to_owned);
    let jwks = match value.get("jwks") {
        None => None,
        Some(list) => {
            let mut set = Vec::new();
            for entry in list.as_array().ok_or("jwks is not an array")? {
                let name = text(entry, "key")?;
                let mut jwk = field(field(keys, &name)?, "jwk")?.clone();
                if let (Some(obj), Some(kid)) = (jwk.as_object_mut(), entry.get("kid")) {
                    obj.insert("kid".into(), kid.clone());
                }
                set.push(jwk);
            }
            Some(serde_json::json!({ "keys": set }).to_string())
        }
    };
    Ok(Settings {
        secret: opt("secret"),
        jwks,
        issuer: opt("issuer"),
        audience: opt("audience"),
        ..Settings::default()
    })
}

fn mint(case: &Json, keys: &Json, now: u64) -> Result<String, String> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = field(case, "header")?;
    let claims = resolve(field(case, "claims")?, now)?;
    let signing_input = format!(
        "{}.{}",
        b64.encode(header.to_string()),
        b64.encode(claims.to_string())
    );
    let sign = field(case, "sign")?;
    let algorithm = || -> Result<Algorithm, String> {
        text(header, "alg")?
            .parse::<Algorithm>()
            .map_err(|e| e.to_string())
    };
    let pem =
        |name: &str, which: &str| -> Result<String, String> { text(field(keys, name)?, which) };
    let key = if sign.as_str() == Some("none") {
        None
    } else if let Some(secret) = sign.get("secret").and_then(Json::as_str) {
        Some(EncodingKey::from_secret(secret.as_bytes()))
    } else if let Some(name) = sign.get("public_pem_as_secret").and_then(Json::as_str) {
        Some(EncodingKey::from_secret(
            pem(name, "public_pem")?.as_bytes(),
        ))
    } else {
        let name = text(sign, "key")?;
        let private = pem(&name, "private_pem")?;
        Some(
            match algorithm()? {
                Algorithm::ES256 | Algorithm::ES384 => EncodingKey::from_ec_pem(private.as_bytes()),
                _ => EncodingKey::from_rsa_pem(private.as_bytes()),
            }
            .map_err(|e| e.to_string())?,
        )
    };
    let signature = match key {
        None => String::new(),
        Some(key) => jsonwebtoken::crypto::sign(signing_input.as_bytes(), &key, algorithm()?)
            .map_err(|e| e.to_string())?,
    };
    Ok(format!("{signing_input}.{signature}"))
}

/// Every case of the table, its tokens minted at `now` (Unix seconds).
///
/// # Errors
/// A table that does not have the documented form (a test failure).
pub fn cases(now: u64) -> Result<Vec<Case>, String> {
    let table: Json = serde_json::from_str(TEXT).map_err(|e| e.to_string())?;
    let keys = field(&table, "keys")?;
    let mut out = Vec::new();
    for case in field(&table, "cases")?
        .as_array()
        .ok_or("cases is not an array")?
    {
        let name = text(case, "name")?;
        let token = match case.get("token") {
            Some(token) => token.as_str().ok_or("token is not a string")?.to_owned(),
            None => mint(case, keys, now).map_err(|e| format!("{name}: {e}"))?,
        };
        out.push(Case {
            settings: settings(field(case, "settings")?, keys)
                .map_err(|e| format!("{name}: {e}"))?,
            expect: text(case, "expect")?,
            token,
            name,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{verify, Keys};

    fn now() -> u64 {
        jsonwebtoken::get_current_timestamp()
    }

    #[test]
    fn every_case_of_the_table() {
        let now = now();
        let cases = cases(now).unwrap();
        assert!(cases.len() >= 30, "{}", cases.len());
        for case in cases {
            let keys = Keys::new(&case.settings).unwrap();
            let got = match verify(&case.token, &keys, now) {
                Ok(claims) => {
                    assert_eq!(claims.get("sub").and_then(Json::as_str), Some("u1"));
                    "ok"
                }
                Err(e) => e.kind.name(),
            };
            assert_eq!(got, case.expect, "{}", case.name);
        }
    }

    #[test]
    fn fractional_and_large_numbers_keep_their_value() {
        let now = now();
        let case = cases(now)
            .unwrap()
            .into_iter()
            .find(|c| c.name == "fractional exp")
            .unwrap();
        let claims = verify(&case.token, &Keys::new(&case.settings).unwrap(), now).unwrap();
        #[allow(clippy::cast_precision_loss)]
        let want = now as f64 + 600.5;
        assert_eq!(claims["exp"].as_f64(), Some(want));
    }
}
