//! Compile errors: where (line:column and a source excerpt with a caret) and what kind
//! (syntax, 42601, or unsupported, 0A000). A ruleset that does not compile is refused whole:
//! no construct is ever dropped or weakened.

use std::fmt;

use docstore_core::ErrorKind;
use thiserror::Error;

/// A byte range of the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// Why a ruleset was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileErrorKind {
    /// Not the rules language, or a rule the language forbids (limits, names, arity).
    Syntax,
    /// The rules language has it, pg_docstore does not (yet).
    Unimplemented,
}

/// A ruleset that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}", self.render())]
pub struct CompileError {
    pub kind: CompileErrorKind,
    pub message: String,
    /// 1-based line and column (column in characters) of the span's start.
    pub line: usize,
    pub column: usize,
    /// The source line and a caret line under the span.
    pub excerpt: String,
}

impl CompileError {
    /// An error at `span` of `source`.
    pub fn at(
        kind: CompileErrorKind,
        source: &str,
        span: Span,
        message: impl Into<String>,
    ) -> Self {
        let start = span.start.min(source.len());
        let start = floor_char_boundary(source, start);
        let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[start..]
            .find('\n')
            .map_or(source.len(), |i| start + i);
        let line = source[..start].matches('\n').count() + 1;
        let column = source[line_start..start].chars().count() + 1;
        let text = source[line_start..line_end].trim_end_matches('\r');
        let end = span.end.clamp(start, line_end);
        let end = floor_char_boundary(source, end);
        let width = source[start..end].chars().count().max(1);
        let pad: String = source[line_start..start]
            .chars()
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let excerpt = format!("{text}\n{pad}{}", "^".repeat(width));
        CompileError {
            kind,
            message: message.into(),
            line,
            column,
            excerpt,
        }
    }

    /// A syntax error (42601).
    pub fn syntax(source: &str, span: Span, message: impl Into<String>) -> Self {
        Self::at(CompileErrorKind::Syntax, source, span, message)
    }

    /// An unsupported construct (0A000).
    pub fn unimplemented(source: &str, span: Span, message: impl Into<String>) -> Self {
        Self::at(CompileErrorKind::Unimplemented, source, span, message)
    }

    /// The canonical kind: [`ErrorKind::Syntax`] (42601) or [`ErrorKind::Unimplemented`]
    /// (0A000).
    pub fn error_kind(&self) -> ErrorKind {
        match self.kind {
            CompileErrorKind::Syntax => ErrorKind::Syntax,
            CompileErrorKind::Unimplemented => ErrorKind::Unimplemented,
        }
    }

    /// The SQLSTATE the extension raises.
    pub fn sqlstate(&self) -> &'static str {
        self.error_kind().sqlstate()
    }

    /// `line:column: message` (the first line of [`fmt::Display`]).
    pub fn headline(&self) -> String {
        format!("{}:{}: {}", self.line, self.column, self.message)
    }

    fn render(&self) -> String {
        format!("{}\n{}", self.headline(), self.excerpt)
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for CompileErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompileErrorKind::Syntax => "syntax error",
            CompileErrorKind::Unimplemented => "not supported",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_under_the_span() {
        let src = "service x {\n  allow read: if ok;\n}";
        let at = src.find("ok").unwrap_or(0);
        let e = CompileError::syntax(src, Span::new(at, at + 2), "unknown name");
        assert_eq!(e.line, 2);
        assert_eq!(e.column, 18);
        assert_eq!(e.excerpt, "  allow read: if ok;\n                 ^^");
        assert_eq!(e.sqlstate(), "42601");
        assert_eq!(
            e.to_string(),
            "2:18: unknown name\n  allow read: if ok;\n                 ^^"
        );
        let u = CompileError::unimplemented(src, Span::new(0, 0), "no");
        assert_eq!(u.sqlstate(), "0A000");
        assert_eq!(u.excerpt, "service x {\n^");
    }

    #[test]
    fn columns_count_characters() {
        let src = "'é' x";
        let e = CompileError::syntax(src, Span::new(5, 6), "m");
        assert_eq!(e.column, 5);
        assert_eq!(e.excerpt, "'é' x\n    ^");
    }
}
