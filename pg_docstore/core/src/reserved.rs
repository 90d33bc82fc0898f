//! Names nobody may use: Firestore's reserved names, and the one map key serde_json keeps
//! for itself. A leaf module (it imports nothing from core): paths, typed JSON, the value
//! encoding and the document checks all read it.

/// Whether `name` is reserved: `.`, `..`, or `__.*__`.
pub fn is_reserved_name(name: &str) -> bool {
    name == "."
        || name == ".."
        || (name.len() >= 4 && name.starts_with("__") && name.ends_with("__"))
}

/// Whether the document id `id` is Firestore's form of a numeric id: `__id<n>__` with `n` a
/// 64-bit signed integer in canonical decimal (no `+`, no leading zero, no `-0`). Firestore
/// reserves ids matching `__.*__` but exposes Datastore's numeric ids in this form
/// (https://firebase.google.com/docs/firestore/quotas, "Collections, documents, and fields"),
/// and the SDKs name `__id-9223372036854775808__`, the lowest of them, in the `__name__`
/// cursors of recursive queries and recursive deletes; such an id is not reserved.
pub fn is_numeric_id(id: &str) -> bool {
    let Some(n) = id
        .strip_prefix("__id")
        .and_then(|rest| rest.strip_suffix("__"))
    else {
        return false;
    };
    n.parse::<i64>().is_ok_and(|value| value.to_string() == n)
}

/// The one map key typed JSON cannot hold. serde_json (with `arbitrary_precision`, which keeps
/// numbers exact) passes every number to its visitors as a map with this single key: a real
/// object whose first key is this one fails to parse, or, with a numeric string value, silently
/// reads as that number. So [`crate::typed_json::json_from_str`] refuses any text that
/// mentions it, writes refuse it as a field name ([`crate::document::check_document`]), paths
/// refuse an ID that mentions it (paths travel in typed JSON), and the index decoder any
/// string that mentions it (no document can hold one); all through [`mentions_reserved`].
pub const RESERVED_KEY: &str = "$serde_json::private::Number";

/// [`RESERVED_KEY`] without its `$`: what [`mentions_reserved`] looks for, so that escaped
/// forms of the `$` are caught too.
const RESERVED_MARK: &str = "serde_json::private::Number";

/// Whether `text` mentions [`RESERVED_KEY`] (with or without its `$`, escaped or not).
pub fn mentions_reserved(text: &str) -> bool {
    text.contains(RESERVED_MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_is_the_key_without_its_dollar() {
        assert_eq!(RESERVED_KEY, format!("${RESERVED_MARK}"));
        assert!(mentions_reserved(RESERVED_KEY));
        assert!(mentions_reserved("a\\u0024serde_json::private::Number"));
        assert!(!mentions_reserved("serde_json::private"));
    }

    #[test]
    fn numeric_ids() {
        for id in [
            "__id0__",
            "__id7__",
            "__id-1__",
            "__id9223372036854775807__",
            "__id-9223372036854775808__",
        ] {
            assert!(is_numeric_id(id), "{id}");
        }
        for id in [
            "__id__",
            "__id-__",
            "__id-0__",
            "__id+1__",
            "__id01__",
            "__id9223372036854775808__",
            "__id-9223372036854775809__",
            "__id1_",
            "__idx__",
            "__id 1__",
            "id1",
            "__name__",
        ] {
            assert!(!is_numeric_id(id), "{id}");
        }
    }

    #[test]
    fn reserved_names() {
        for name in [".", "..", "__name__", "____"] {
            assert!(is_reserved_name(name), "{name}");
        }
        for name in ["...", "__", "___", "__a", "a__", "a"] {
            assert!(!is_reserved_name(name), "{name}");
        }
    }
}
