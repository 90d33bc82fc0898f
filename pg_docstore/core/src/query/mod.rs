//! The query model: one AST ([`Query`]) with two front ends, the validator, and the
//! planner-independent semantics (matcher, result order, a naive evaluator).
//!
//! Stages, each a module:
//! - [`ast`]: the AST.
//! - `prepass` + `text` (+ `literal`): the text dialect (`select * from /restaurants where
//!   ...`), lexed by sqlparser; `print`: `Display` back into it.
//! - [`structured`]: the structured JSON form (Firestore's `StructuredQuery` with typed JSON
//!   values), both ways.
//! - `normalize`: [`Query::validate`] (canonical form and Firestore's rules) and
//!   [`Query::normalized_order`].
//! - [`matcher`]: [`matches`] and [`compare_results`], shared with the live-query sidecar.
//! - [`result`]: the shape of result rows (projection, the aggregation row), shared by the
//!   extension's executor, [`evaluate()`] and the live-query sidecar.
//! - [`evaluate`]: [`evaluate()`] and [`aggregate`], the oracle of the planner's tests.
//! - [`aggregation`]: the [`Accumulator`] of `count`/`sum`/`avg` that [`aggregate`] and the
//!   sidecar's live aggregation targets share (exact, order-independent sums).
//!
//! The dialect, the JSON form and the semantics are specified in `docs/query.md`.

pub mod aggregation;
pub mod ast;
pub mod error;
pub mod evaluate;
mod literal;
pub mod matcher;
mod normalize;
mod prepass;
mod print;
pub mod result;
pub mod structured;
mod text;

pub use aggregation::{Accumulator, Contribution, Number, NumericSum, RunningAggregates};
pub use ast::{
    AggregateFunction, Aggregation, Cursor, Direction, FieldOp, Filter, Limit, Order, Query,
    Selection, Source, UnaryOp, MAX_AGGREGATIONS, MAX_DISJUNCTIONS, MAX_LIMIT, MAX_NOT_IN_VALUES,
};
pub use error::QueryError;
pub use evaluate::{aggregate, evaluate, project};
pub use matcher::{compare_results, field_value, filter_matches, matches, Matcher};
pub use print::write_value;
pub use structured::{parse_structured, parse_structured_str, to_structured};
pub use text::parse_query;

pub use normalize::MIN_NUMERIC_ID;
pub(crate) use normalize::{and_product, dnf_size};
