//! Path patterns: the `match` paths of security rules (`/databases/{database}/documents/users/
//! {uid}/{rest=**}`) and the document patterns of write triggers
//! (`restaurants/{id}/ratings/{rating}`, docs/triggers.md). One splitter and one matcher for
//! both: the rules compiler binds the wildcards to its own values, triggers to strings.
//!
//! A segment is a literal, a wildcard `{name}` (or `{name=*}`) matching one segment, or a
//! recursive wildcard `{name=**}` matching several.

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

use crate::error::ErrorKind;

/// A pattern split into its segments: owned (`S = String`) when it is kept (a compiled rule, a
/// trigger), or borrowed from the text when it is matched once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern<S = String> {
    /// The segments before the `{x=**}` (all of them when there is none).
    head: Vec<Segment<S>>,
    /// The name of the `{x=**}`, if any.
    recursive: Option<S>,
    /// The segments after the `{x=**}`: they match the end of the path.
    tail: Vec<Segment<S>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment<S> {
    Literal(S),
    /// `{name}` or `{name=*}`.
    Wildcard(S),
}

/// What a wildcard bound on a path: one segment, or the segments a `{x=**}` covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound<'p, P> {
    Segment(&'p P),
    Segments(&'p [P]),
}

/// Why a trigger's pattern was refused ([`PathPattern::parse_document`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PatternError {
    #[error("pattern \"{pattern}\" is empty")]
    Empty { pattern: String },
    #[error("pattern \"{pattern}\" has an empty segment")]
    EmptySegment { pattern: String },
    #[error("segment \"{segment}\" of pattern \"{pattern}\" is not a literal, {{name}} or {{name=**}}: a wildcard's name is a letter or _ followed by letters, digits or _, and a literal has no braces")]
    BadWildcard { pattern: String, segment: String },
    #[error("segment \"{segment}\" of pattern \"{pattern}\" is reserved (\".\", \"..\" and names matching __.*__ are not allowed)")]
    ReservedSegment { pattern: String, segment: String },
    #[error("pattern \"{pattern}\" has {{{name}=**}} before its last segment: a recursive wildcard must be last")]
    RecursiveNotLast { pattern: String, name: String },
    #[error("pattern \"{pattern}\" names the wildcard {{{name}}} twice")]
    DuplicateName { pattern: String, name: String },
    #[error("pattern \"{pattern}\" does not name documents: without {{x=**}} a document pattern has an even number of segments (collection/document pairs)")]
    NotADocument { pattern: String },
}

impl PatternError {
    /// The kind of failure: every pattern error is [`ErrorKind::InvalidArgument`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidArgument
    }
}

impl<'a> PathPattern<&'a str> {
    /// Split `pattern` (a leading `/` optional) without checking it, as the rules compiler
    /// does after its checker has. At most one `{x=**}` is read; a later one would be taken as
    /// a one-segment wildcard.
    pub fn borrowed(pattern: &'a str) -> PathPattern<&'a str> {
        let mut head = Vec::new();
        let mut recursive = None;
        let mut tail = Vec::new();
        for seg in pattern.strip_prefix('/').unwrap_or(pattern).split('/') {
            if recursive.is_none() && seg.ends_with("=**}") {
                let name = seg.strip_prefix('{').and_then(|s| s.strip_suffix("=**}"));
                recursive = Some(name.unwrap_or(""));
                continue;
            }
            let seg = match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => Segment::Wildcard(name.strip_suffix("=*").unwrap_or(name)),
                None => Segment::Literal(seg),
            };
            if recursive.is_some() {
                tail.push(seg);
            } else {
                head.push(seg);
            }
        }
        PathPattern {
            head,
            recursive,
            tail,
        }
    }

    fn to_owned_pattern(&self) -> PathPattern {
        let owned = |seg: &Segment<&str>| match seg {
            Segment::Literal(s) => Segment::Literal((*s).to_owned()),
            Segment::Wildcard(s) => Segment::Wildcard((*s).to_owned()),
        };
        PathPattern {
            head: self.head.iter().map(owned).collect(),
            recursive: self.recursive.map(str::to_owned),
            tail: self.tail.iter().map(owned).collect(),
        }
    }
}

fn is_wildcard_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl PathPattern {
    /// Split `pattern` into owned segments, unchecked (see [`PathPattern::borrowed`]).
    pub fn parse(pattern: &str) -> PathPattern {
        PathPattern::borrowed(pattern).to_owned_pattern()
    }

    /// Parse and check a document pattern, as a write trigger takes it (docs/triggers.md): a
    /// leading `/` optional; segments non-empty, literals not reserved and without braces,
    /// wildcards `{name}` / `{name=*}` / `{name=**}` with distinct names, a `{name=**}` only
    /// last; without one, an even number of segments.
    ///
    /// # Errors
    /// [`PatternError`], each naming the pattern and the offending segment or name.
    pub fn parse_document(pattern: &str) -> Result<PathPattern, PatternError> {
        let owned = || pattern.to_owned();
        let body = pattern.strip_prefix('/').unwrap_or(pattern);
        if body.is_empty() {
            return Err(PatternError::Empty { pattern: owned() });
        }
        let segments: Vec<&str> = body.split('/').collect();
        let mut names = BTreeSet::new();
        for (i, seg) in segments.iter().enumerate() {
            if seg.is_empty() {
                return Err(PatternError::EmptySegment { pattern: owned() });
            }
            let bad = || PatternError::BadWildcard {
                pattern: owned(),
                segment: (*seg).to_owned(),
            };
            let Some(inner) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
                if seg.contains(['{', '}']) {
                    return Err(bad());
                }
                if crate::path::is_reserved_name(seg) {
                    return Err(PatternError::ReservedSegment {
                        pattern: owned(),
                        segment: (*seg).to_owned(),
                    });
                }
                continue;
            };
            let (name, recursive) = match inner.split_once('=') {
                None => (inner, false),
                Some((name, "*")) => (name, false),
                Some((name, "**")) => (name, true),
                Some(_) => return Err(bad()),
            };
            if !is_wildcard_name(name) {
                return Err(bad());
            }
            if recursive && i + 1 != segments.len() {
                return Err(PatternError::RecursiveNotLast {
                    pattern: owned(),
                    name: name.to_owned(),
                });
            }
            if !names.insert(name) {
                return Err(PatternError::DuplicateName {
                    pattern: owned(),
                    name: name.to_owned(),
                });
            }
        }
        let parsed = PathPattern::borrowed(pattern);
        if parsed.recursive.is_none() && parsed.head.len() % 2 != 0 {
            return Err(PatternError::NotADocument { pattern: owned() });
        }
        Ok(parsed.to_owned_pattern())
    }
}

impl<S: AsRef<str>> PathPattern<S> {
    /// The wildcards' bindings on `path` (its segments), in pattern order, or `None` when it
    /// does not match. A `{x=**}` covers at least `min_recursive` segments (rules version 1
    /// and triggers: 1; rules version 2: 0).
    pub fn bind<'p, P: AsRef<str>>(
        &self,
        min_recursive: usize,
        path: &'p [P],
    ) -> Option<Vec<(&str, Bound<'p, P>)>> {
        let recursive = self.recursive.is_some();
        if !recursive && self.head.len() != path.len() {
            return None;
        }
        let min = self.head.len() + self.tail.len() + if recursive { min_recursive } else { 0 };
        if path.len() < min {
            return None;
        }
        let tail_start = path.len() - self.tail.len();
        let mut bound = Vec::new();
        for (seg, value) in self
            .head
            .iter()
            .zip(path)
            .chain(self.tail.iter().zip(path.get(tail_start..)?))
        {
            match seg {
                Segment::Wildcard(name) => bound.push((name.as_ref(), Bound::Segment(value))),
                Segment::Literal(literal) if literal.as_ref() == value.as_ref() => {}
                Segment::Literal(_) => return None,
            }
        }
        if let Some(name) = &self.recursive {
            let segments = path.get(self.head.len()..tail_start)?;
            bound.push((name.as_ref(), Bound::Segments(segments)));
        }
        Some(bound)
    }

    /// A trigger's match of a document path (its segments): the wildcards' values (`params`,
    /// a `{x=**}`'s the segments it covered, at least one, joined by `/`), or `None` when the
    /// path does not match or is not a document's (an odd number of segments).
    pub fn params<P: AsRef<str>>(&self, path: &[P]) -> Option<BTreeMap<String, String>> {
        if path.is_empty() || path.len() % 2 != 0 {
            return None;
        }
        let bound = self.bind(1, path)?;
        Some(
            bound
                .into_iter()
                .map(|(name, value)| {
                    let value = match value {
                        Bound::Segment(s) => s.as_ref().to_owned(),
                        Bound::Segments(s) => {
                            s.iter().map(AsRef::as_ref).collect::<Vec<_>>().join("/")
                        }
                    };
                    (name.to_owned(), value)
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests;
