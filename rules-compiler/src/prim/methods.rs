//! Methods of each type (receiver first) and the namespaced functions (`math`, `hashing`,
//! `timestamp`, `duration`, `latlng`).

use base64::engine::general_purpose::URL_SAFE as BASE64_URL;
use base64::Engine as _;
use regex::Regex;
use sha2::Digest as _;

use super::ops::{loose_eq, strict_eq, to_set, to_string};
use super::time::{self, NANOS};
use super::{Map, MapDiff, Val};

/// Longest regular expression accepted (bytes), and the compiled size limit.
const MAX_REGEX_LEN: usize = 4_096;
const REGEX_SIZE_LIMIT: usize = 1 << 20;

pub(super) fn apply(name: &str, args: &[&Val]) -> Option<Val> {
    typed(name, args).or_else(|| namespaced(name, args))
}

fn typed(name: &str, args: &[&Val]) -> Option<Val> {
    match args {
        [Val::Str(s), rest @ ..] => string_method(name, s, rest),
        [Val::Bytes(b)] => bytes_method(name, b),
        [Val::List(items), rest @ ..] => list_method(name, items, rest),
        [Val::Set(items), rest @ ..] => set_method(name, items, rest),
        [Val::Map(m), rest @ ..] => map_method(name, m, rest),
        [Val::MapDiff(d)] => diff_method(name, d),
        [Val::Timestamp(t)] => time::timestamp_method(name, *t),
        [Val::Duration(d)] => match name {
            "seconds" => i64::try_from(d / NANOS).ok().map(Val::Int),
            "nanos" => i64::try_from(d % NANOS).ok().map(Val::Int),
            "duration_abs" => time::duration(d.abs()),
            _ => None,
        },
        [Val::LatLng(lat, lng), rest @ ..] => match (name, rest) {
            ("latitude", []) => Some(Val::Float(*lat)),
            ("longitude", []) => Some(Val::Float(*lng)),
            ("distance", [Val::LatLng(lat2, lng2)]) => {
                Some(Val::Float(distance(*lat, *lng, *lat2, *lng2)))
            }
            _ => None,
        },
        [Val::Path(p), Val::Map(bindings)] if name == "bind" => {
            // Paths built in rules have no variables to bind.
            bindings.is_empty().then(|| Val::Path(p.clone()))
        }
        _ => None,
    }
}

fn number(v: &Val) -> Option<f64> {
    match v {
        #[allow(clippy::cast_precision_loss)]
        Val::Int(i) => Some(*i as f64),
        Val::Float(f) => Some(*f),
        _ => None,
    }
}

fn int_of(n: usize) -> Option<Val> {
    i64::try_from(n).ok().map(Val::Int)
}

/// An RE2 pattern compiled by the `regex` crate (same syntax family, linear time). Perl
/// classes are ASCII-only in RE2, so `\d \w \s \b` are made ASCII here.
pub fn regex(pattern: &str, whole: bool) -> Option<Regex> {
    if pattern.len() > MAX_REGEX_LEN {
        return None;
    }
    let body = ascii_classes(pattern);
    let body = if whole {
        format!("\\A(?:{body})\\z")
    } else {
        body
    };
    regex::RegexBuilder::new(&body)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .ok()
}

fn ascii_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars();
    let mut class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('d' | 'D' | 'w' | 'W' | 's' | 'S')) => {
                    let text = match (class, e) {
                        (false, 'd') => "[0-9]",
                        (false, 'D') => "[^0-9]",
                        (false, 'w') => "[0-9A-Za-z_]",
                        (false, 'W') => "[^0-9A-Za-z_]",
                        (false, 's') => "[\\t\\n\\f\\r ]",
                        (false, _) => "[^\\t\\n\\f\\r ]",
                        (true, 'd') => "0-9",
                        (true, 'w') => "0-9A-Za-z_",
                        (true, 's') => "\\t\\n\\f\\r ",
                        (true, 'D') => "\\D",
                        (true, 'W') => "\\W",
                        (true, _) => "\\S",
                    };
                    out.push_str(text);
                }
                Some('b') if !class => out.push_str("(?-u:\\b)"),
                Some('B') if !class => out.push_str("(?-u:\\B)"),
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => out.push('\\'),
            },
            '[' if !class => {
                class = true;
                out.push('[');
            }
            ']' if class => {
                class = false;
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

fn string_method(name: &str, s: &str, rest: &[&Val]) -> Option<Val> {
    Some(match (name, rest) {
        ("size", []) => int_of(s.encode_utf16().count())?,
        // Only ASCII letters change case (as Firebase's emulator does).
        ("lower", []) => Val::Str(s.to_ascii_lowercase()),
        ("upper", []) => Val::Str(s.to_ascii_uppercase()),
        // Java's trim: spaces and control characters at both ends.
        ("trim", []) => Val::str(s.trim_matches(|c: char| c <= ' ')),
        ("to_utf8", []) => Val::Bytes(s.as_bytes().to_vec()),
        ("matches", [Val::Str(re)]) => Val::Bool(regex(re, true)?.is_match(s)),
        ("split", [Val::Str(re)]) => {
            let re = regex(re, false)?;
            let mut parts: Vec<&str> = re.split(s).collect();
            // Java's split: trailing empty strings dropped, one kept for an empty result.
            while parts.len() > 1 && parts.last() == Some(&"") {
                parts.pop();
            }
            Val::List(parts.into_iter().map(Val::str).collect())
        }
        ("replace", [Val::Str(re), Val::Str(with)]) => {
            let re = regex(re, false)?;
            Val::Str(replace_all(&re, s, with)?)
        }
        _ => return None,
    })
}

/// `replace()` with Java's replacement syntax: `$1`, `${name}`, `\` escapes.
fn replace_all(re: &Regex, s: &str, replacement: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for caps in re.captures_iter(s) {
        let m = caps.get(0)?;
        out.push_str(s.get(last..m.start())?);
        let mut chars = replacement.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.push(chars.next()?),
                '$' => {
                    let group = if chars.peek() == Some(&'{') {
                        chars.next();
                        let name: String = chars.by_ref().take_while(|&c| c != '}').collect();
                        caps.name(&name)?.as_str()
                    } else {
                        let mut number = chars.next()?.to_digit(10)? as usize;
                        while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                            let longer = number * 10 + d as usize;
                            if longer >= caps.len() {
                                break;
                            }
                            number = longer;
                            chars.next();
                        }
                        if number >= caps.len() {
                            return None;
                        }
                        caps.get(number).map_or("", |g| g.as_str())
                    };
                    out.push_str(group);
                }
                c => out.push(c),
            }
        }
        last = m.end();
    }
    out.push_str(s.get(last..)?);
    Some(out)
}

fn bytes_method(name: &str, b: &[u8]) -> Option<Val> {
    Some(match name {
        "size" => int_of(b.len())?,
        "to_base64" => Val::Str(BASE64_URL.encode(b)),
        "to_hex_string" => Val::Str(b.iter().map(|x| format!("{x:02X}")).collect()),
        _ => return None,
    })
}

fn items(v: &Val) -> Option<&[Val]> {
    match v {
        Val::List(items) | Val::Set(items) => Some(items),
        _ => None,
    }
}

fn list_method(name: &str, list: &[Val], rest: &[&Val]) -> Option<Val> {
    let contains = |xs: &[Val], x: &Val| xs.iter().any(|y| strict_eq(y, x));
    Some(match (name, rest) {
        ("size", []) => int_of(list.len())?,
        ("to_set", []) => to_set(list.iter().cloned()),
        ("has_all", [Val::List(o)]) => Val::Bool(o.iter().all(|x| contains(list, x))),
        ("has_any", [Val::List(o)]) => Val::Bool(o.iter().any(|x| contains(list, x))),
        ("has_only", [Val::List(o)]) => Val::Bool(list.iter().all(|x| contains(o, x))),
        ("concat", [Val::List(o)]) => Val::List(list.iter().chain(o).cloned().collect()),
        ("remove_all", [Val::List(o)]) => {
            Val::List(list.iter().filter(|x| !contains(o, x)).cloned().collect())
        }
        ("join", [Val::Str(sep)]) => Val::Str(
            list.iter()
                .map(to_string)
                .collect::<Option<Vec<_>>>()?
                .join(sep),
        ),
        _ => return None,
    })
}

fn set_method(name: &str, set: &[Val], rest: &[&Val]) -> Option<Val> {
    let contains = |xs: &[Val], x: &Val| xs.iter().any(|y| loose_eq(y, x));
    Some(match (name, rest) {
        ("size", []) => int_of(set.len())?,
        ("has_all", [o]) => Val::Bool(items(o)?.iter().all(|x| contains(set, x))),
        ("has_any", [o]) => Val::Bool(items(o)?.iter().any(|x| contains(set, x))),
        ("has_only", [o]) => {
            let o = items(o)?;
            Val::Bool(set.iter().all(|x| contains(o, x)))
        }
        ("union", [Val::Set(o)]) => to_set(set.iter().chain(o).cloned()),
        ("intersection", [Val::Set(o)]) => to_set(set.iter().filter(|x| contains(o, x)).cloned()),
        ("difference", [Val::Set(o)]) => to_set(set.iter().filter(|x| !contains(o, x)).cloned()),
        _ => return None,
    })
}

fn map_method(name: &str, m: &Map, rest: &[&Val]) -> Option<Val> {
    Some(match (name, rest) {
        ("size", []) => int_of(m.len())?,
        // Keys sorted (UTF-16 order, as Firebase lists them).
        ("keys", []) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            Val::List(keys.into_iter().map(|k| Val::str(k)).collect())
        }
        ("values", []) => Val::List(m.values().cloned().collect()),
        ("map_get", [Val::Str(k), default]) => {
            m.get(k).cloned().unwrap_or_else(|| (*default).clone())
        }
        ("map_get", [Val::List(path), default]) => {
            // `None`: still at `m` itself (walked by reference; only the result is copied).
            let mut current: Option<&Val> = None;
            for key in path {
                let Val::Str(key) = key else { return None };
                let inner = match current {
                    None => Some(m),
                    Some(Val::Map(inner)) => Some(inner),
                    Some(_) => None,
                };
                match inner.and_then(|inner| inner.get(key)) {
                    Some(v) => current = Some(v),
                    None => return Some((*default).clone()),
                }
            }
            current.map_or_else(|| Val::Map(m.clone()), Val::clone)
        }
        ("diff", [Val::Map(other)]) => {
            let mut d = MapDiff::default();
            for (k, v) in m {
                match other.get(k) {
                    None => d.added.push(k.clone()),
                    Some(w) if loose_eq(v, w) => d.unchanged.push(k.clone()),
                    Some(_) => d.changed.push(k.clone()),
                }
            }
            d.removed = other
                .keys()
                .filter(|k| !m.contains_key(*k))
                .cloned()
                .collect();
            Val::MapDiff(Box::new(d))
        }
        _ => return None,
    })
}

fn diff_method(name: &str, d: &MapDiff) -> Option<Val> {
    let keys: Vec<String> = match name {
        "added_keys" => d.added.clone(),
        "removed_keys" => d.removed.clone(),
        "changed_keys" => d.changed.clone(),
        "unchanged_keys" => d.unchanged.clone(),
        "affected_keys" => d
            .added
            .iter()
            .chain(&d.removed)
            .chain(&d.changed)
            .cloned()
            .collect(),
        _ => return None,
    };
    Some(to_set(keys.into_iter().map(Val::Str)))
}

const EARTH_RADIUS: f64 = 6_371_010.0;

/// Great-circle distance in meters (haversine).
fn distance(lat1: f64, lng1: f64, lat2: f64, lng2: f64) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let (dp, dl) = ((lat2 - lat1).to_radians(), (lng2 - lng1).to_radians());
    let h = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS * h.sqrt().asin()
}

/// Java's `Math.round`: nearest, halves up, saturating, NaN to 0.
#[allow(clippy::cast_possible_truncation)]
fn java_round(x: f64) -> i64 {
    let floor = x.floor();
    let rounded = if x - floor >= 0.5 { floor + 1.0 } else { floor };
    rounded as i64
}

/// A reflected CRC-32 with `polynomial` (IEEE 0xEDB88320 or Castagnoli 0x82F63B78).
fn crc32(polynomial: u32, data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ polynomial
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn namespaced(name: &str, args: &[&Val]) -> Option<Val> {
    match (name, args) {
        ("math_abs", [Val::Int(i)]) => i.checked_abs().map(Val::Int),
        ("math_abs", [Val::Float(f)]) => Some(Val::Float(f.abs())),
        ("math_ceil", [v]) => Some(Val::Float(number(v)?.ceil())),
        ("math_floor", [v]) => Some(Val::Float(number(v)?.floor())),
        ("math_sqrt", [v]) => Some(Val::Float(number(v)?.sqrt())),
        ("math_round", [Val::Int(i)]) => Some(Val::Int(*i)),
        ("math_round", [Val::Float(f)]) => Some(Val::Int(java_round(*f))),
        ("math_pow", [a, b]) => Some(Val::Float(number(a)?.powf(number(b)?))),
        ("math_is_infinite", [v]) => Some(Val::Bool(number(v)?.is_infinite())),
        ("math_is_nan", [v]) => Some(Val::Bool(number(v)?.is_nan())),
        ("hashing_crc32" | "hashing_crc32c" | "hashing_md5" | "hashing_sha256", [v]) => {
            let data: &[u8] = match v {
                Val::Bytes(b) => b,
                Val::Str(s) => s.as_bytes(),
                _ => return None,
            };
            Some(Val::Bytes(match name {
                "hashing_crc32" => crc32(0xEDB8_8320, data).to_le_bytes().to_vec(),
                "hashing_crc32c" => crc32(0x82F6_3B78, data).to_le_bytes().to_vec(),
                "hashing_md5" => md5::Md5::digest(data).to_vec(),
                _ => sha2::Sha256::digest(data).to_vec(),
            }))
        }
        ("timestamp_date", [Val::Int(y), Val::Int(m), Val::Int(d)]) => {
            if !(1..=9999).contains(y) || !(1..=12).contains(m) {
                return None;
            }
            if *d < 1 || *d > time::days_in_month(*y, *m) {
                return None;
            }
            time::timestamp(i128::from(time::days_from_civil(*y, *m, *d)) * 86_400 * NANOS)
        }
        ("timestamp_value", [Val::Int(ms)]) => time::timestamp(i128::from(*ms) * 1_000_000),
        ("duration_value", [Val::Int(n), Val::Str(unit)]) => time::duration_value(*n, unit),
        ("duration_time", [Val::Int(h), Val::Int(m), Val::Int(s), Val::Int(n)]) => {
            let [h, m, s, n] = [*h, *m, *s, *n].map(i128::from);
            time::duration(((h * 60 + m) * 60 + s) * NANOS + n)
        }
        ("duration_abs", [Val::Duration(d)]) => time::duration(d.abs()),
        ("latlng_value", [a, b]) => {
            let (lat, lng) = (number(a)?, number(b)?);
            ((-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lng))
                .then_some(Val::LatLng(lat, lng))
        }
        _ => None,
    }
}
