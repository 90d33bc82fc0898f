//! `docstore-rules`: Firestore security rules for pg_docstore (docs/rules.md).
//!
//! The pipeline, one module per stage:
//! [`lex`] -> [`parse`] (a Pratt parser, spans on every node) -> [`check`] (structure,
//! recursion, Firebase's limits; names and arity while [`ir`] resolves them; a type error is
//! a run-time error, as Firebase's compiler has it) -> [`ir`] (functions inlined, matches flattened
//! into (pattern, methods, condition) rules) -> two back ends, [`eval`] (the evaluator) and
//! [`sql`] (SQL text), both built on [`prim`] (the primitive operations).
//!
//! Errors: [`CompileError`] carries line:column and a source excerpt with a caret; its kind
//! is syntax (42601) or unsupported (0A000). Nothing is ever compiled into a weaker rule.

pub mod check;
pub mod error;
pub mod eval;
pub mod ir;
pub mod lex;
pub mod list;
pub mod parse;
pub mod prim;
pub mod sql;

pub use error::{CompileError, CompileErrorKind, Span};
pub use ir::Ruleset;
pub use parse::ast::{Method, Version};

/// Compile rules source text.
///
/// # Errors
/// [`CompileError`]: syntax (42601) or unsupported (0A000), with line:column and excerpt.
pub fn compile(source: &str) -> Result<Ruleset, CompileError> {
    let file = parse::parse(source)?;
    ir::lower(source, &file)
}
