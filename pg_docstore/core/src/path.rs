//! Document, collection and field paths.
//!
//! A resource path is a list of segments: an odd number names a collection
//! (`restaurants`, `restaurants/one/ratings`), an even number a document
//! (`restaurants/one`). Paths compare segment by segment (UTF-8 byte order), which is
//! Firestore's document-name order and what [`crate::encoding::encode_name`] preserves.

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use crate::error::ErrorKind;

/// The default database id, as in Firestore.
pub const DEFAULT_DATABASE: &str = "(default)";

/// How a valid database id looks, for error messages.
pub const DATABASE_ID_RULE: &str =
    "use '(default)' or 4-63 lowercase letters, digits and hyphens, starting with a letter";

/// Whether `id` is a database id Firestore accepts: `(default)`, or 4-63 lowercase letters,
/// digits and hyphens starting with a letter and not ending with a hyphen. The extension
/// (`docstore.database`, `create_database`) and the sidecar (the `{db}` of every URL) both ask
/// this function.
pub fn is_valid_database_id(id: &str) -> bool {
    id == DEFAULT_DATABASE
        || ((4..=63).contains(&id.len())
            && id.starts_with(|c: char| c.is_ascii_lowercase())
            && id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !id.ends_with('-'))
}

pub use crate::limits::{MAX_COLLECTION_DEPTH, MAX_NAME_BYTES};
pub use crate::reserved::is_reserved_name;

/// Why a path was refused. Each variant names the offending path and segment.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PathError {
    #[error("path \"{path}\" is empty")]
    Empty { path: String },
    #[error("path \"{path}\" has an empty segment")]
    EmptySegment { path: String },
    #[error("\"{path}\" is not a document path: a document path has an even number of segments")]
    NotADocument { path: String },
    #[error(
        "\"{path}\" is not a collection path: a collection path has an odd number of segments"
    )]
    NotACollection { path: String },
    #[error("segment \"{segment}\" of path \"{path}\" is reserved (\".\", \"..\" and names matching __.*__ are not allowed)")]
    ReservedSegment { path: String, segment: String },
    #[error("segment \"{segment}\" of path \"{path}\" mentions serde_json::private::Number, which typed JSON reserves (a path must fit in typed JSON, as in references and commit)")]
    ReservedMention { path: String, segment: String },
    #[error("a segment of path \"{path}\" is {bytes} bytes long; the limit is 1500 bytes")]
    SegmentTooLong { path: String, bytes: usize },
    #[error("path \"{path}\" is {depth} collections deep; the limit is 100")]
    TooDeep { path: String, depth: usize },
    #[error("segment \"{segment}\" of path \"{path}\" contains '/'; IDs cannot contain '/'")]
    SlashInSegment { path: String, segment: String },
    #[error("path contains the character U+0000, which cannot be stored")]
    NulCharacter,
    #[error("field path \"{path}\" is invalid: {reason}")]
    InvalidFieldPath { path: String, reason: &'static str },
}

impl PathError {
    /// The kind of failure: every path error is [`ErrorKind::InvalidArgument`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidArgument
    }
}

/// A validated document or collection path.
///
/// The segments are shared: a clone is a reference count, not a copy. A live document's name
/// is held by every result, window, index entry and event that names it (the sidecar's
/// matcher), and paths never change once made. Equality, order and hash are the segments'
/// (the same hash as a `Vec<String>` of them).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourcePath {
    segments: Arc<[String]>,
}

/// A path or name shortened for error messages (at most about 100 bytes, cut at a character
/// boundary).
pub fn abbreviate(text: &str) -> String {
    if text.len() <= 100 {
        return text.to_owned();
    }
    let mut end = 96;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

impl ResourcePath {
    /// Parse any path (document or collection); a leading `/` is optional.
    ///
    /// # Errors
    /// Empty paths or segments, reserved or over-long segments, U+0000, more than 100
    /// collections.
    pub fn parse(text: &str) -> Result<Self, PathError> {
        if text.contains('\0') {
            return Err(PathError::NulCharacter);
        }
        let body = text.strip_prefix('/').unwrap_or(text);
        if body.is_empty() {
            return Err(PathError::Empty {
                path: text.to_owned(),
            });
        }
        let segments: Vec<String> = body.split('/').map(str::to_owned).collect();
        Self::from_segments(segments)
    }

    /// A path from already split segments, validated like [`ResourcePath::parse`].
    ///
    /// # Errors
    /// As [`ResourcePath::parse`].
    pub fn from_segments(segments: Vec<String>) -> Result<Self, PathError> {
        let path = ResourcePath {
            segments: segments.into(),
        };
        let shown = || abbreviate(&path.to_string());
        if path.segments.is_empty() {
            return Err(PathError::Empty {
                path: String::new(),
            });
        }
        for (i, segment) in path.segments.iter().enumerate() {
            if segment.is_empty() {
                return Err(PathError::EmptySegment { path: shown() });
            }
            if segment.contains('\0') {
                return Err(PathError::NulCharacter);
            }
            if segment.contains('/') {
                return Err(PathError::SlashInSegment {
                    path: shown(),
                    segment: segment.clone(),
                });
            }
            if segment.len() > MAX_NAME_BYTES {
                return Err(PathError::SegmentTooLong {
                    path: shown(),
                    bytes: segment.len(),
                });
            }
            // A document id (odd position) may be a numeric id, `__id<n>__`.
            let numeric_id = i % 2 == 1 && crate::reserved::is_numeric_id(segment);
            if is_reserved_name(segment) && !numeric_id {
                return Err(PathError::ReservedSegment {
                    path: shown(),
                    segment: segment.clone(),
                });
            }
            // Typed JSON text that mentions it never parses (docs/typed-json.md), and paths
            // travel in typed JSON: references, `commit`'s writes, the HTTP API.
            if crate::reserved::mentions_reserved(segment) {
                return Err(PathError::ReservedMention {
                    path: shown(),
                    segment: abbreviate(segment),
                });
            }
        }
        let depth = path.segments.len().div_ceil(2);
        if depth > MAX_COLLECTION_DEPTH {
            return Err(PathError::TooDeep {
                path: shown(),
                depth,
            });
        }
        Ok(path)
    }

    /// Parse a document path (even number of segments).
    ///
    /// # Errors
    /// As [`ResourcePath::parse`], and [`PathError::NotADocument`].
    pub fn parse_document(text: &str) -> Result<Self, PathError> {
        let path = Self::parse(text)?;
        if path.is_document() {
            Ok(path)
        } else {
            Err(PathError::NotADocument {
                path: path.to_string(),
            })
        }
    }

    /// Parse a collection path (odd number of segments).
    ///
    /// # Errors
    /// As [`ResourcePath::parse`], and [`PathError::NotACollection`].
    pub fn parse_collection(text: &str) -> Result<Self, PathError> {
        let path = Self::parse(text)?;
        if path.is_document() {
            Err(PathError::NotACollection {
                path: path.to_string(),
            })
        } else {
            Ok(path)
        }
    }

    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    pub fn is_document(&self) -> bool {
        self.segments.len() % 2 == 0
    }

    /// The last segment: a document's ID or a collection's ID.
    pub fn last(&self) -> &str {
        self.segments.last().map(String::as_str).unwrap_or("")
    }

    /// The parent path (a document's collection, a collection's document), if any.
    pub fn parent(&self) -> Option<ResourcePath> {
        (self.segments.len() > 1).then(|| ResourcePath {
            segments: self.segments[..self.segments.len() - 1].into(),
        })
    }

    /// The child path `self/segment`.
    ///
    /// # Errors
    /// If `segment` is not a valid ID or the result is too deep.
    pub fn child(&self, segment: &str) -> Result<ResourcePath, PathError> {
        let mut segments = self.segments.to_vec();
        segments.push(segment.to_owned());
        Self::from_segments(segments)
    }
}

impl fmt::Display for ResourcePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.segments.join("/"))
    }
}

/// A field path: the segments from the document root down to a nested field.
///
/// Text form: segments joined by `.`; a segment that is not a simple identifier
/// (`[A-Za-z_][A-Za-z_0-9]*`) is written in backticks, with `` \` `` and `\\` escapes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldPath {
    segments: Vec<String>,
}

/// The field path of the document's name in queries.
pub const DOCUMENT_ID_FIELD: &str = "__name__";

impl FieldPath {
    /// A field path from segments.
    ///
    /// # Errors
    /// No segments, an empty segment, or U+0000.
    pub fn new(segments: Vec<String>) -> Result<Self, PathError> {
        let shown = || segments.join(".");
        if segments.is_empty() {
            return Err(PathError::InvalidFieldPath {
                path: String::new(),
                reason: "it is empty",
            });
        }
        if segments.iter().any(String::is_empty) {
            return Err(PathError::InvalidFieldPath {
                path: shown(),
                reason: "it has an empty segment",
            });
        }
        if segments.iter().any(|s| s.contains('\0')) {
            return Err(PathError::NulCharacter);
        }
        Ok(FieldPath { segments })
    }

    /// Parse the dotted, backtick-quoting text form.
    ///
    /// # Errors
    /// Empty segments, an unterminated backtick, a stray backtick or backslash, U+0000.
    pub fn parse(text: &str) -> Result<Self, PathError> {
        let invalid = |reason| PathError::InvalidFieldPath {
            path: text.to_owned(),
            reason,
        };
        let mut segments = Vec::new();
        let mut current = String::new();
        let mut chars = text.chars().peekable();
        let mut quoted_segment = false;
        while let Some(c) = chars.next() {
            match c {
                '`' if current.is_empty() && !quoted_segment => {
                    loop {
                        match chars.next() {
                            None => return Err(invalid("a backtick is not closed")),
                            Some('`') => break,
                            Some('\\') => match chars.next() {
                                Some(e @ ('`' | '\\')) => current.push(e),
                                _ => return Err(invalid("only \\` and \\\\ may be escaped")),
                            },
                            Some(other) => current.push(other),
                        }
                    }
                    quoted_segment = true;
                    if !matches!(chars.peek(), None | Some('.')) {
                        return Err(invalid("a quoted segment must be followed by '.' or the end"));
                    }
                }
                '.' => {
                    if current.is_empty() {
                        return Err(invalid("it has an empty segment"));
                    }
                    segments.push(std::mem::take(&mut current));
                    quoted_segment = false;
                }
                '`' => return Err(invalid("a backtick may only start a segment")),
                other if !is_simple_char(other, current.is_empty()) => {
                    return Err(invalid(
                        "a segment with characters other than letters, digits and _ must be quoted with backticks",
                    ))
                }
                other => current.push(other),
            }
        }
        if current.is_empty() {
            return Err(invalid("it has an empty segment"));
        }
        segments.push(current);
        Self::new(segments)
    }

    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// Whether this path is `__name__`, the document's own name.
    pub fn is_document_id(&self) -> bool {
        self.segments.len() == 1 && self.segments[0] == DOCUMENT_ID_FIELD
    }

    /// Whether `self` is `other` or a field inside it.
    pub fn starts_with(&self, other: &FieldPath) -> bool {
        self.segments.starts_with(&other.segments)
    }

    /// The path `self.segment`.
    pub fn child(&self, segment: &str) -> FieldPath {
        let mut segments = self.segments.clone();
        segments.push(segment.to_owned());
        FieldPath { segments }
    }

    /// A one-segment path (a top-level field).
    pub fn single(segment: &str) -> FieldPath {
        FieldPath {
            segments: vec![segment.to_owned()],
        }
    }
}

fn is_simple_char(c: char, first: bool) -> bool {
    c == '_' || c.is_ascii_alphabetic() || (!first && c.is_ascii_digit())
}

fn is_simple_segment(segment: &str) -> bool {
    let mut chars = segment.chars();
    chars.next().is_some_and(|c| is_simple_char(c, true)) && chars.all(|c| is_simple_char(c, false))
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            if is_simple_segment(segment) {
                f.write_str(segment)?;
            } else {
                f.write_str("`")?;
                for c in segment.chars() {
                    if c == '`' || c == '\\' {
                        f.write_str("\\")?;
                    }
                    write!(f, "{c}")?;
                }
                f.write_str("`")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_shares_the_segments_and_hashes_as_before() {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let path = ResourcePath::parse("rooms/a/messages/m1").unwrap();
        let copy = path.clone();
        assert!(Arc::ptr_eq(&path.segments, &copy.segments));
        assert_eq!(path, copy);
        // The sidecar's write partitions hash names with `DefaultHasher`: the shared
        // segments hash exactly as the `Vec<String>` they were before, so processes of
        // either representation place a document in the same partition.
        let hash = |h: &dyn Fn(&mut DefaultHasher)| {
            let mut hasher = DefaultHasher::new();
            h(&mut hasher);
            hasher.finish()
        };
        let segments: Vec<String> = path.segments().to_vec();
        assert_eq!(hash(&|h| path.hash(h)), hash(&|h| segments.hash(h)));
        assert_eq!(path.parent().unwrap().to_string(), "rooms/a/messages");
        assert_eq!(
            path.child("c").unwrap().to_string(),
            "rooms/a/messages/m1/c"
        );
        assert!(ResourcePath::parse("a/b").unwrap() < ResourcePath::parse("a/c").unwrap());
    }

    #[test]
    fn database_ids() {
        assert!(is_valid_database_id("(default)"));
        assert!(is_valid_database_id("abcd"));
        assert!(is_valid_database_id("a-b-1"));
        assert!(!is_valid_database_id("abc"));
        assert!(!is_valid_database_id("1abc"));
        assert!(!is_valid_database_id("abcD"));
        assert!(!is_valid_database_id(&"a".repeat(64)));
    }

    #[test]
    fn document_and_collection_paths() {
        let doc = ResourcePath::parse_document("/restaurants/one").unwrap();
        assert_eq!(doc.to_string(), "restaurants/one");
        assert_eq!(doc.parent().unwrap().to_string(), "restaurants");
        assert!(ResourcePath::parse_collection("restaurants/one/ratings").is_ok());
        assert!(matches!(
            ResourcePath::parse_document("restaurants"),
            Err(PathError::NotADocument { .. })
        ));
        assert!(matches!(
            ResourcePath::parse_collection("a/b"),
            Err(PathError::NotACollection { .. })
        ));
        assert!(matches!(
            ResourcePath::parse("a//b"),
            Err(PathError::EmptySegment { .. })
        ));
        assert!(matches!(
            ResourcePath::parse("a/"),
            Err(PathError::EmptySegment { .. })
        ));
        assert!(matches!(
            ResourcePath::parse(""),
            Err(PathError::Empty { .. })
        ));
        assert!(matches!(
            ResourcePath::parse("a/__x__"),
            Err(PathError::ReservedSegment { .. })
        ));
        assert!(matches!(
            ResourcePath::parse("a/.."),
            Err(PathError::ReservedSegment { .. })
        ));
        assert!(ResourcePath::parse("a/__").is_ok());
        // Firestore's numeric ids: document ids only, canonical i64 only.
        assert!(ResourcePath::parse("a/__id-9223372036854775808__").is_ok());
        assert!(ResourcePath::parse("a/__id7__/b/__id-1__").is_ok());
        for reserved in ["__id7__/b", "a/__id7__/__id8__", "a/__id07__", "a/__id__"] {
            assert!(
                matches!(
                    ResourcePath::parse(reserved),
                    Err(PathError::ReservedSegment { .. })
                ),
                "{reserved}"
            );
        }
        assert!(matches!(
            ResourcePath::parse("a/xserde_json::private::Numbery"),
            Err(PathError::ReservedMention { .. })
        ));
        assert!(matches!(
            ResourcePath::parse("serde_json::private::Number/b"),
            Err(PathError::ReservedMention { .. })
        ));
        assert!(ResourcePath::parse("serde_json/private").is_ok());
        assert!(matches!(
            ResourcePath::from_segments(vec!["a".into(), "b/c".into()]),
            Err(PathError::SlashInSegment { .. })
        ));
        assert!(matches!(
            ResourcePath::parse("a/b\0"),
            Err(PathError::NulCharacter)
        ));
        let long = "x".repeat(1501);
        assert!(matches!(
            ResourcePath::parse(&format!("a/{long}")),
            Err(PathError::SegmentTooLong { .. })
        ));
        let deep = vec!["c/d"; 100].join("/");
        assert!(ResourcePath::parse(&deep).is_ok());
        assert!(matches!(
            ResourcePath::parse(&format!("{deep}/c")),
            Err(PathError::TooDeep { .. })
        ));
    }

    #[test]
    fn field_paths_round_trip() {
        for text in [
            "a", "a.b.c", "`a.b`.c", "`x y`", "`a\\`b`", "`a\\\\b`", "_x1", "`1a`", "__name__",
        ] {
            let path = FieldPath::parse(text).unwrap();
            assert_eq!(path.to_string(), text, "{text}");
            assert_eq!(FieldPath::parse(&path.to_string()).unwrap(), path);
        }
        assert_eq!(
            FieldPath::parse("`a.b`.c").unwrap().segments(),
            ["a.b", "c"]
        );
        for bad in [
            "", "a..b", ".a", "a.", "`a", "a b", "1a", "`a`b", "a`b`", "`a\\n`",
        ] {
            assert!(FieldPath::parse(bad).is_err(), "{bad}");
        }
    }
}
