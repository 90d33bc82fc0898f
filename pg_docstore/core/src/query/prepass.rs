//! The pre-pass of the text dialect: it finds the `from` clause and reads its collection path
//! (`/restaurants/one/ratings`), collection group (`group(ratings)`, `/restaurants/one/group(ratings)`)
//! before sqlparser's tokenizer sees the text, since IDs may hold characters SQL would not
//! accept. The clause is then blanked out (each character becomes a space, newlines stay), so
//! every line and column sqlparser reports is still a position in the original text.
//!
//! Path syntax: an optional leading `/`, then segments separated by `/`. A segment is a run of
//! characters other than whitespace, control characters and ``/ ` ( ) , ; ' "``, or any text
//! in backticks (a backtick inside is doubled). An unquoted `group` followed by `(` starts a
//! collection group; it must come last.

use crate::path::ResourcePath;

use super::ast::Source;
use super::error::QueryError;

/// The query text with its character and line starts, to turn byte offsets into lines and
/// columns and back in constant or logarithmic time (tokens are located one by one).
pub(crate) struct SourceText<'a> {
    pub text: &'a str,
    /// Byte offset of every character, then the length of the text.
    char_starts: Vec<usize>,
    /// Character index of the first character of every line.
    line_starts: Vec<usize>,
}

impl<'a> SourceText<'a> {
    pub fn new(text: &'a str) -> SourceText<'a> {
        let mut char_starts = Vec::with_capacity(text.len() + 1);
        let mut line_starts = vec![0];
        for (index, (byte, c)) in text.char_indices().enumerate() {
            char_starts.push(byte);
            if c == '\n' {
                line_starts.push(index + 1);
            }
        }
        char_starts.push(text.len());
        SourceText {
            text,
            char_starts,
            line_starts,
        }
    }

    /// Line and column (from 1, columns in characters) of a byte offset.
    pub fn location(&self, offset: usize) -> (u64, u64) {
        let index = self.char_starts.partition_point(|&b| b < offset);
        let line = self.line_starts.partition_point(|&start| start <= index);
        let start = self
            .line_starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        (line as u64, (index - start) as u64 + 1)
    }

    /// Byte offset of a line and column (from 1, columns in characters); the end of the text
    /// when out of range.
    pub fn offset(&self, line: u64, column: u64) -> usize {
        let line_start = usize::try_from(line)
            .ok()
            .and_then(|l| l.checked_sub(1))
            .and_then(|l| self.line_starts.get(l));
        let column = usize::try_from(column.saturating_sub(1)).ok();
        match (line_start, column) {
            (Some(start), Some(column)) => start
                .checked_add(column)
                .and_then(|index| self.char_starts.get(index))
                .copied()
                .unwrap_or(self.text.len()),
            _ => self.text.len(),
        }
    }

    /// A syntax error at a byte offset.
    pub fn error_at(&self, offset: usize, message: impl Into<String>) -> QueryError {
        let (line, column) = self.location(offset);
        QueryError::Syntax {
            message: message.into(),
            line,
            column,
            offset,
        }
    }
}

/// The `from` clause found by the pre-pass.
#[derive(Debug, Clone)]
pub(crate) struct FromClause {
    /// Byte offset of the `from` keyword.
    pub keyword_offset: usize,
    pub source: Source,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_part(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `c` may appear in an unquoted path segment.
pub(crate) fn is_plain_segment_char(c: char) -> bool {
    !(c.is_whitespace()
        || c.is_control()
        || matches!(c, '/' | '`' | '(' | ')' | ',' | ';' | '\'' | '"'))
}

struct Scanner<'s> {
    chars: Vec<(usize, char)>,
    src: &'s SourceText<'s>,
}

impl Scanner<'_> {
    fn at(&self, i: usize) -> Option<char> {
        self.chars.get(i).map(|&(_, c)| c)
    }

    fn byte(&self, i: usize) -> usize {
        self.chars.get(i).map_or(self.src.text.len(), |&(b, _)| b)
    }

    /// Index of the first top-level `from` word (outside strings, quoted names, comments).
    fn find_from(&self) -> Option<(usize, usize)> {
        let n = self.chars.len();
        let mut i = 0;
        while i < n {
            let c = self.chars[i].1;
            match c {
                '\'' | '"' => i = self.skip_quoted(i, c, true),
                '`' => i = self.skip_quoted(i, '`', false),
                '-' if self.at(i + 1) == Some('-') => {
                    while i < n && self.chars[i].1 != '\n' {
                        i += 1;
                    }
                }
                '/' if self.at(i + 1) == Some('*') => {
                    i += 2;
                    while i < n && !(self.chars[i].1 == '*' && self.at(i + 1) == Some('/')) {
                        i += 1;
                    }
                    i += 2;
                }
                c if is_ident_start(c) => {
                    let start = i;
                    while i < n && is_ident_part(self.chars[i].1) {
                        i += 1;
                    }
                    let word: String = self.chars[start..i].iter().map(|&(_, c)| c).collect();
                    if word.eq_ignore_ascii_case("from") {
                        return Some((start, i));
                    }
                }
                c if c.is_ascii_digit() => {
                    while i < n && (self.chars[i].1.is_ascii_digit() || self.chars[i].1 == '.') {
                        i += 1;
                    }
                }
                _ => i += 1,
            }
        }
        None
    }

    /// The index after a quoted string or name starting at `i` (as sqlparser reads it: a
    /// doubled quote is an escape, and in strings so is a backslash).
    fn skip_quoted(&self, mut i: usize, quote: char, backslash: bool) -> usize {
        i += 1;
        while let Some(c) = self.at(i) {
            if backslash && c == '\\' {
                i += 2;
            } else if c == quote {
                if self.at(i + 1) == Some(quote) {
                    i += 2;
                } else {
                    return i + 1;
                }
            } else {
                i += 1;
            }
        }
        self.chars.len()
    }

    fn skip_whitespace(&self, mut i: usize) -> usize {
        while self.at(i).is_some_and(char::is_whitespace) {
            i += 1;
        }
        i
    }

    /// One path segment at `i`: `(text, quoted, next index)`.
    fn segment(&self, i: usize) -> Result<(String, bool, usize), QueryError> {
        if self.at(i) == Some('`') {
            let mut out = String::new();
            let mut j = i + 1;
            loop {
                match self.at(j) {
                    None => {
                        return Err(self.src.error_at(
                            self.byte(i),
                            "a backtick in the collection path is not closed",
                        ))
                    }
                    Some('`') if self.at(j + 1) == Some('`') => {
                        out.push('`');
                        j += 2;
                    }
                    Some('`') => break,
                    Some(c) => {
                        out.push(c);
                        j += 1;
                    }
                }
            }
            if out.is_empty() {
                return Err(self
                    .src
                    .error_at(self.byte(i), "a collection path has an empty segment"));
            }
            return Ok((out, true, j + 1));
        }
        let mut j = i;
        while self.at(j).is_some_and(is_plain_segment_char) {
            j += 1;
        }
        let text: String = self.chars[i..j].iter().map(|&(_, c)| c).collect();
        if text.is_empty() {
            let message = match self.at(j) {
                None => "expected a collection path or group(...) after from".to_owned(),
                Some(c) => format!(
                    "expected a collection path segment, found '{c}' (quote IDs with special characters in backticks)"
                ),
            };
            return Err(self.src.error_at(self.byte(j), message));
        }
        Ok((text, false, j))
    }
}

/// Find and read the `from` clause; return the text with the clause blanked out.
///
/// # Errors
/// A malformed path (syntax, with its position) or one that names no collection.
pub(crate) fn prepass(src: &SourceText<'_>) -> Result<(String, Option<FromClause>), QueryError> {
    let scanner = Scanner {
        chars: src.text.char_indices().collect(),
        src,
    };
    let Some((keyword, after_keyword)) = scanner.find_from() else {
        return Ok((src.text.to_owned(), None));
    };
    let path_start = scanner.skip_whitespace(after_keyword);
    let mut i = path_start;
    if scanner.at(i) == Some('/') {
        i += 1;
    }
    let mut segments = Vec::new();
    let mut group = None;
    loop {
        let (text, quoted, next) = scanner.segment(i)?;
        i = next;
        if !quoted && text.eq_ignore_ascii_case("group") {
            let open = scanner.skip_whitespace(i);
            if scanner.at(open) == Some('(') {
                let (id, _, after_id) = scanner.segment(scanner.skip_whitespace(open + 1))?;
                let close = scanner.skip_whitespace(after_id);
                if scanner.at(close) != Some(')') {
                    return Err(src.error_at(
                        scanner.byte(close),
                        "expected ')' after the collection group name",
                    ));
                }
                group = Some(id);
                i = close + 1;
                break;
            }
        }
        segments.push(text);
        if scanner.at(i) == Some('/') {
            i += 1;
        } else {
            break;
        }
    }
    let (start_byte, end_byte) = (scanner.byte(path_start), scanner.byte(i));
    let shown = src.text.get(start_byte..end_byte).unwrap_or_default();
    let source = build_source(shown, segments, group)?;
    let blanked = src
        .text
        .char_indices()
        .map(|(b, c)| {
            if (start_byte..end_byte).contains(&b) && c != '\n' {
                ' '
            } else {
                c
            }
        })
        .collect();
    Ok((
        blanked,
        Some(FromClause {
            keyword_offset: scanner.byte(keyword),
            source,
        }),
    ))
}

fn build_source(
    shown: &str,
    segments: Vec<String>,
    group: Option<String>,
) -> Result<Source, QueryError> {
    let invalid = |reason: String| QueryError::InvalidCollection {
        path: shown.to_owned(),
        reason,
    };
    match group {
        Some(id) => {
            if segments.len() % 2 == 1 {
                return Err(invalid(
                    "group(...) follows a document path (an even number of segments), e.g. /restaurants/one/group(ratings)".into(),
                ));
            }
            let parent = if segments.is_empty() {
                None
            } else {
                Some(ResourcePath::from_segments(segments).map_err(|e| invalid(e.to_string()))?)
            };
            Ok(Source::group(parent, &id))
        }
        None => {
            let path = ResourcePath::from_segments(segments).map_err(|e| invalid(e.to_string()))?;
            Source::collection(&path).ok_or_else(|| {
                invalid("this is a document path; from needs a collection path (an odd number of segments) or group(...)".into())
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_and_offsets_agree() {
        let text = "ab\nçd\n\nx😀y";
        let src = SourceText::new(text);
        for (offset, _) in text.char_indices() {
            let (line, column) = src.location(offset);
            assert_eq!(src.offset(line, column), offset, "{offset}");
        }
        assert_eq!(src.location(0), (1, 1));
        assert_eq!(src.location(3), (2, 1));
        assert_eq!(src.location(5), (2, 2));
        assert_eq!(src.location(8), (4, 1));
        assert_eq!(src.location(13), (4, 3));
        assert_eq!(src.location(text.len()), (4, 4));
        assert_eq!(src.offset(9, 1), text.len());
        assert_eq!(src.offset(1, 99), text.len());
    }

    #[test]
    fn from_clause_is_found_and_blanked() {
        let text = "select `from`, 'from' -- from\n FROM /a/`b c`/ü where x = 'from'";
        let src = SourceText::new(text);
        let (blanked, from) = prepass(&src).unwrap();
        let from = from.unwrap();
        assert_eq!(&text[from.keyword_offset..from.keyword_offset + 4], "FROM");
        assert_eq!(
            from.source,
            Source::collection(
                &ResourcePath::from_segments(vec!["a".into(), "b c".into(), "ü".into()]).unwrap()
            )
            .unwrap()
        );
        assert_eq!(blanked.chars().count(), text.chars().count());
        assert!(blanked.contains("FROM            where"), "{blanked}");
        let (_, none) = prepass(&SourceText::new("select 'from' /* from */")).unwrap();
        assert!(none.is_none());
    }

    #[test]
    fn groups() {
        let group = |text: &str| {
            prepass(&SourceText::new(text))
                .map(|(_, from)| from.map(|f| f.source))
                .unwrap()
        };
        assert_eq!(
            group("select * from group(`a)b`)"),
            Some(Source::group(None, "a)b"))
        );
        assert_eq!(
            group("select * from a/b/group (c)"),
            Some(Source::group(
                Some(ResourcePath::parse("a/b").unwrap()),
                "c"
            ))
        );
        assert!(prepass(&SourceText::new("select * from a/group(c)")).is_err());
        assert!(prepass(&SourceText::new("select * from group(c")).is_err());
    }
}
