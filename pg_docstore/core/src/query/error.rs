//! Why a query was refused. One enum for both front ends and the validator; each variant's
//! doc comment names the SQLSTATE the extension reports it with ([`QueryError::kind`]).

use thiserror::Error;

use crate::error::ErrorKind;
use crate::typed_json::TypedJsonError;

/// A query that cannot be parsed or breaks one of Firestore's query rules.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QueryError {
    /// The query text (or the structured query's JSON text) is malformed. SQLSTATE 42601.
    /// `line` and `column` count from 1 (columns in characters); `offset` is the byte offset
    /// into the text.
    #[error("syntax error at line {line}, column {column}: {message}")]
    Syntax {
        message: String,
        line: u64,
        column: u64,
        offset: usize,
    },
    /// The `from` clause names something that is not a collection or collection group
    /// (a document path, a reserved or over-long segment). SQLSTATE 22023.
    #[error("invalid collection \"{path}\": {reason}")]
    InvalidCollection { path: String, reason: String },
    /// The structured JSON query has the wrong shape (unknown key, wrong type, missing
    /// member). `at` is the dotted path of the offending member. SQLSTATE 22023.
    #[error("invalid structured query at {at}: {message}")]
    InvalidStructure { at: String, message: String },
    /// A value of the structured JSON query is not valid typed JSON. SQLSTATE 22P02.
    #[error("invalid value at {at}: {source}")]
    InvalidValue { at: String, source: TypedJsonError },
    /// A field path string of the structured JSON query is malformed. SQLSTATE 22023.
    #[error("invalid field path \"{path}\": {reason}")]
    InvalidFieldPath { path: String, reason: String },
    /// A string given for `__name__` is not a document name of the queried collection.
    /// SQLSTATE 22023.
    #[error("invalid document name \"{name}\" for __name__: {reason}")]
    InvalidDocumentName { name: String, reason: String },
    /// The operand does not suit the operator (`in` without a list, `array_contains_any`
    /// with a non-array, a range against null or NaN, `__name__` against a non-reference,
    /// an empty list). SQLSTATE 22023.
    #[error("invalid operand for {field} {op}: {reason}")]
    InvalidOperand {
        field: String,
        op: &'static str,
        reason: String,
    },
    /// An `in` / `array_contains_any` list longer than 30, or a `not in` list longer than 10.
    /// SQLSTATE 22023.
    #[error("{field} {op} accepts at most {max} values, got {count}")]
    TooManyValues {
        field: String,
        op: &'static str,
        count: usize,
        max: usize,
    },
    /// The filter has more than 30 disjunctions in disjunctive normal form (each value of an
    /// `in` or `array_contains_any` list counts as one). SQLSTATE 22023.
    #[error(
        "the filter has {count} disjunctions in disjunctive normal form; the limit is 30 (each value of an in or array_contains_any list counts as one)"
    )]
    TooManyDisjunctions { count: usize },
    /// Two filters Firestore does not allow together (two of `!=` / `not in` /
    /// `is not null` / `is not nan`; `not in` with `in`, `array_contains_any` or `or`; two
    /// array filters in one disjunction). SQLSTATE 22023.
    #[error("{first} cannot be combined with {second}: {rule}")]
    ConflictingFilters {
        first: String,
        second: String,
        rule: &'static str,
    },
    /// `not` applied to a filter Firestore has no negation of (ranges, array filters).
    /// SQLSTATE 22023.
    #[error("not cannot be applied to {filter}: Firestore has no negated form of {op}")]
    UnsupportedNegation { filter: String, op: &'static str },
    /// A field ordered by twice. SQLSTATE 22023.
    #[error("order by names {field} more than once")]
    DuplicateOrder { field: String },
    /// A cursor with more values than the query's normalised order has fields. SQLSTATE 22023.
    #[error(
        "{clause} has {count} values but the query is ordered by only {max} fields ({order}); a cursor gives values for a prefix of the order"
    )]
    CursorTooLong {
        clause: &'static str,
        count: usize,
        max: usize,
        order: String,
    },
    /// A cursor without values, or with a non-reference value at the `__name__` position.
    /// SQLSTATE 22023.
    #[error("invalid {clause} cursor: {reason}")]
    InvalidCursor {
        clause: &'static str,
        reason: String,
    },
    /// A limit, offset or `count_up_to` outside its range. SQLSTATE 22023.
    #[error("invalid {what} {value}: {reason}")]
    InvalidLimit {
        what: &'static str,
        value: String,
        reason: &'static str,
    },
    /// `limit last` without an explicit `order by`. SQLSTATE 22023.
    #[error("limit last (limitToLast) needs an explicit order by")]
    LimitToLastWithoutOrder,
    /// More than 5 aggregations. SQLSTATE 22023.
    #[error("a query has at most 5 aggregations, this one has {count}")]
    TooManyAggregations { count: usize },
    /// A bad aggregation: a duplicate or reserved alias, `sum`/`avg` of `__name__`.
    /// SQLSTATE 22023.
    #[error("invalid aggregation {alias}: {reason}")]
    InvalidAggregation { alias: String, reason: String },
    /// An AND or OR of no filters (structured JSON only). SQLSTATE 22023.
    #[error("a {op} filter needs at least one filter")]
    EmptyComposite { op: &'static str },
}

impl QueryError {
    /// The kind of failure (its canonical code and SQLSTATE): [`ErrorKind::Syntax`] for
    /// [`QueryError::Syntax`], [`ErrorKind::InvalidTypedJson`] for
    /// [`QueryError::InvalidValue`], [`ErrorKind::InvalidArgument`] for every other variant.
    pub fn kind(&self) -> ErrorKind {
        match self {
            QueryError::Syntax { .. } => ErrorKind::Syntax,
            QueryError::InvalidValue { .. } => ErrorKind::InvalidTypedJson,
            QueryError::InvalidCollection { .. }
            | QueryError::InvalidStructure { .. }
            | QueryError::InvalidFieldPath { .. }
            | QueryError::InvalidDocumentName { .. }
            | QueryError::InvalidOperand { .. }
            | QueryError::TooManyValues { .. }
            | QueryError::TooManyDisjunctions { .. }
            | QueryError::ConflictingFilters { .. }
            | QueryError::UnsupportedNegation { .. }
            | QueryError::DuplicateOrder { .. }
            | QueryError::CursorTooLong { .. }
            | QueryError::InvalidCursor { .. }
            | QueryError::InvalidLimit { .. }
            | QueryError::LimitToLastWithoutOrder
            | QueryError::TooManyAggregations { .. }
            | QueryError::InvalidAggregation { .. }
            | QueryError::EmptyComposite { .. } => ErrorKind::InvalidArgument,
        }
    }
}
