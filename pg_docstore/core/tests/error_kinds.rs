//! Every variant of every core error reports the kind whose SQLSTATE the extension raised
//! for it before kinds existed (pg_docstore/src/errors.rs mapped each variant by hand).
//! Each `variant` function matches exhaustively, so a new variant does not compile until it
//! has a row here.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::fmt::Display;

use docstore_core::document::LimitError;
use docstore_core::encoding::DecodeError;
use docstore_core::index::{IndexError, Scope};
use docstore_core::mutation::MutationError;
use docstore_core::plan::simulate::SimulateError;
use docstore_core::plan::{KeyError, PlanError};
use docstore_core::query::QueryError;
use docstore_core::{ErrorKind, PathError, TypedJsonError};

/// Each case's kind has the expected SQLSTATE, and the cases name every variant.
fn check<E: Display>(
    cases: &[(E, &str)],
    kind: fn(&E) -> ErrorKind,
    variant: fn(&E) -> &'static str,
    all: &[&str],
) {
    for (error, state) in cases {
        assert_eq!(
            kind(error).sqlstate(),
            *state,
            "{}: {error}",
            variant(error)
        );
    }
    let covered: BTreeSet<&str> = cases.iter().map(|(e, _)| variant(e)).collect();
    let all: BTreeSet<&str> = all.iter().copied().collect();
    assert_eq!(covered, all);
}

fn s(text: &str) -> String {
    text.to_owned()
}

fn typed_json_variant(e: &TypedJsonError) -> &'static str {
    match e {
        TypedJsonError::Syntax(_) => "Syntax",
        TypedJsonError::ReservedKey => "ReservedKey",
        TypedJsonError::NumberOutOfRange { .. } => "NumberOutOfRange",
        TypedJsonError::BadTag { .. } => "BadTag",
        TypedJsonError::TransformNotAllowed { .. } => "TransformNotAllowed",
        TypedJsonError::TooDeep { .. } => "TooDeep",
        TypedJsonError::NulCharacter { .. } => "NulCharacter",
    }
}

#[test]
fn typed_json_errors_are_22p02() {
    let at = || s("a");
    let cases = [
        (TypedJsonError::Syntax(s("x")), "22P02"),
        (TypedJsonError::ReservedKey, "22P02"),
        (
            TypedJsonError::NumberOutOfRange {
                at: at(),
                text: s("1e999"),
            },
            "22P02",
        ),
        (
            TypedJsonError::BadTag {
                at: at(),
                tag: "$timestamp",
                reason: s("x"),
            },
            "22P02",
        ),
        (
            TypedJsonError::TransformNotAllowed {
                at: at(),
                tag: s("$increment"),
            },
            "22P02",
        ),
        (TypedJsonError::TooDeep { at: at() }, "22P02"),
        (TypedJsonError::NulCharacter { at: at() }, "22P02"),
    ];
    check(
        &cases,
        TypedJsonError::kind,
        typed_json_variant,
        &[
            "Syntax",
            "ReservedKey",
            "NumberOutOfRange",
            "BadTag",
            "TransformNotAllowed",
            "TooDeep",
            "NulCharacter",
        ],
    );
}

fn path_variant(e: &PathError) -> &'static str {
    match e {
        PathError::Empty { .. } => "Empty",
        PathError::EmptySegment { .. } => "EmptySegment",
        PathError::NotADocument { .. } => "NotADocument",
        PathError::NotACollection { .. } => "NotACollection",
        PathError::ReservedSegment { .. } => "ReservedSegment",
        PathError::ReservedMention { .. } => "ReservedMention",
        PathError::SegmentTooLong { .. } => "SegmentTooLong",
        PathError::TooDeep { .. } => "TooDeep",
        PathError::SlashInSegment { .. } => "SlashInSegment",
        PathError::NulCharacter => "NulCharacter",
        PathError::InvalidFieldPath { .. } => "InvalidFieldPath",
    }
}

#[test]
fn path_errors_are_22023() {
    let path = || s("c/d");
    let segment = || s("d");
    let cases = [
        (PathError::Empty { path: path() }, "22023"),
        (PathError::EmptySegment { path: path() }, "22023"),
        (PathError::NotADocument { path: path() }, "22023"),
        (PathError::NotACollection { path: path() }, "22023"),
        (
            PathError::ReservedSegment {
                path: path(),
                segment: segment(),
            },
            "22023",
        ),
        (
            PathError::ReservedMention {
                path: path(),
                segment: segment(),
            },
            "22023",
        ),
        (
            PathError::SegmentTooLong {
                path: path(),
                bytes: 1501,
            },
            "22023",
        ),
        (
            PathError::TooDeep {
                path: path(),
                depth: 101,
            },
            "22023",
        ),
        (
            PathError::SlashInSegment {
                path: path(),
                segment: segment(),
            },
            "22023",
        ),
        (PathError::NulCharacter, "22023"),
        (
            PathError::InvalidFieldPath {
                path: path(),
                reason: "x",
            },
            "22023",
        ),
    ];
    check(
        &cases,
        PathError::kind,
        path_variant,
        &[
            "Empty",
            "EmptySegment",
            "NotADocument",
            "NotACollection",
            "ReservedSegment",
            "ReservedMention",
            "SegmentTooLong",
            "TooDeep",
            "SlashInSegment",
            "NulCharacter",
            "InvalidFieldPath",
        ],
    );
}

fn mutation_variant(e: &MutationError) -> &'static str {
    match e {
        MutationError::TypedJson(_) => "TypedJson",
        MutationError::NotAnObject { .. } => "NotAnObject",
        MutationError::InvalidFieldPath(_) => "InvalidFieldPath",
        MutationError::ReservedField { .. } => "ReservedField",
        MutationError::InvalidTransform { .. } => "InvalidTransform",
        MutationError::TransformInArray { .. } => "TransformInArray",
        MutationError::DeleteNotAllowed { .. } => "DeleteNotAllowed",
        MutationError::DuplicateFieldPath { .. } => "DuplicateFieldPath",
        MutationError::ConflictingFieldPaths { .. } => "ConflictingFieldPaths",
        MutationError::NotFound => "NotFound",
        MutationError::AlreadyExists => "AlreadyExists",
    }
}

#[test]
fn mutation_errors_keep_their_sqlstates() {
    let path = || s("a.b");
    let cases = [
        (
            MutationError::TypedJson(TypedJsonError::ReservedKey),
            "22P02",
        ),
        (
            MutationError::NotAnObject {
                what: "data",
                got: s("an array"),
            },
            "22023",
        ),
        (
            MutationError::InvalidFieldPath(PathError::NulCharacter),
            "22023",
        ),
        (MutationError::ReservedField { path: path() }, "22023"),
        (
            MutationError::InvalidTransform {
                path: path(),
                tag: "$increment",
                reason: s("x"),
            },
            "22023",
        ),
        (
            MutationError::TransformInArray {
                path: path(),
                tag: s("$increment"),
            },
            "22023",
        ),
        (
            MutationError::DeleteNotAllowed {
                path: path(),
                reason: "x",
            },
            "22023",
        ),
        (MutationError::DuplicateFieldPath { path: path() }, "22023"),
        (
            MutationError::ConflictingFieldPaths {
                parent: s("a"),
                child: path(),
            },
            "22023",
        ),
        (MutationError::NotFound, "P0002"),
        (MutationError::AlreadyExists, "23505"),
    ];
    check(
        &cases,
        MutationError::kind,
        mutation_variant,
        &[
            "TypedJson",
            "NotAnObject",
            "InvalidFieldPath",
            "ReservedField",
            "InvalidTransform",
            "TransformInArray",
            "DeleteNotAllowed",
            "DuplicateFieldPath",
            "ConflictingFieldPaths",
            "NotFound",
            "AlreadyExists",
        ],
    );
}

fn limit_variant(e: &LimitError) -> &'static str {
    match e {
        LimitError::DocumentTooLarge { .. } => "DocumentTooLarge",
        LimitError::TooDeep { .. } => "TooDeep",
        LimitError::EmptyFieldName { .. } => "EmptyFieldName",
        LimitError::ReservedFieldName { .. } => "ReservedFieldName",
        LimitError::UnrepresentableFieldName { .. } => "UnrepresentableFieldName",
        LimitError::FieldNameTooLong { .. } => "FieldNameTooLong",
        LimitError::FieldPathTooLong { .. } => "FieldPathTooLong",
    }
}

#[test]
fn limit_errors_54000_for_size_and_depth_22023_for_names() {
    let at = || s("a");
    let cases = [
        (LimitError::DocumentTooLarge { bytes: 2 << 20 }, "54000"),
        (
            LimitError::TooDeep {
                at: at(),
                depth: 21,
            },
            "54000",
        ),
        (LimitError::EmptyFieldName { at: at() }, "22023"),
        (
            LimitError::ReservedFieldName {
                at: at(),
                name: s("__a__"),
            },
            "22023",
        ),
        (
            LimitError::UnrepresentableFieldName {
                at: at(),
                name: s("$serde_json::private::Number"),
            },
            "22023",
        ),
        (
            LimitError::FieldNameTooLong {
                at: at(),
                bytes: 1501,
            },
            "22023",
        ),
        (LimitError::FieldPathTooLong { at: at() }, "22023"),
    ];
    check(
        &cases,
        LimitError::kind,
        limit_variant,
        &[
            "DocumentTooLarge",
            "TooDeep",
            "EmptyFieldName",
            "ReservedFieldName",
            "UnrepresentableFieldName",
            "FieldNameTooLong",
            "FieldPathTooLong",
        ],
    );
}

fn index_variant(e: &IndexError) -> &'static str {
    match e {
        IndexError::InvalidDefinition(_) => "InvalidDefinition",
        IndexError::TooManyEntries { .. } => "TooManyEntries",
        IndexError::EntryTooLarge { .. } => "EntryTooLarge",
    }
}

#[test]
fn index_errors_54000_for_entries_22023_for_definitions() {
    let cases = [
        (IndexError::InvalidDefinition(s("x")), "22023"),
        (
            IndexError::TooManyEntries {
                path: s("c/d"),
                count: 40_001,
            },
            "54000",
        ),
        (
            IndexError::EntryTooLarge {
                path: s("c/d"),
                source_of: s("field a"),
                bytes: 2_601,
            },
            "54000",
        ),
    ];
    check(
        &cases,
        IndexError::kind,
        index_variant,
        &["InvalidDefinition", "TooManyEntries", "EntryTooLarge"],
    );
}

fn query_variant(e: &QueryError) -> &'static str {
    match e {
        QueryError::Syntax { .. } => "Syntax",
        QueryError::InvalidCollection { .. } => "InvalidCollection",
        QueryError::InvalidStructure { .. } => "InvalidStructure",
        QueryError::InvalidValue { .. } => "InvalidValue",
        QueryError::InvalidFieldPath { .. } => "InvalidFieldPath",
        QueryError::InvalidDocumentName { .. } => "InvalidDocumentName",
        QueryError::InvalidOperand { .. } => "InvalidOperand",
        QueryError::TooManyValues { .. } => "TooManyValues",
        QueryError::TooManyDisjunctions { .. } => "TooManyDisjunctions",
        QueryError::ConflictingFilters { .. } => "ConflictingFilters",
        QueryError::UnsupportedNegation { .. } => "UnsupportedNegation",
        QueryError::DuplicateOrder { .. } => "DuplicateOrder",
        QueryError::CursorTooLong { .. } => "CursorTooLong",
        QueryError::InvalidCursor { .. } => "InvalidCursor",
        QueryError::InvalidLimit { .. } => "InvalidLimit",
        QueryError::LimitToLastWithoutOrder => "LimitToLastWithoutOrder",
        QueryError::TooManyAggregations { .. } => "TooManyAggregations",
        QueryError::InvalidAggregation { .. } => "InvalidAggregation",
        QueryError::EmptyComposite { .. } => "EmptyComposite",
    }
}

#[test]
fn query_errors_42601_syntax_22p02_values_22023_rules() {
    let field = || s("a");
    let reason = || s("x");
    let cases = [
        (
            QueryError::Syntax {
                message: reason(),
                line: 1,
                column: 1,
                offset: 0,
            },
            "42601",
        ),
        (
            QueryError::InvalidCollection {
                path: s("c/d"),
                reason: reason(),
            },
            "22023",
        ),
        (
            QueryError::InvalidStructure {
                at: field(),
                message: reason(),
            },
            "22023",
        ),
        (
            QueryError::InvalidValue {
                at: field(),
                source: TypedJsonError::ReservedKey,
            },
            "22P02",
        ),
        (
            QueryError::InvalidFieldPath {
                path: field(),
                reason: reason(),
            },
            "22023",
        ),
        (
            QueryError::InvalidDocumentName {
                name: s("x"),
                reason: reason(),
            },
            "22023",
        ),
        (
            QueryError::InvalidOperand {
                field: field(),
                op: "in",
                reason: reason(),
            },
            "22023",
        ),
        (
            QueryError::TooManyValues {
                field: field(),
                op: "in",
                count: 31,
                max: 30,
            },
            "22023",
        ),
        (QueryError::TooManyDisjunctions { count: 31 }, "22023"),
        (
            QueryError::ConflictingFilters {
                first: field(),
                second: s("b"),
                rule: "x",
            },
            "22023",
        ),
        (
            QueryError::UnsupportedNegation {
                filter: field(),
                op: "<",
            },
            "22023",
        ),
        (QueryError::DuplicateOrder { field: field() }, "22023"),
        (
            QueryError::CursorTooLong {
                clause: "start at",
                count: 2,
                max: 1,
                order: field(),
            },
            "22023",
        ),
        (
            QueryError::InvalidCursor {
                clause: "start at",
                reason: reason(),
            },
            "22023",
        ),
        (
            QueryError::InvalidLimit {
                what: "limit",
                value: s("-1"),
                reason: "x",
            },
            "22023",
        ),
        (QueryError::LimitToLastWithoutOrder, "22023"),
        (QueryError::TooManyAggregations { count: 6 }, "22023"),
        (
            QueryError::InvalidAggregation {
                alias: s("n"),
                reason: reason(),
            },
            "22023",
        ),
        (QueryError::EmptyComposite { op: "and" }, "22023"),
    ];
    check(
        &cases,
        QueryError::kind,
        query_variant,
        &[
            "Syntax",
            "InvalidCollection",
            "InvalidStructure",
            "InvalidValue",
            "InvalidFieldPath",
            "InvalidDocumentName",
            "InvalidOperand",
            "TooManyValues",
            "TooManyDisjunctions",
            "ConflictingFilters",
            "UnsupportedNegation",
            "DuplicateOrder",
            "CursorTooLong",
            "InvalidCursor",
            "InvalidLimit",
            "LimitToLastWithoutOrder",
            "TooManyAggregations",
            "InvalidAggregation",
            "EmptyComposite",
        ],
    );
}

fn plan_variant(e: &PlanError) -> &'static str {
    match e {
        PlanError::MissingIndex { .. } => "MissingIndex",
        PlanError::Unsupported(_) => "Unsupported",
    }
}

#[test]
fn plan_errors_55000_missing_index_0a000_unsupported() {
    let cases = [
        (
            PlanError::MissingIndex {
                collection_group: s("c"),
                scope: Scope::Collection,
                fields: Vec::new(),
                call: s("select docstore.create_index(...)"),
            },
            "55000",
        ),
        (PlanError::Unsupported(s("x")), "0A000"),
    ];
    check(
        &cases,
        PlanError::kind,
        plan_variant,
        &["MissingIndex", "Unsupported"],
    );
}

fn decode_variant(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::UnexpectedEnd(_) => "UnexpectedEnd",
        DecodeError::InvalidByte { .. } => "InvalidByte",
        DecodeError::TooDeep => "TooDeep",
        DecodeError::Invalid(_) => "Invalid",
        DecodeError::TrailingBytes(_) => "TrailingBytes",
    }
}

fn key_variant(e: &KeyError) -> &'static str {
    match e {
        KeyError::Prefix => "Prefix",
        KeyError::Decode(_) => "Decode",
        KeyError::Missing(_) => "Missing",
    }
}

fn simulate_variant(e: &SimulateError) -> &'static str {
    match e {
        SimulateError::Key(_) => "Key",
        SimulateError::Unordered(_) => "Unordered",
        SimulateError::MissingDocument => "MissingDocument",
        SimulateError::Seek => "Seek",
    }
}

#[test]
fn corrupt_data_and_planner_bugs_are_internal() {
    let cases = [
        (DecodeError::UnexpectedEnd(3), "XX000"),
        (DecodeError::InvalidByte { offset: 0, byte: 0 }, "XX000"),
        (DecodeError::TooDeep, "XX000"),
        (DecodeError::Invalid("x"), "XX000"),
        (DecodeError::TrailingBytes(1), "XX000"),
    ];
    check(
        &cases,
        DecodeError::kind,
        decode_variant,
        &[
            "UnexpectedEnd",
            "InvalidByte",
            "TooDeep",
            "Invalid",
            "TrailingBytes",
        ],
    );
    let cases = [
        (KeyError::Prefix, "XX000"),
        (KeyError::Decode(DecodeError::TooDeep), "XX000"),
        (KeyError::Missing(0), "XX000"),
    ];
    check(
        &cases,
        KeyError::kind,
        key_variant,
        &["Prefix", "Decode", "Missing"],
    );
    let cases = [
        (SimulateError::Key(KeyError::Prefix), "XX000"),
        (SimulateError::Unordered(0), "XX000"),
        (SimulateError::MissingDocument, "XX000"),
        (SimulateError::Seek, "XX000"),
    ];
    check(
        &cases,
        SimulateError::kind,
        simulate_variant,
        &["Key", "Unordered", "MissingDocument", "Seek"],
    );
}
