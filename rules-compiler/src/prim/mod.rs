//! The primitive operations of the rules language: one implementation, two callers.
//!
//! Every primitive is a **total** function: it never panics and never raises; `None` is
//! Firestore's *error* value (a missing field, a type error, a division by zero, an integer
//! overflow, an index out of range, a bad regular expression...). Every primitive is
//! **strict**: an error argument makes an error result, so callers check arguments once.
//! The short-circuiting, error-absorbing `&&`, `||` and `?:` are not primitives: the
//! evaluator implements them, and SQL's own three-valued `AND`/`OR` (plus an explicit `CASE`
//! for `?:`) implements them in the SQL back end.
//!
//! # The API the extension wraps
//!
//! Values cross SQL as typed-JSON `jsonb` (docs/typed-json.md) with five more tags for the
//! rules-only types, each a one-key object (a map whose only key is a tag is wrapped in
//! `{"$map": ..}` as usual):
//! `{"$path": ["databases", "(default)", "documents", "users", "u1"]}`,
//! `{"$set": [..]}`, `{"$duration": "<nanoseconds>"}`,
//! `{"$mapdiff": {"added": [..], "removed": [..], "changed": [..], "unchanged": [..]}}`,
//! and `$timestamp` with up to nine fraction digits. `$geo` is a `latlng`. A `$ref` never
//! reaches a primitive: documents enter through [`document`], which turns each reference
//! into a path under its database (a `$ref` elsewhere is an error).
//!
//! The one entry point is [`apply_json`]: `apply_json(name, args) -> Option<Json>`. SQL NULL
//! is `None` both ways. For each row `(name, arity)` of [`CATALOG`] the extension defines
//!
//! ```sql
//! CREATE FUNCTION docstore.rules_<name>(a jsonb, b jsonb, ...) RETURNS jsonb
//!     IMMUTABLE STRICT PARALLEL SAFE  -- one line of Rust:
//! -- #[pg_extern(immutable, strict, parallel_safe)]
//! -- fn rules_add(a: JsonB, b: JsonB) -> Option<JsonB> {
//! --     prim::apply_json("add", &[Some(a.0), Some(b.0)]).map(JsonB)
//! -- }
//! ```
//!
//! [`Arity::Variadic`] rows (`list`, `map`, `path`) take `VARIADIC jsonb[]` and are *not*
//! STRICT (a NULL element must still give NULL, which `apply_json` does when passed `None`).
//! Besides the catalog the SQL back end uses three functions of another shape:
//! `docstore.rules_truth(jsonb) RETURNS boolean` ([`truth`]: true/false for a JSON boolean,
//! NULL for anything else, IMMUTABLE), `docstore.rules_document(db text, path text, data
//! jsonb) RETURNS jsonb` ([`document`], IMMUTABLE) and the lookups
//! `docstore.rules_lookup(kind text, path jsonb) RETURNS jsonb` (get, exists, getAfter,
//! existsAfter: STABLE, SECURITY DEFINER, budgeted; not a primitive, it reads documents).

pub mod json;
mod methods;
pub mod ops;
mod time;

use std::collections::BTreeMap;

pub use json::{document, from_json, to_json, value_from_core};
pub use ops::{compare_values, eq};

/// A rules value. Firestore values convert to these; `Set`, `MapDiff`, `Duration` and
/// `Path` only come from rules.
#[derive(Debug, Clone)]
pub enum Val {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    /// Nanoseconds since the Unix epoch, within years 1..=9999.
    Timestamp(i128),
    /// Nanoseconds, within about 10,000 years either way.
    Duration(i128),
    LatLng(f64, f64),
    /// Segments from `databases`: `["databases", "(default)", "documents", "users", "u1"]`.
    Path(Vec<String>),
    List(Vec<Val>),
    /// Distinct items (by value equality), in insertion order.
    Set(Vec<Val>),
    Map(Map),
    MapDiff(Box<MapDiff>),
}

/// A map's entries (keys in UTF-8 order).
pub type Map = BTreeMap<String, Val>;

/// `a.diff(b)`: the keys of `a` not in `b` are added, those of `b` not in `a` removed.
#[derive(Debug, Clone, Default)]
pub struct MapDiff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    pub unchanged: Vec<String>,
}

impl Val {
    /// The type's name as `is` and error messages spell it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Val::Null => "null",
            Val::Bool(_) => "bool",
            Val::Int(_) => "int",
            Val::Float(_) => "float",
            Val::Str(_) => "string",
            Val::Bytes(_) => "bytes",
            Val::Timestamp(_) => "timestamp",
            Val::Duration(_) => "duration",
            Val::LatLng(..) => "latlng",
            Val::Path(_) => "path",
            Val::List(_) => "list",
            Val::Set(_) => "set",
            Val::Map(_) => "map",
            Val::MapDiff(_) => "map_diff",
        }
    }

    /// `value is type_name`. Nothing is a `set` (as Firebase's emulator answers, measured by
    /// hidane-rules) and nothing is a `constraint` here.
    pub fn is(&self, type_name: &str) -> bool {
        match type_name {
            "number" => matches!(self, Val::Int(_) | Val::Float(_)),
            "set" => false,
            name => self.type_name() == name,
        }
    }

    pub fn str(s: &str) -> Val {
        Val::Str(s.to_owned())
    }
}

/// How many arguments a primitive takes (the receiver of a method counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    Exactly(usize),
    Between(usize, usize),
    Variadic,
}

impl Arity {
    pub fn accepts(self, n: usize) -> bool {
        match self {
            Arity::Exactly(k) => n == k,
            Arity::Between(a, b) => (a..=b).contains(&n),
            Arity::Variadic => true,
        }
    }
}

/// Every primitive: its name (the SQL function is `docstore.rules_<name>`) and arity.
pub const CATALOG: &[(&str, Arity)] = &[
    // Operators.
    ("add", Arity::Exactly(2)),
    ("sub", Arity::Exactly(2)),
    ("mul", Arity::Exactly(2)),
    ("div", Arity::Exactly(2)),
    ("mod", Arity::Exactly(2)),
    ("neg", Arity::Exactly(1)),
    ("not", Arity::Exactly(1)),
    ("eq", Arity::Exactly(2)),
    ("ne", Arity::Exactly(2)),
    ("lt", Arity::Exactly(2)),
    ("le", Arity::Exactly(2)),
    ("gt", Arity::Exactly(2)),
    ("ge", Arity::Exactly(2)),
    ("in", Arity::Exactly(2)),
    ("is", Arity::Exactly(2)),
    ("member", Arity::Exactly(2)),
    ("index", Arity::Exactly(2)),
    ("range", Arity::Exactly(3)),
    // Constructors and paths.
    ("list", Arity::Variadic),
    ("map", Arity::Variadic),
    ("path", Arity::Variadic),
    ("match_path", Arity::Exactly(3)),
    // Global functions.
    ("int", Arity::Exactly(1)),
    ("float", Arity::Exactly(1)),
    ("string", Arity::Exactly(1)),
    ("path_of", Arity::Exactly(1)),
    ("debug", Arity::Exactly(1)),
    // Namespaced functions.
    ("math_abs", Arity::Exactly(1)),
    ("math_ceil", Arity::Exactly(1)),
    ("math_floor", Arity::Exactly(1)),
    ("math_round", Arity::Exactly(1)),
    ("math_sqrt", Arity::Exactly(1)),
    ("math_pow", Arity::Exactly(2)),
    ("math_is_infinite", Arity::Exactly(1)),
    ("math_is_nan", Arity::Exactly(1)),
    ("hashing_crc32", Arity::Exactly(1)),
    ("hashing_crc32c", Arity::Exactly(1)),
    ("hashing_md5", Arity::Exactly(1)),
    ("hashing_sha256", Arity::Exactly(1)),
    ("timestamp_date", Arity::Exactly(3)),
    ("timestamp_value", Arity::Exactly(1)),
    ("duration_value", Arity::Exactly(2)),
    ("duration_time", Arity::Exactly(4)),
    ("duration_abs", Arity::Exactly(1)),
    ("latlng_value", Arity::Exactly(2)),
    // Methods (receiver first).
    ("size", Arity::Exactly(1)),
    ("lower", Arity::Exactly(1)),
    ("upper", Arity::Exactly(1)),
    ("trim", Arity::Exactly(1)),
    ("to_utf8", Arity::Exactly(1)),
    ("matches", Arity::Exactly(2)),
    ("split", Arity::Exactly(2)),
    ("replace", Arity::Exactly(3)),
    ("to_base64", Arity::Exactly(1)),
    ("to_hex_string", Arity::Exactly(1)),
    ("to_set", Arity::Exactly(1)),
    ("has_all", Arity::Exactly(2)),
    ("has_any", Arity::Exactly(2)),
    ("has_only", Arity::Exactly(2)),
    ("concat", Arity::Exactly(2)),
    ("remove_all", Arity::Exactly(2)),
    ("join", Arity::Exactly(2)),
    ("map_get", Arity::Exactly(3)),
    ("keys", Arity::Exactly(1)),
    ("values", Arity::Exactly(1)),
    ("diff", Arity::Exactly(2)),
    ("union", Arity::Exactly(2)),
    ("intersection", Arity::Exactly(2)),
    ("difference", Arity::Exactly(2)),
    ("added_keys", Arity::Exactly(1)),
    ("removed_keys", Arity::Exactly(1)),
    ("changed_keys", Arity::Exactly(1)),
    ("unchanged_keys", Arity::Exactly(1)),
    ("affected_keys", Arity::Exactly(1)),
    ("date", Arity::Exactly(1)),
    ("time", Arity::Exactly(1)),
    ("to_millis", Arity::Exactly(1)),
    ("year", Arity::Exactly(1)),
    ("month", Arity::Exactly(1)),
    ("day", Arity::Exactly(1)),
    ("hours", Arity::Exactly(1)),
    ("minutes", Arity::Exactly(1)),
    ("seconds", Arity::Exactly(1)),
    ("nanos", Arity::Exactly(1)),
    ("day_of_week", Arity::Exactly(1)),
    ("day_of_year", Arity::Exactly(1)),
    ("distance", Arity::Exactly(2)),
    ("latitude", Arity::Exactly(1)),
    ("longitude", Arity::Exactly(1)),
    ("bind", Arity::Exactly(2)),
];

/// The arity of primitive `name`, if it is one. Asked on every primitive call, so the catalog
/// is indexed once.
pub fn arity(name: &str) -> Option<Arity> {
    static INDEX: std::sync::OnceLock<std::collections::HashMap<&'static str, Arity>> =
        std::sync::OnceLock::new();
    INDEX
        .get_or_init(|| CATALOG.iter().copied().collect())
        .get(name)
        .copied()
}

/// The primitive of the method `name` (rules spelling, `hasAll`), if there is one.
pub fn method_prim(name: &str) -> Option<String> {
    let prim = match name {
        "get" => "map_get".to_owned(),
        _ => method_prim_name(name),
    };
    let methods_start = CATALOG.iter().position(|(n, _)| *n == "size").unwrap_or(0);
    CATALOG[methods_start..]
        .iter()
        .any(|(n, _)| *n == prim)
        .then_some(prim)
}

/// The primitive of a namespaced function (`math.abs`) or global one (`int`).
pub fn function_prim(namespace: Option<&str>, name: &str) -> Option<String> {
    let prim = match namespace {
        Some(ns) => {
            let snake = method_prim_name(name);
            format!("{ns}_{snake}")
        }
        None if name == "path" => "path_of".to_owned(),
        None => name.to_owned(),
    };
    let ok = match namespace {
        Some(_) => CATALOG.iter().any(|(n, _)| *n == prim && n.contains('_')),
        None => matches!(
            prim.as_str(),
            "int" | "float" | "string" | "path_of" | "debug"
        ),
    };
    ok.then_some(prim)
}

fn method_prim_name(name: &str) -> String {
    if name == "isNaN" {
        return "is_nan".to_owned();
    }
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Apply primitive `name` to evaluated arguments. `None`: Firestore's error (also for an
/// unknown name or a wrong number of arguments, which the compiler never emits).
pub fn apply(name: &str, args: &[Val]) -> Option<Val> {
    let args: Vec<&Val> = args.iter().collect();
    apply_refs(name, &args)
}

/// [`apply`] over borrowed arguments: what the evaluator calls, so that reading a field or
/// calling a method of a map (`request.resource.data.keys()`) does not copy the map.
pub fn apply_refs(name: &str, args: &[&Val]) -> Option<Val> {
    if !arity(name)?.accepts(args.len()) {
        return None;
    }
    ops::apply(name, args).or_else(|| methods::apply(name, args))
}

/// [`apply`] over typed-JSON arguments, for the SQL functions: `None` in, `None` out.
pub fn apply_json(name: &str, args: &[Option<serde_json::Value>]) -> Option<serde_json::Value> {
    let mut vals = Vec::with_capacity(args.len());
    for a in args {
        vals.push(from_json(a.as_ref()?)?);
    }
    apply(name, &vals).map(|v| to_json(&v))
}

/// Truth of a condition: `Some(b)` for a boolean, `None` (error) for anything else. The SQL
/// function `docstore.rules_truth(jsonb) RETURNS boolean` is this over JSON.
pub fn truth(v: &Val) -> Option<bool> {
    match v {
        Val::Bool(b) => Some(*b),
        _ => None,
    }
}

/// [`truth`] over typed JSON.
pub fn truth_json(v: &serde_json::Value) -> Option<bool> {
    v.as_bool()
}

#[cfg(test)]
mod tests;
