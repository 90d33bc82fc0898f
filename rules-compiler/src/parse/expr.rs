//! Expressions: a Pratt parser.
//!
//! Binding powers, loosest first (Firebase's grammar): `?:` (right-associative), `||`, `&&`,
//! the relations `== != < <= > >= in is` (one level, left-associative), `+ -`, `* / %`, the
//! prefixes `! -`, then the postfixes `.name`, `.name(args)`, `[index]`, `[from:to]`, `(args)`.

use super::ast::{BinaryOp, Expr, ExprKind, PathPart, UnaryOp};
use super::Parser;
use crate::error::{CompileError, Span};
use crate::lex::Tok;

/// The deepest expression tree the parser builds (later stages recurse over it).
pub const MAX_EXPR_DEPTH: u32 = 100;

/// Type names `is` accepts.
pub const IS_TYPES: [&str; 15] = [
    "bool",
    "bytes",
    "constraint",
    "duration",
    "float",
    "int",
    "latlng",
    "list",
    "map",
    "map_diff",
    "number",
    "path",
    "set",
    "string",
    "timestamp",
];

fn infix(tok: &Tok) -> Option<(u8, BinaryOp)> {
    let Tok::Punct(p) = tok else {
        return match tok {
            Tok::Ident(w) if w == "in" => Some((4, BinaryOp::In)),
            _ => None,
        };
    };
    Some(match *p {
        "||" => (2, BinaryOp::Or),
        "&&" => (3, BinaryOp::And),
        "==" => (4, BinaryOp::Eq),
        "!=" => (4, BinaryOp::Ne),
        "<" => (4, BinaryOp::Lt),
        "<=" => (4, BinaryOp::Le),
        ">" => (4, BinaryOp::Gt),
        ">=" => (4, BinaryOp::Ge),
        "+" => (5, BinaryOp::Add),
        "-" => (5, BinaryOp::Sub),
        "*" => (6, BinaryOp::Mul),
        "/" => (6, BinaryOp::Div),
        "%" => (6, BinaryOp::Mod),
        _ => return None,
    })
}

impl Parser<'_> {
    /// A whole expression.
    pub(super) fn expr(&mut self) -> Result<Expr, CompileError> {
        self.nesting += 1;
        if self.nesting > MAX_EXPR_DEPTH as usize {
            let span = self.peek().span;
            return Err(self.syntax(span, "expression nested too deeply"));
        }
        let e = self.ternary();
        self.nesting -= 1;
        e
    }

    fn ternary(&mut self) -> Result<Expr, CompileError> {
        let cond = self.binary(0)?;
        if self.eat_punct("?") {
            let then = self.expr()?;
            self.expect_punct(":")?;
            let otherwise = self.expr()?;
            let span = cond.span.to(otherwise.span);
            return self.node(
                ExprKind::Ternary(Box::new(cond), Box::new(then), Box::new(otherwise)),
                span,
            );
        }
        Ok(cond)
    }

    fn node(&self, kind: ExprKind, span: Span) -> Result<Expr, CompileError> {
        let e = Expr::new(kind, span);
        if e.depth > MAX_EXPR_DEPTH {
            return Err(self.syntax(span, "expression too deep (more than 100 levels)"));
        }
        Ok(e)
    }

    fn binary(&mut self, min: u8) -> Result<Expr, CompileError> {
        let mut left = self.unary()?;
        loop {
            let tok = &self.peek().tok;
            if matches!(tok, Tok::Ident(w) if w == "is") && min < 4 {
                self.bump();
                let (name, span) = self.ident()?;
                if !IS_TYPES.contains(&name.as_str()) {
                    return Err(self.syntax(
                        span,
                        format!(
                            "unknown type '{name}' after 'is' (expected one of {})",
                            IS_TYPES.join(", ")
                        ),
                    ));
                }
                let whole = left.span.to(span);
                left = self.node(ExprKind::Is(Box::new(left), name), whole)?;
                continue;
            }
            let Some((bp, op)) = infix(tok) else {
                return Ok(left);
            };
            if bp <= min {
                return Ok(left);
            }
            self.bump();
            let right = self.binary(bp)?;
            let span = left.span.to(right.span);
            left = self.node(ExprKind::Binary(op, Box::new(left), Box::new(right)), span)?;
        }
    }

    fn unary(&mut self) -> Result<Expr, CompileError> {
        self.nesting += 1;
        if self.nesting > MAX_EXPR_DEPTH as usize {
            let span = self.peek().span;
            return Err(self.syntax(span, "expression nested too deeply"));
        }
        let e = self.prefixed();
        self.nesting -= 1;
        e
    }

    fn prefixed(&mut self) -> Result<Expr, CompileError> {
        let start = self.peek().span;
        if self.eat_punct("!") {
            let e = self.unary()?;
            let span = start.to(e.span);
            return self.node(ExprKind::Unary(UnaryOp::Not, Box::new(e)), span);
        }
        if self.eat_punct("-") {
            // -9223372036854775808 is a literal, not the negation of one out of range.
            if let Tok::Int(text) = &self.peek().tok {
                if text == "9223372036854775808" {
                    let t = self.bump();
                    let span = start.to(t.span);
                    let lit = self.node(ExprKind::Int(i64::MIN), span)?;
                    return self.postfix(lit);
                }
            }
            let e = self.unary()?;
            let span = start.to(e.span);
            return self.node(ExprKind::Unary(UnaryOp::Neg, Box::new(e)), span);
        }
        let p = self.primary()?;
        self.postfix(p)
    }

    fn postfix(&mut self, mut e: Expr) -> Result<Expr, CompileError> {
        loop {
            if self.eat_punct(".") {
                let (name, span) = self.ident()?;
                if self.eat_punct("(") {
                    let args = self.args(")")?;
                    let end = self.prev_span();
                    let whole = e.span.to(end);
                    e = self.node(ExprKind::Method(Box::new(e), name, args), whole)?;
                } else {
                    let whole = e.span.to(span);
                    e = self.node(ExprKind::Member(Box::new(e), name), whole)?;
                }
            } else if self.eat_punct("[") {
                let index = self.expr()?;
                if self.eat_punct(":") {
                    let to = self.expr()?;
                    self.expect_punct("]")?;
                    let whole = e.span.to(self.prev_span());
                    e = self.node(
                        ExprKind::Range(Box::new(e), Box::new(index), Box::new(to)),
                        whole,
                    )?;
                } else {
                    self.expect_punct("]")?;
                    let whole = e.span.to(self.prev_span());
                    e = self.node(ExprKind::Index(Box::new(e), Box::new(index)), whole)?;
                }
            } else {
                return Ok(e);
            }
        }
    }

    /// Comma-separated expressions up to `close` (a trailing comma is allowed).
    fn args(&mut self, close: &'static str) -> Result<Vec<Expr>, CompileError> {
        let mut args = Vec::new();
        loop {
            if self.eat_punct(close) {
                return Ok(args);
            }
            args.push(self.expr()?);
            if !self.eat_punct(",") {
                self.expect_punct(close)?;
                return Ok(args);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, CompileError> {
        let t = self.bump();
        let span = t.span;
        let kind = match t.tok {
            Tok::Int(text) => match text.parse::<i64>() {
                Ok(i) => ExprKind::Int(i),
                Err(_) => return Err(self.syntax(span, "integer literal out of range")),
            },
            Tok::Float(f) => ExprKind::Float(f),
            Tok::Str(s) => ExprKind::Str(s),
            Tok::Bytes(b) => ExprKind::Bytes(b),
            Tok::Ident(w) => match w.as_str() {
                "true" => ExprKind::Bool(true),
                "false" => ExprKind::Bool(false),
                "null" => ExprKind::Null,
                _ if self.eat_punct("(") => {
                    let args = self.args(")")?;
                    let whole = span.to(self.prev_span());
                    return self.node(ExprKind::Call(w, args), whole);
                }
                _ => ExprKind::Ident(w),
            },
            Tok::Punct("(") => {
                let e = self.expr()?;
                self.expect_punct(")")?;
                return Ok(e);
            }
            Tok::Punct("[") => {
                let items = self.args("]")?;
                let whole = span.to(self.prev_span());
                return self.node(ExprKind::List(items), whole);
            }
            Tok::Punct("{") => {
                let mut entries = Vec::new();
                loop {
                    if self.eat_punct("}") {
                        break;
                    }
                    let k = self.expr()?;
                    self.expect_punct(":")?;
                    let v = self.expr()?;
                    entries.push((k, v));
                    if !self.eat_punct(",") {
                        self.expect_punct("}")?;
                        break;
                    }
                }
                let whole = span.to(self.prev_span());
                return self.node(ExprKind::Map(entries), whole);
            }
            Tok::PathSegment(seg) => return self.path(Some(seg), span),
            Tok::Punct("/") => {
                // `/$(expr)` as the first part.
                self.pos -= 1;
                return self.path(None, span);
            }
            Tok::Eof => return Err(self.syntax(span, "unexpected end of input")),
            _ => return Err(self.syntax(span, "expected an expression")),
        };
        self.node(kind, span)
    }

    /// A path literal: `/segment` and `/$(expr)` parts.
    fn path(&mut self, first: Option<String>, start: Span) -> Result<Expr, CompileError> {
        let mut parts = Vec::new();
        if let Some(seg) = first {
            parts.push(PathPart::Segment(url_decode(&seg)));
        }
        loop {
            match &self.peek().tok {
                Tok::PathSegment(seg) => {
                    let seg = url_decode(seg);
                    self.bump();
                    parts.push(PathPart::Segment(seg));
                }
                Tok::Punct("/") if self.peek_at(1).tok == Tok::Punct("$") => {
                    self.bump();
                    self.bump();
                    self.expect_punct("(")?;
                    let e = self.expr()?;
                    self.expect_punct(")")?;
                    parts.push(PathPart::Expr(e));
                }
                // A '/' after a path continues it (Firebase's grammar: a segment or a binding
                // must follow), so a path is never the left side of a division.
                Tok::Punct("/") => {
                    let span = self.peek().span;
                    return Err(self.syntax(span, "expected a path segment or $(...) after '/'"));
                }
                _ => break,
            }
        }
        let whole = start.to(self.prev_span());
        self.node(ExprKind::Path(parts), whole)
    }
}

/// A path literal's segment: `%XX` escapes and `+` for a space (as Firebase reads them).
pub fn url_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let hex = |b: u8| char::from(b).to_digit(16);
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
