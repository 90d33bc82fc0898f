//! The parser: tokens to a syntax tree ([`ast::File`]) with spans.
//!
//! Declarations by recursive descent (`rules_version`, `service`, `match`, `allow`,
//! `function` with `let` and `return`); expressions by a Pratt parser ([`expr`]).

pub mod ast;
pub mod expr;

use ast::{Allow, Block, File, Function, Match, Method, Segment, SegmentKind, Service, Version};

use crate::error::{CompileError, Span};
use crate::lex::{tokenize, Tok, Token};

/// How deep `match` blocks may nest (Firebase's own limit on nesting is far above real
/// rulesets; this bounds the parser's recursion).
pub const MAX_MATCH_DEPTH: usize = 32;

pub(crate) struct Parser<'s> {
    source: &'s str,
    tokens: Vec<Token>,
    pos: usize,
    nesting: usize,
}

/// Parse a ruleset.
///
/// # Errors
/// [`CompileError`] (syntax) at the first token that does not fit the grammar.
pub fn parse(source: &str) -> Result<File, CompileError> {
    let tokens = tokenize(source)?;
    let mut p = Parser {
        source,
        tokens,
        pos: 0,
        nesting: 0,
    };
    p.file()
}

impl<'s> Parser<'s> {
    fn peek(&self) -> &Token {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> &Token {
        let i = (self.pos + n).min(self.tokens.len().saturating_sub(1));
        &self.tokens[i]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn prev_span(&self) -> Span {
        self.tokens[self.pos.saturating_sub(1)].span
    }

    fn syntax(&self, span: Span, message: impl Into<String>) -> CompileError {
        CompileError::syntax(self.source, span, message)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        if matches!(&self.peek().tok, Tok::Punct(q) if *q == p) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_punct(&mut self, p: &str) -> Result<(), CompileError> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            let t = self.peek();
            Err(self.syntax(t.span, format!("expected '{p}'{}", found(&t.tok))))
        }
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(x) if x == w)
    }

    fn eat_word(&mut self, w: &str) -> bool {
        if self.is_word(w) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_word(&mut self, w: &str) -> Result<(), CompileError> {
        if self.eat_word(w) {
            Ok(())
        } else {
            let t = self.peek();
            Err(self.syntax(t.span, format!("expected '{w}'{}", found(&t.tok))))
        }
    }

    fn ident(&mut self) -> Result<(String, Span), CompileError> {
        match &self.peek().tok {
            Tok::Ident(w) => {
                let w = w.clone();
                let t = self.bump();
                Ok((w, t.span))
            }
            other => {
                let msg = format!("expected a name{}", found(other));
                Err(self.syntax(self.peek().span, msg))
            }
        }
    }

    fn file(&mut self) -> Result<File, CompileError> {
        let mut version = Version::V1;
        let mut version_span = None;
        if self.is_word("rules_version") {
            let start = self.bump().span;
            self.expect_punct("=")?;
            let t = self.bump();
            version = match &t.tok {
                Tok::Str(v) if v == "1" => Version::V1,
                Tok::Str(v) if v == "2" => Version::V2,
                _ => {
                    return Err(
                        self.syntax(t.span, "rules_version must be '1' or '2' (a quoted string)")
                    )
                }
            };
            version_span = Some(start.to(t.span));
            self.eat_punct(";");
        }
        let mut functions = Vec::new();
        let mut services = Vec::new();
        loop {
            let t = self.peek().clone();
            match &t.tok {
                Tok::Eof => break,
                Tok::Ident(w) if w == "service" => {
                    self.bump();
                    let mut name = self.ident()?.0;
                    while self.eat_punct(".") {
                        name.push('.');
                        name.push_str(&self.ident()?.0);
                    }
                    self.expect_punct("{")?;
                    let body = self.block(0, "service")?;
                    services.push(Service {
                        name,
                        span: t.span.to(self.prev_span()),
                        body,
                    });
                }
                Tok::Ident(w) if w == "function" => functions.push(self.function()?),
                Tok::Ident(w) if w == "import" => {
                    return Err(CompileError::unimplemented(
                        self.source,
                        t.span,
                        "'import' is not supported",
                    ))
                }
                other => {
                    return Err(self.syntax(
                        t.span,
                        format!("expected 'service' or 'function'{}", found(other)),
                    ))
                }
            }
        }
        if services.is_empty() {
            return Err(self.syntax(self.peek().span, "no 'service' declaration"));
        }
        Ok(File {
            version,
            version_span,
            functions,
            services,
        })
    }

    /// The inside of `{ ... }`, the `{` already read; reads the `}`. The body of a `service`
    /// or a `match` (`owner`) must declare something: Firebase's grammar refuses an empty one
    /// ("The 'match' body must contain at least one declaration."), comments not counting.
    fn block(&mut self, depth: usize, owner: &str) -> Result<Block, CompileError> {
        if depth > MAX_MATCH_DEPTH {
            return Err(self.syntax(self.peek().span, "match blocks nested too deeply"));
        }
        let mut block = Block::default();
        loop {
            let t = self.peek().clone();
            match &t.tok {
                Tok::Punct("}") => {
                    self.bump();
                    if block.matches.is_empty()
                        && block.allows.is_empty()
                        && block.functions.is_empty()
                    {
                        return Err(self.syntax(
                            t.span,
                            format!("the '{owner}' body must contain at least one declaration"),
                        ));
                    }
                    return Ok(block);
                }
                Tok::Ident(w) if w == "match" => {
                    self.bump();
                    let path = self.match_path()?;
                    let span = t.span.to(self.prev_span());
                    self.expect_punct("{")?;
                    let body = self.block(depth + 1, "match")?;
                    block.matches.push(Match { path, span, body });
                }
                Tok::Ident(w) if w == "allow" => {
                    block.allows.push(self.allow()?);
                }
                Tok::Ident(w) if w == "function" => block.functions.push(self.function()?),
                other => {
                    return Err(self.syntax(
                        t.span,
                        format!(
                            "expected 'match', 'allow', 'function' or '}}'{}",
                            found(other)
                        ),
                    ))
                }
            }
        }
    }

    fn match_path(&mut self) -> Result<Vec<Segment>, CompileError> {
        let mut segments = Vec::new();
        loop {
            let t = self.peek().clone();
            match &t.tok {
                Tok::PathSegment(seg) => {
                    self.bump();
                    segments.push(Segment {
                        kind: SegmentKind::Literal(expr::url_decode(seg)),
                        span: t.span,
                    });
                }
                Tok::Punct("/") => {
                    self.bump();
                    self.expect_punct("{")?;
                    let (name, _) = self.ident()?;
                    let kind = if self.eat_punct("=") {
                        if self.eat_punct("**") {
                            SegmentKind::Recursive(name)
                        } else if self.eat_punct("*") {
                            SegmentKind::Single(name)
                        } else {
                            let n = self.peek().span;
                            return Err(self.syntax(n, "expected '*' or '**' after '='"));
                        }
                    } else {
                        SegmentKind::Single(name)
                    };
                    self.expect_punct("}")?;
                    segments.push(Segment {
                        kind,
                        span: t.span.to(self.prev_span()),
                    });
                }
                _ => break,
            }
        }
        if segments.is_empty() {
            let t = self.peek();
            return Err(self.syntax(t.span, format!("expected a path{}", found(&t.tok))));
        }
        Ok(segments)
    }

    fn allow(&mut self) -> Result<Allow, CompileError> {
        let start = self.bump().span;
        let mut methods = Vec::new();
        loop {
            let (name, span) = self.ident()?;
            match name.as_str() {
                "read" => methods.extend([Method::Get, Method::List]),
                "write" => methods.extend([Method::Create, Method::Update, Method::Delete]),
                _ => match Method::parse(&name) {
                    Some(m) => methods.push(m),
                    None => {
                        return Err(self.syntax(
                            span,
                            format!(
                                "unknown method '{name}' (expected read, write, get, list, create, update or delete)"
                            ),
                        ))
                    }
                },
            }
            if !self.eat_punct(",") {
                break;
            }
        }
        let condition = if self.eat_punct(":") {
            self.expect_word("if")?;
            Some(self.expr()?)
        } else {
            None
        };
        self.eat_punct(";");
        methods.sort();
        methods.dedup();
        Ok(Allow {
            methods,
            condition,
            span: start.to(self.prev_span()),
        })
    }

    fn function(&mut self) -> Result<Function, CompileError> {
        let start = self.bump().span;
        let (name, name_span) = self.ident()?;
        self.expect_punct("(")?;
        let mut params = Vec::new();
        if !self.eat_punct(")") {
            loop {
                params.push(self.ident()?);
                if self.eat_punct(")") {
                    break;
                }
                self.expect_punct(",")?;
            }
        }
        self.expect_punct("{")?;
        let mut lets = Vec::new();
        while self.eat_word("let") {
            let (n, s) = self.ident()?;
            self.expect_punct("=")?;
            let e = self.expr()?;
            self.expect_punct(";")?;
            lets.push((n, s, e));
        }
        self.expect_word("return")?;
        let body = self.expr()?;
        self.eat_punct(";");
        self.expect_punct("}")?;
        Ok(Function {
            name,
            name_span,
            params,
            lets,
            body,
            span: start.to(self.prev_span()),
        })
    }
}

fn found(tok: &Tok) -> String {
    match tok {
        Tok::Eof => ", found the end of the input".into(),
        Tok::Ident(w) => format!(", found '{w}'"),
        Tok::Punct(p) => format!(", found '{p}'"),
        Tok::PathSegment(s) => format!(", found '/{s}'"),
        Tok::Int(s) => format!(", found {s}"),
        Tok::Float(f) => format!(", found {f}"),
        Tok::Str(_) => ", found a string".into(),
        Tok::Bytes(_) => ", found bytes".into(),
    }
}

#[cfg(test)]
mod tests;
