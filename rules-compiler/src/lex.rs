//! The lexer: source text to tokens with spans.
//!
//! As in Firebase's own grammar, a `/` immediately followed by path characters is one path
//! segment token (`/databases`, `/(default)`, `/a%20b`); `a / b` with spaces is a division.
//! Strings are quoted with `'` or `"` with the escapes `\n \r \t \b \f \\ \' \"`, `\xHH`,
//! `\uHHHH` and octal `\NNN`; `b'..'` is a bytes literal. Numbers: `1`, `1.5`, `1.`, `.5`.
//! Comments: `//` to the end of the line and `/* .. */`.

use crate::error::{CompileError, Span};

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    Int(String),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    /// `/segment` (the text after the slash, not yet URL-decoded).
    PathSegment(String),
    Punct(&'static str),
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

const PUNCT: [&str; 31] = [
    "&&", "||", "==", "!=", "<=", ">=", "**", "(", ")", "{", "}", "[", "]", ".", ",", ";", ":",
    "?", "=", "!", "<", ">", "+", "-", "*", "/", "%", "$", "&", "|", "~",
];

/// Tokenize `source`.
///
/// # Errors
/// [`CompileError`] (syntax) for an unclosed string or comment, a bad escape, a character
/// that is not part of the language, or an integer literal out of range.
pub fn tokenize(source: &str) -> Result<Vec<Token>, CompileError> {
    let bytes = source.as_bytes();
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < bytes.len() {
        let c = bytes[pos];
        if c.is_ascii_whitespace() {
            pos += 1;
            continue;
        }
        let start = pos;
        if c == b'/' && bytes.get(pos + 1) == Some(&b'/') {
            pos = source[pos..].find('\n').map_or(bytes.len(), |i| pos + i);
            continue;
        }
        if c == b'/' && bytes.get(pos + 1) == Some(&b'*') {
            match source[pos + 2..].find("*/") {
                Some(i) => pos = pos + 2 + i + 2,
                None => {
                    return Err(CompileError::syntax(
                        source,
                        Span::new(start, start + 2),
                        "unclosed comment",
                    ))
                }
            }
            continue;
        }
        if c == b'/' {
            let len = segment_len(&bytes[pos + 1..]);
            if len > 0 {
                let text = source[pos + 1..pos + 1 + len].to_owned();
                pos += 1 + len;
                out.push(Token {
                    tok: Tok::PathSegment(text),
                    span: Span::new(start, pos),
                });
                continue;
            }
        }
        if c.is_ascii_digit() || (c == b'.' && bytes.get(pos + 1).is_some_and(u8::is_ascii_digit)) {
            let int = bytes[pos..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            let mut end = pos + int;
            // As Firebase's lexer: `1.` is a float even before a name (`1.size()` is an error).
            let float = bytes.get(end) == Some(&b'.');
            if float {
                end += 1;
                end += bytes[end..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                let text = &source[pos..end];
                let value: f64 = text.parse().map_err(|_| {
                    CompileError::syntax(source, Span::new(pos, end), "invalid number")
                })?;
                out.push(Token {
                    tok: Tok::Float(value),
                    span: Span::new(pos, end),
                });
            } else {
                out.push(Token {
                    tok: Tok::Int(source[pos..end].to_owned()),
                    span: Span::new(pos, end),
                });
            }
            pos = end;
            continue;
        }
        if (c == b'b' || c == b'B') && matches!(bytes.get(pos + 1), Some(b'\'' | b'"')) {
            let (text, end) = string(source, pos + 1)?;
            out.push(Token {
                tok: Tok::Bytes(text),
                span: Span::new(start, end),
            });
            pos = end;
            continue;
        }
        if c == b'\'' || c == b'"' {
            let (text, end) = string(source, pos)?;
            if text.contains(&0) {
                return Err(CompileError::unimplemented(
                    source,
                    Span::new(start, end),
                    "strings cannot hold U+0000 in pg_docstore (Postgres text cannot)",
                ));
            }
            let text = String::from_utf8(text).map_err(|_| {
                CompileError::syntax(source, Span::new(start, end), "string is not valid UTF-8")
            })?;
            out.push(Token {
                tok: Tok::Str(text),
                span: Span::new(start, end),
            });
            pos = end;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let len = bytes[pos..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
            out.push(Token {
                tok: Tok::Ident(source[pos..pos + len].to_owned()),
                span: Span::new(pos, pos + len),
            });
            pos += len;
            continue;
        }
        match PUNCT.iter().find(|p| source[pos..].starts_with(**p)) {
            Some(p) => {
                out.push(Token {
                    tok: Tok::Punct(p),
                    span: Span::new(pos, pos + p.len()),
                });
                pos += p.len();
            }
            None => {
                let ch_len = source[pos..].chars().next().map_or(1, char::len_utf8);
                return Err(CompileError::syntax(
                    source,
                    Span::new(pos, pos + ch_len),
                    "unexpected character",
                ));
            }
        }
    }
    out.push(Token {
        tok: Tok::Eof,
        span: Span::new(bytes.len(), bytes.len()),
    });
    Ok(out)
}

/// Length of a path segment after a `/`: path characters, `%XX` escapes, or `(chars)`.
fn segment_len(bytes: &[u8]) -> usize {
    if bytes.first() == Some(&b'(') {
        let inner = segment_chars(&bytes[1..]);
        if inner > 0 && bytes.get(1 + inner) == Some(&b')') {
            return inner + 2;
        }
        return 0;
    }
    segment_chars(bytes)
}

fn segment_chars(bytes: &[u8]) -> usize {
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphanumeric() || b"-._~&'*+:@".contains(&c) {
            // `/**` is not a segment start when it is `/*` (a comment is handled earlier).
            i += 1;
        } else if c == b'%'
            && bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
            && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
        {
            i += 3;
        } else {
            break;
        }
    }
    i
}

/// A quoted string starting at `bytes[at]` (the quote): its bytes and the end offset.
fn string(source: &str, at: usize) -> Result<(Vec<u8>, usize), CompileError> {
    let bytes = source.as_bytes();
    let quote = bytes[at];
    let mut out = Vec::new();
    let mut i = at + 1;
    let unclosed = || CompileError::syntax(source, Span::new(at, at + 1), "unclosed string");
    loop {
        match bytes.get(i) {
            None | Some(b'\n' | b'\r') => return Err(unclosed()),
            Some(&c) if c == quote => return Ok((out, i + 1)),
            Some(b'\\') => {
                let bad = || CompileError::syntax(source, Span::new(i, i + 2), "invalid escape");
                let e = *bytes.get(i + 1).ok_or_else(unclosed)?;
                let simple = match e {
                    b'n' => Some(b'\n'),
                    b'r' => Some(b'\r'),
                    b't' => Some(b'\t'),
                    b'b' => Some(8),
                    b'f' => Some(12),
                    b'\\' => Some(b'\\'),
                    b'\'' => Some(b'\''),
                    b'"' => Some(b'"'),
                    b'`' => Some(b'`'),
                    b'?' => Some(b'?'),
                    _ => None,
                };
                if let Some(s) = simple {
                    out.push(s);
                    i += 2;
                    continue;
                }
                let hex = |from: usize, n: usize| -> Option<u32> {
                    let t = source.get(from..from + n)?;
                    if t.bytes().all(|b| b.is_ascii_hexdigit()) {
                        u32::from_str_radix(t, 16).ok()
                    } else {
                        None
                    }
                };
                match e {
                    b'x' | b'X' => {
                        let v = hex(i + 2, 2).ok_or_else(bad)?;
                        out.push(u8::try_from(v).map_err(|_| bad())?);
                        i += 4;
                    }
                    b'u' => {
                        let v = hex(i + 2, 4).ok_or_else(bad)?;
                        let ch = char::from_u32(v).ok_or_else(bad)?;
                        let mut buf = [0; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        i += 6;
                    }
                    b'U' => {
                        let v = hex(i + 2, 8).ok_or_else(bad)?;
                        let ch = char::from_u32(v).ok_or_else(bad)?;
                        let mut buf = [0; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        i += 10;
                    }
                    b'0'..=b'3' => {
                        let t = source.get(i + 1..i + 4).ok_or_else(bad)?;
                        if !t.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                            return Err(bad());
                        }
                        let v = u32::from_str_radix(t, 8).map_err(|_| bad())?;
                        out.push(u8::try_from(v).map_err(|_| bad())?);
                        i += 4;
                    }
                    _ => return Err(bad()),
                }
            }
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Tok> {
        tokenize(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn path_segments_and_division() {
        assert_eq!(
            kinds("/databases/$(db)/(default)"),
            vec![
                Tok::PathSegment("databases".into()),
                Tok::Punct("/"),
                Tok::Punct("$"),
                Tok::Punct("("),
                Tok::Ident("db".into()),
                Tok::Punct(")"),
                Tok::PathSegment("(default)".into()),
                Tok::Eof
            ]
        );
        assert_eq!(kinds("4 / 2")[1], Tok::Punct("/"));
        assert_eq!(kinds("/a%20b")[0], Tok::PathSegment("a%20b".into()));
    }

    #[test]
    fn literals_and_comments() {
        assert_eq!(
            kinds("'a\\n' \"b\" b'\\x01' 1 1.5 .5 x // c\n/* d */ y"),
            vec![
                Tok::Str("a\n".into()),
                Tok::Str("b".into()),
                Tok::Bytes(vec![1]),
                Tok::Int("1".into()),
                Tok::Float(1.5),
                Tok::Float(0.5),
                Tok::Ident("x".into()),
                Tok::Ident("y".into()),
                Tok::Eof
            ]
        );
        assert_eq!(kinds("a.b")[1], Tok::Punct("."));
        assert_eq!(kinds("1.size")[0], Tok::Float(1.0));
    }

    #[test]
    fn errors_have_positions() {
        let e = tokenize("x == 'abc").unwrap_err();
        assert_eq!((e.line, e.column), (1, 6));
        assert!(tokenize("x # y").is_err());
        assert!(tokenize("'\\q'").is_err());
        assert!(tokenize("/* open").is_err());
    }
}
