//! The text dialect (the Firestore paper's notation), see `docs/query.md`:
//!
//! ```text
//! select * from /restaurants where city = "SF" and type = "BBQ" order by avgRating desc limit 10
//! select count(*), avg(rating) from /restaurants/one/ratings where rating >= 3
//! ```
//!
//! Stages: [`super::prepass`] reads and blanks the `from` clause; sqlparser's tokenizer (with
//! a small dialect: ASCII identifiers, backtick-quoted names, strings in single or double
//! quotes with backslash escapes) turns the rest into tokens with line/column positions; a
//! recursive-descent parser builds the [`Query`], which ends in [`Query::validate`].

use sqlparser::dialect::Dialect;
use sqlparser::tokenizer::{Token, Tokenizer, Word};

use crate::path::FieldPath;
use crate::typed_json;
use crate::value::{Timestamp, Value};

use super::ast::{
    AggregateFunction, Aggregation, Cursor, Direction, FieldOp, Filter, Limit, Order, Query,
    Selection, UnaryOp, MAX_LIMIT,
};
use super::error::QueryError;
use super::literal::{number, unescape};
use super::prepass::{prepass, FromClause, SourceText};

/// The tokenizer dialect of the query text.
#[derive(Debug)]
struct DocstoreDialect;

impl Dialect for DocstoreDialect {
    fn is_identifier_start(&self, ch: char) -> bool {
        ch.is_ascii_alphabetic() || ch == '_'
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        ch.is_ascii_alphanumeric() || ch == '_'
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        ch == '`'
    }

    fn supports_string_literal_backslash_escape(&self) -> bool {
        true
    }
}

/// Parse query text into a validated [`Query`].
///
/// # Errors
/// [`QueryError::Syntax`] (with line, column and byte offset) for text that does not parse;
/// otherwise the rule the query breaks (see [`Query::validate`]).
pub fn parse_query(text: &str) -> Result<Query> {
    let src = SourceText::new(text);
    let (blanked, from) = prepass(&src)?;
    let tokens = Tokenizer::new(&DocstoreDialect, &blanked)
        .with_unescape(false)
        .tokenize_with_location()
        .map_err(|e| {
            let offset = src.offset(e.location.line, e.location.column);
            src.error_at(offset, e.message)
        })?;
    let tokens = tokens
        .into_iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .map(|t| Tok {
            offset: src.offset(t.span.start.line, t.span.start.column),
            token: t.token,
        })
        .collect();
    let mut parser = Parser {
        src: &src,
        tokens,
        pos: 0,
        from,
        depth: 0,
    };
    parser.query()?.validate()
}

impl std::str::FromStr for Query {
    type Err = QueryError;

    fn from_str(text: &str) -> Result<Query> {
        parse_query(text)
    }
}

struct Tok {
    token: Token,
    /// Byte offset in the original text.
    offset: usize,
}

struct Parser<'s> {
    src: &'s SourceText<'s>,
    tokens: Vec<Tok>,
    pos: usize,
    from: Option<FromClause>,
    /// Nesting of parentheses, `not` and arrays, bounded by [`MAX_NESTING`].
    depth: usize,
}

/// Deepest nesting of parentheses, `not` and array literals the parser accepts (it recurses;
/// a bound keeps hostile input from exhausting the stack). Above what any valid query prints
/// to: values nest at most 64 levels, and 30 disjunctions allow at most ~60 levels of
/// alternating AND/OR.
const MAX_NESTING: usize = 256;

type Result<T> = std::result::Result<T, QueryError>;

/// One item of the select list.
enum Item {
    Field(FieldPath),
    Aggregate(Option<String>, AggregateFunction),
}

fn describe(token: Option<&Token>) -> String {
    match token {
        None | Some(Token::EOF) => "the end of the query".into(),
        Some(Token::Word(w)) if w.quote_style.is_some() => format!("`{}`", w.value),
        Some(Token::Word(w)) => format!("'{}'", w.value),
        Some(Token::SingleQuotedString(_) | Token::DoubleQuotedString(_)) => "a string".into(),
        Some(Token::Number(n, _)) => format!("the number {n}"),
        Some(Token::Char(c)) => format!("the character '{c}'"),
        Some(other) => format!("'{other}'"),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.peek_nth(0)
    }

    fn peek_nth(&self, n: usize) -> Option<&Token> {
        self.tokens.get(self.pos + n).map(|t| &t.token)
    }

    fn offset(&self) -> usize {
        self.tokens
            .get(self.pos)
            .map_or(self.src.text.len(), |t| t.offset)
    }

    fn advance(&mut self) -> Option<&Tok> {
        let tok = self.tokens.get(self.pos);
        if tok.is_some() {
            self.pos += 1;
        }
        tok
    }

    fn error_here(&self, message: impl Into<String>) -> QueryError {
        self.src.error_at(self.offset(), message)
    }

    /// An "expected X, found Y" error at the current token.
    fn expected(&self, what: &str) -> QueryError {
        self.error_here(format!("expected {what}, found {}", describe(self.peek())))
    }

    fn is_word_at(&self, n: usize, keyword: &str) -> bool {
        matches!(self.peek_nth(n), Some(Token::Word(Word { value, quote_style: None, .. }))
            if value.eq_ignore_ascii_case(keyword))
    }

    fn is_word(&self, keyword: &str) -> bool {
        self.is_word_at(0, keyword)
    }

    fn eat_word(&mut self, keyword: &str) -> bool {
        let found = self.is_word(keyword);
        if found {
            self.pos += 1;
        }
        found
    }

    fn expect_word(&mut self, keyword: &str) -> Result<()> {
        if self.eat_word(keyword) {
            Ok(())
        } else {
            Err(self.expected(&format!("'{keyword}'")))
        }
    }

    fn eat(&mut self, token: &Token) -> bool {
        let found = self.peek() == Some(token);
        if found {
            self.pos += 1;
        }
        found
    }

    fn expect(&mut self, token: &Token) -> Result<()> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.expected(&format!("'{token}'")))
        }
    }

    fn query(&mut self) -> Result<Query> {
        self.expect_word("select")?;
        let selection = self.selection()?;
        let from_offset = self.offset();
        self.expect_word("from")?;
        let source = match self.from.take() {
            Some(from) if from.keyword_offset == from_offset => from.source,
            _ => return Err(self.src.error_at(from_offset, "unexpected 'from'")),
        };
        let mut query = Query::new(source);
        query.selection = selection;
        if self.eat_word("where") {
            query.filter = Some(self.or_filter()?);
        }
        if self.eat_word("order") {
            self.expect_word("by")?;
            loop {
                let field = self.field()?;
                let direction = if self.eat_word("desc") {
                    Direction::Descending
                } else {
                    self.eat_word("asc");
                    Direction::Ascending
                };
                query.order_by.push(Order::new(field, direction));
                if !self.eat(&Token::Comma) {
                    break;
                }
            }
        }
        self.trailing_clauses(&mut query)?;
        self.eat(&Token::SemiColon);
        if self.peek().is_some() {
            return Err(self.error_here(format!("unexpected {}", describe(self.peek()))));
        }
        Ok(query)
    }

    /// Cursors, limit and offset, in any order, each at most once.
    fn trailing_clauses(&mut self, query: &mut Query) -> Result<()> {
        let mut seen_offset = false;
        loop {
            let clause_offset = self.offset();
            let duplicate = |parser: &Self, name: &str| {
                parser
                    .src
                    .error_at(clause_offset, format!("{name} is given twice"))
            };
            if self.eat_word("start") {
                if query.start.is_some() {
                    return Err(duplicate(self, "a start cursor"));
                }
                let inclusive = self.cursor_kind("at", "after")?;
                query.start = Some(Cursor {
                    values: self.paren_values()?,
                    inclusive,
                });
            } else if self.eat_word("end") {
                if query.end.is_some() {
                    return Err(duplicate(self, "an end cursor"));
                }
                let inclusive = self.cursor_kind("at", "before")?;
                query.end = Some(Cursor {
                    values: self.paren_values()?,
                    inclusive,
                });
            } else if self.eat_word("limit") {
                if query.limit.is_some() {
                    return Err(duplicate(self, "limit"));
                }
                let last = if self.eat_word("to") {
                    self.expect_word("last")?;
                    true
                } else {
                    self.eat_word("last")
                };
                let n = self.unsigned("limit", u64::from(MAX_LIMIT))?;
                let n = u32::try_from(n).unwrap_or(MAX_LIMIT);
                query.limit = Some(if last {
                    Limit::Last(n)
                } else {
                    Limit::First(n)
                });
            } else if self.eat_word("offset") {
                if seen_offset {
                    return Err(duplicate(self, "offset"));
                }
                seen_offset = true;
                let n = self.unsigned("offset", u64::from(MAX_LIMIT))?;
                query.offset = u32::try_from(n).unwrap_or(MAX_LIMIT);
            } else {
                return Ok(());
            }
        }
    }

    /// `at` (inclusive) or the exclusive keyword after `start` / `end`.
    fn cursor_kind(&mut self, inclusive: &str, exclusive: &str) -> Result<bool> {
        if self.eat_word(inclusive) {
            Ok(true)
        } else if self.eat_word(exclusive) {
            Ok(false)
        } else {
            Err(self.expected(&format!("'{inclusive}' or '{exclusive}'")))
        }
    }

    /// A non-negative integer of at most `max` (limits, offsets, `count_up_to`).
    fn unsigned(&mut self, what: &'static str, max: u64) -> Result<u64> {
        let negative = self.eat(&Token::Minus);
        let Some(Token::Number(text, false)) = self.peek().cloned() else {
            return Err(self.expected(&format!("a whole number after {what}")));
        };
        self.pos += 1;
        let invalid = |reason| QueryError::InvalidLimit {
            what,
            value: if negative {
                format!("-{text}")
            } else {
                text.clone()
            },
            reason,
        };
        if text.contains(['.', 'e', 'E']) {
            return Err(invalid("must be a whole number"));
        }
        if negative && !text.trim_start_matches('0').is_empty() {
            return Err(invalid("must not be negative"));
        }
        match text.parse::<u64>() {
            Ok(n) if n <= max => Ok(n),
            _ if max == u64::from(MAX_LIMIT) => Err(invalid("must be between 0 and 2147483647")),
            _ => Err(invalid("must be between 1 and 9223372036854775807")),
        }
    }

    fn selection(&mut self) -> Result<Selection> {
        if self.eat(&Token::Mul) {
            return Ok(Selection::Documents);
        }
        let mut items = Vec::new();
        let mut kind_change = None;
        loop {
            let start = self.offset();
            let item = self.select_item()?;
            if let Some(first) = items.first() {
                if matches!(first, Item::Field(_)) != matches!(item, Item::Field(_)) {
                    kind_change.get_or_insert(start);
                }
            }
            items.push(item);
            if !self.eat(&Token::Comma) {
                break;
            }
        }
        if let Some(offset) = kind_change {
            return Err(self.src.error_at(
                offset,
                "a select list has either fields or aggregations, not both",
            ));
        }
        let mut fields = Vec::new();
        let mut aggregations = Vec::new();
        let mut unnamed = 0;
        for item in items {
            match item {
                Item::Field(field) => fields.push(field),
                Item::Aggregate(alias, function) => {
                    let alias = alias.unwrap_or_else(|| {
                        unnamed += 1;
                        format!("field_{unnamed}")
                    });
                    aggregations.push(Aggregation { alias, function });
                }
            }
        }
        Ok(if aggregations.is_empty() {
            Selection::Fields(fields)
        } else {
            Selection::Aggregations(aggregations)
        })
    }

    fn select_item(&mut self) -> Result<Item> {
        let is_call = self.peek_nth(1) == Some(&Token::LParen);
        let function = ["count", "count_up_to", "sum", "avg"]
            .into_iter()
            .find(|name| is_call && self.is_word(name));
        let Some(function) = function else {
            if self.is_word("from") {
                return Err(self.expected("*, a field or an aggregation"));
            }
            let field = self.field()?;
            if self.is_word("as") {
                return Err(self.error_here("only aggregations take an alias (as ...)"));
            }
            return Ok(Item::Field(field));
        };
        self.pos += 2;
        let function = match function {
            "count" => {
                self.expect(&Token::Mul)?;
                AggregateFunction::Count { up_to: None }
            }
            "count_up_to" => AggregateFunction::Count {
                up_to: Some(self.unsigned("count_up_to", i64::MAX as u64)?),
            },
            "sum" => AggregateFunction::Sum(self.field()?),
            _ => AggregateFunction::Avg(self.field()?),
        };
        self.expect(&Token::RParen)?;
        let alias = if self.eat_word("as") {
            Some(self.segment()?)
        } else {
            None
        };
        Ok(Item::Aggregate(alias, function))
    }

    /// One segment of a field path: a word, or a name in backticks (doubled to escape).
    fn segment(&mut self) -> Result<String> {
        let segment = match self.peek() {
            Some(Token::Word(Word {
                value,
                quote_style: None,
                ..
            })) => value.clone(),
            Some(Token::Word(Word {
                value,
                quote_style: Some('`'),
                ..
            })) => {
                let name = value.replace("``", "`");
                if name.is_empty() {
                    return Err(self.error_here("a field name in backticks is empty"));
                }
                if name.contains('\0') {
                    return Err(self.error_here("a field name contains U+0000"));
                }
                name
            }
            _ => return Err(self.expected("a field name")),
        };
        self.pos += 1;
        Ok(segment)
    }

    fn field(&mut self) -> Result<FieldPath> {
        let start = self.offset();
        let mut segments = vec![self.segment()?];
        while self.eat(&Token::Period) {
            segments.push(self.segment()?);
        }
        FieldPath::new(segments).map_err(|e| self.src.error_at(start, e.to_string()))
    }

    fn or_filter(&mut self) -> Result<Filter> {
        let mut items = vec![self.and_filter()?];
        while self.eat_word("or") {
            items.push(self.and_filter()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Filter::Or(items)
        })
    }

    fn and_filter(&mut self) -> Result<Filter> {
        let mut items = vec![self.not_filter()?];
        while self.eat_word("and") {
            items.push(self.not_filter()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Filter::And(items)
        })
    }

    fn not_filter(&mut self) -> Result<Filter> {
        if self.is_word("not") || self.peek() == Some(&Token::LParen) {
            self.enter()?;
            let result = if self.eat_word("not") {
                self.not_filter().and_then(negate)
            } else {
                self.pos += 1;
                self.or_filter()
                    .and_then(|inner| self.expect(&Token::RParen).map(|()| inner))
            };
            self.depth -= 1;
            return result;
        }
        let field = self.field()?;
        self.predicate(field)
    }

    /// One level deeper; an error past [`MAX_NESTING`].
    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(self.error_here(format!(
                "the query nests parentheses, not and arrays more than {MAX_NESTING} deep"
            )));
        }
        Ok(())
    }

    fn predicate(&mut self, field: FieldPath) -> Result<Filter> {
        let op = match self.peek() {
            Some(Token::Eq | Token::DoubleEq) => Some(FieldOp::Eq),
            Some(Token::Neq) => Some(FieldOp::Ne),
            Some(Token::Lt) => Some(FieldOp::Lt),
            Some(Token::LtEq) => Some(FieldOp::Le),
            Some(Token::Gt) => Some(FieldOp::Gt),
            Some(Token::GtEq) => Some(FieldOp::Ge),
            _ => None,
        };
        if let Some(op) = op {
            self.pos += 1;
            let value = self.value()?;
            return Ok(Filter::field(field, op, value));
        }
        if self.eat_word("in") {
            let value = self.list_operand()?;
            return Ok(Filter::field(field, FieldOp::In, value));
        }
        if self.is_word("not") && self.is_word_at(1, "in") {
            self.pos += 2;
            let value = self.list_operand()?;
            return Ok(Filter::field(field, FieldOp::NotIn, value));
        }
        if self.eat_word("array_contains") {
            let value = self.value()?;
            return Ok(Filter::field(field, FieldOp::ArrayContains, value));
        }
        if self.eat_word("array_contains_any") {
            let value = self.list_operand()?;
            return Ok(Filter::field(field, FieldOp::ArrayContainsAny, value));
        }
        if self.eat_word("is") {
            let not = self.eat_word("not");
            let op = if self.eat_word("null") {
                if not {
                    UnaryOp::IsNotNull
                } else {
                    UnaryOp::IsNull
                }
            } else if self.eat_word("nan") {
                if not {
                    UnaryOp::IsNotNan
                } else {
                    UnaryOp::IsNan
                }
            } else {
                return Err(self.expected("'null' or 'nan'"));
            };
            return Ok(Filter::Unary { field, op });
        }
        Err(self.expected(&format!(
            "an operator after {field} (=, !=, <, <=, >, >=, in, not in, array_contains, array_contains_any, is)"
        )))
    }

    /// The operand of `in`, `not in`, `array_contains_any`: `(a, b)` or a value (an array).
    fn list_operand(&mut self) -> Result<Value> {
        if self.peek() == Some(&Token::LParen) {
            return Ok(Value::Array(self.paren_values()?));
        }
        self.value()
    }

    /// `(v, ...)`, possibly empty.
    fn paren_values(&mut self) -> Result<Vec<Value>> {
        self.expect(&Token::LParen)?;
        self.values_until(&Token::RParen)
    }

    /// Values separated by commas, then `close`.
    fn values_until(&mut self, close: &Token) -> Result<Vec<Value>> {
        let mut values = Vec::new();
        if self.eat(close) {
            return Ok(values);
        }
        loop {
            values.push(self.value()?);
            if !self.eat(&Token::Comma) {
                break;
            }
        }
        self.expect(close)?;
        Ok(values)
    }

    fn value(&mut self) -> Result<Value> {
        let start = self.offset();
        let Some(tok) = self.advance() else {
            return Err(self.expected("a value"));
        };
        let token = tok.token.clone();
        match token {
            Token::Minus => match self.peek().cloned() {
                Some(Token::Number(text, false)) => {
                    self.pos += 1;
                    self.number(&format!("-{text}"), start)
                }
                _ => Err(self.expected("a number after '-'")),
            },
            Token::Number(text, false) => self.number(&text, start),
            Token::SingleQuotedString(raw) => self.string(&raw, '\'', start),
            Token::DoubleQuotedString(raw) => self.string(&raw, '"', start),
            Token::LBracket => {
                self.enter()?;
                let items = self.values_until(&Token::RBracket);
                self.depth -= 1;
                Ok(Value::Array(items?))
            }
            Token::LBrace => self.json_object(start),
            Token::Word(Word {
                value,
                quote_style: None,
                ..
            }) => match value.to_ascii_lowercase().as_str() {
                "true" => Ok(Value::Boolean(true)),
                "false" => Ok(Value::Boolean(false)),
                "null" => Ok(Value::Null),
                "timestamp" => self.timestamp(),
                _ => Err(self.src.error_at(
                    start,
                    format!("expected a value, found '{value}' (strings are written in quotes: \"{value}\")"),
                )),
            },
            other => {
                self.pos -= 1;
                Err(self.error_here(format!(
                    "expected a value (a number, a string in quotes, true, false, null, [...] or typed JSON {{...}}), found {}",
                    describe(Some(&other))
                )))
            }
        }
    }

    /// A number by the typed-JSON rule (see [`super::literal::number`]).
    fn number(&self, text: &str, start: usize) -> Result<Value> {
        number(text).map_err(|message| self.src.error_at(start, message))
    }

    fn string(&self, raw: &str, quote: char, start: usize) -> Result<Value> {
        unescape(raw, quote)
            .map(Value::String)
            .map_err(|message| self.src.error_at(start, message))
    }

    /// `timestamp '2022-09-01T13:23:22Z'` (the word is already consumed).
    fn timestamp(&mut self) -> Result<Value> {
        let start = self.offset();
        let (raw, quote) = match self.peek() {
            Some(Token::SingleQuotedString(raw)) => (raw.clone(), '\''),
            Some(Token::DoubleQuotedString(raw)) => (raw.clone(), '"'),
            _ => return Err(self.expected("an RFC 3339 string after timestamp")),
        };
        self.pos += 1;
        let text = unescape(&raw, quote).map_err(|m| self.src.error_at(start, m))?;
        Timestamp::parse_rfc3339(&text)
            .map(Value::Timestamp)
            .ok_or_else(|| {
                self.src.error_at(
                    start,
                    format!("\"{text}\" is not an RFC 3339 time between years 1 and 9999 with at most microsecond precision"),
                )
            })
    }

    /// A typed-JSON object `{...}` starting at byte `start` (its `{` already consumed): read
    /// by serde_json from the original text, then its tokens are skipped.
    fn json_object(&mut self, start: usize) -> Result<Value> {
        let rest = self.src.text.get(start..).unwrap_or_default();
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
        let json = match stream.next() {
            Some(Ok(json)) => json,
            Some(Err(e)) => {
                return Err(self
                    .src
                    .error_at(start, format!("invalid JSON object: {e}")))
            }
            None => return Err(self.src.error_at(start, "expected a JSON object")),
        };
        let end = start + stream.byte_offset();
        let value =
            typed_json::from_json(&json).map_err(|e| self.src.error_at(start, e.to_string()))?;
        while self.tokens.get(self.pos).is_some_and(|t| t.offset < end) {
            self.pos += 1;
        }
        Ok(value)
    }
}

/// `not` pushed into the filter: `=` and `!=`, `in` and `not in`, `is` and `is not` swap;
/// AND and OR swap (De Morgan). Ranges and array filters have no Firestore negation.
fn negate(filter: Filter) -> Result<Filter> {
    Ok(match filter {
        Filter::Field { field, op, value } => {
            let negated = match op {
                FieldOp::Eq => FieldOp::Ne,
                FieldOp::Ne => FieldOp::Eq,
                FieldOp::In => FieldOp::NotIn,
                FieldOp::NotIn => FieldOp::In,
                other => {
                    return Err(QueryError::UnsupportedNegation {
                        filter: format!("{field} {}", other.text()),
                        op: other.text(),
                    })
                }
            };
            Filter::Field {
                field,
                op: negated,
                value,
            }
        }
        Filter::Unary { field, op } => Filter::Unary {
            field,
            op: match op {
                UnaryOp::IsNull => UnaryOp::IsNotNull,
                UnaryOp::IsNotNull => UnaryOp::IsNull,
                UnaryOp::IsNan => UnaryOp::IsNotNan,
                UnaryOp::IsNotNan => UnaryOp::IsNan,
            },
        },
        Filter::And(children) => {
            Filter::Or(children.into_iter().map(negate).collect::<Result<_>>()?)
        }
        Filter::Or(children) => {
            Filter::And(children.into_iter().map(negate).collect::<Result<_>>()?)
        }
    })
}
