//! The canonical error codes every part of pg_docstore reports (Firestore's names), and the
//! one table that ties each kind of failure to its code and its SQLSTATE.
//!
//! Every core error reports an [`ErrorKind`]. A kind is finer than a [`Code`] where Postgres
//! users expect a finer SQLSTATE (bad typed JSON 22P02 and query syntax 42601 are both
//! `INVALID_ARGUMENT`). The boundaries read this table and nothing else:
//! - the extension raises [`ErrorKind::sqlstate`];
//! - the sidecar reads a SQLSTATE back with [`ErrorKind::from_sqlstate`] and maps the
//!   [`Code`] to an HTTP status in its own one table;
//! - the Python SDK maps the code name ([`Code::as_str`]) to an exception class.

use std::fmt;

/// Firestore's canonical error codes (the gRPC status names), the vocabulary every boundary
/// shares: SQL, HTTP, SSE and the SDK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    FailedPrecondition,
    Aborted,
    PermissionDenied,
    Unauthenticated,
    ResourceExhausted,
    Unavailable,
    Unimplemented,
    Internal,
    DeadlineExceeded,
}

impl Code {
    /// Every code, in the order of the table above.
    pub const ALL: [Code; 12] = [
        Code::InvalidArgument,
        Code::NotFound,
        Code::AlreadyExists,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::PermissionDenied,
        Code::Unauthenticated,
        Code::ResourceExhausted,
        Code::Unavailable,
        Code::Unimplemented,
        Code::Internal,
        Code::DeadlineExceeded,
    ];

    /// The name on the wire: `INVALID_ARGUMENT`, `NOT_FOUND`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::Unauthenticated => "UNAUTHENTICATED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::Unavailable => "UNAVAILABLE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        }
    }

    /// The code of a wire name, if it is one.
    pub fn parse(name: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of failure an error is: its canonical [`Code`] and its SQLSTATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A bad argument: path, field path, transform, index definition, batch, query rule.
    InvalidArgument,
    /// Malformed typed JSON (docs/typed-json.md).
    InvalidTypedJson,
    /// Query or rules text that does not parse (the message has line and column).
    Syntax,
    /// The document (or index) does not exist.
    NotFound,
    /// The document (or index) exists already.
    AlreadyExists,
    /// A write precondition failed, or a query needs an index that is not ready (the message
    /// then holds the `create_index` call).
    FailedPrecondition,
    /// A concurrent transaction won (REPEATABLE READ conflict, deadlock): retry.
    Aborted,
    /// The caller may not do this (rules, privileges).
    PermissionDenied,
    /// No valid credentials.
    Unauthenticated,
    /// Over a size limit: document, nesting, index entries, request body.
    TooLarge,
    /// The server cannot serve the request now (database down, shutting down).
    Unavailable,
    /// A feature pg_docstore does not have.
    Unimplemented,
    /// A bug: never the caller's fault.
    Internal,
    /// The request ran out of time: a statement hit `statement_timeout` (or was cancelled,
    /// SQLSTATE 57014 `query_canceled`).
    DeadlineExceeded,
}

/// The one table: kind, canonical code, the SQLSTATE the extension raises. Reading back,
/// the first row with a SQLSTATE wins.
const TABLE: [(ErrorKind, Code, &str); 14] = [
    (ErrorKind::InvalidArgument, Code::InvalidArgument, "22023"),
    (ErrorKind::InvalidTypedJson, Code::InvalidArgument, "22P02"),
    (ErrorKind::Syntax, Code::InvalidArgument, "42601"),
    (ErrorKind::NotFound, Code::NotFound, "P0002"),
    (ErrorKind::AlreadyExists, Code::AlreadyExists, "23505"),
    (
        ErrorKind::FailedPrecondition,
        Code::FailedPrecondition,
        "55000",
    ),
    (ErrorKind::Aborted, Code::Aborted, "40001"),
    (ErrorKind::PermissionDenied, Code::PermissionDenied, "42501"),
    (ErrorKind::Unauthenticated, Code::Unauthenticated, "28000"),
    (ErrorKind::TooLarge, Code::ResourceExhausted, "54000"),
    (ErrorKind::Unavailable, Code::Unavailable, "57P03"),
    (ErrorKind::Unimplemented, Code::Unimplemented, "0A000"),
    (ErrorKind::Internal, Code::Internal, "XX000"),
    (ErrorKind::DeadlineExceeded, Code::DeadlineExceeded, "57014"),
];

/// SQLSTATEs Postgres itself raises that are not in [`TABLE`], read as a kind. Classes
/// (two characters) match every code of the class.
const POSTGRES_STATES: [(&str, ErrorKind); 8] = [
    ("40P01", ErrorKind::Aborted),            // deadlock_detected
    ("25006", ErrorKind::FailedPrecondition), // read_only_sql_transaction
    ("22", ErrorKind::InvalidArgument),       // data exceptions
    ("42", ErrorKind::InvalidArgument),       // syntax error or access rule violation
    ("53", ErrorKind::Unavailable),           // insufficient resources
    ("57", ErrorKind::Unavailable),           // operator intervention (admin shutdown, crash)
    ("08", ErrorKind::Unavailable),           // connection exception
    ("28", ErrorKind::Unauthenticated),       // invalid authorization
];

impl ErrorKind {
    fn row(self) -> (ErrorKind, Code, &'static str) {
        TABLE
            .into_iter()
            .find(|(kind, _, _)| *kind == self)
            .unwrap_or((ErrorKind::Internal, Code::Internal, "XX000"))
    }

    /// The canonical code.
    pub fn code(self) -> Code {
        self.row().1
    }

    /// The SQLSTATE the extension raises for this kind (five characters).
    pub fn sqlstate(self) -> &'static str {
        self.row().2
    }

    /// The kind of a SQLSTATE a Postgres error carried: the table's own codes first, then the
    /// Postgres codes and classes clients can cause; anything else is [`ErrorKind::Internal`].
    pub fn from_sqlstate(state: &str) -> ErrorKind {
        if let Some((kind, _, _)) = TABLE.iter().find(|(_, _, s)| *s == state) {
            return *kind;
        }
        POSTGRES_STATES
            .iter()
            .find(|(prefix, _)| state.starts_with(prefix))
            .map_or(ErrorKind::Internal, |(_, kind)| *kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_sqlstate() {
        for (kind, code, state) in TABLE {
            assert_eq!(ErrorKind::from_sqlstate(state), kind, "{state}");
            assert_eq!(kind.code(), code);
            assert_eq!(state.len(), 5);
        }
    }

    #[test]
    fn postgres_states_map_to_kinds() {
        assert_eq!(ErrorKind::from_sqlstate("40P01"), ErrorKind::Aborted);
        assert_eq!(
            ErrorKind::from_sqlstate("22003"),
            ErrorKind::InvalidArgument
        );
        assert_eq!(ErrorKind::from_sqlstate("08006"), ErrorKind::Unavailable);
        assert_eq!(ErrorKind::from_sqlstate("57P01"), ErrorKind::Unavailable);
        assert_eq!(
            ErrorKind::from_sqlstate("57014"),
            ErrorKind::DeadlineExceeded
        );
        assert_eq!(ErrorKind::from_sqlstate("XX001"), ErrorKind::Internal);
        assert_eq!(ErrorKind::from_sqlstate(""), ErrorKind::Internal);
    }

    #[test]
    fn code_names_round_trip() {
        for code in Code::ALL {
            assert_eq!(Code::parse(code.as_str()), Some(code));
        }
        assert_eq!(Code::parse("OK"), None);
    }
}
