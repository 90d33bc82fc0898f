//! The errors of the gRPC front end: each canonical [`Code`] as its gRPC status code (the one
//! table, the counterpart of `http::error::status_of`), and the conversions of the errors the
//! front end meets.

use docstore_core::proto::ProtoError;
use docstore_core::Code;
use tonic::Status;

use crate::service::error::ServiceError;

/// The gRPC status code of each canonical code: the one table. Firestore's codes are the gRPC
/// codes, so the table is the identity of names.
pub fn grpc_code(code: Code) -> tonic::Code {
    match code {
        Code::InvalidArgument => tonic::Code::InvalidArgument,
        Code::NotFound => tonic::Code::NotFound,
        Code::AlreadyExists => tonic::Code::AlreadyExists,
        Code::FailedPrecondition => tonic::Code::FailedPrecondition,
        Code::Aborted => tonic::Code::Aborted,
        Code::PermissionDenied => tonic::Code::PermissionDenied,
        Code::Unauthenticated => tonic::Code::Unauthenticated,
        Code::ResourceExhausted => tonic::Code::ResourceExhausted,
        Code::Unavailable => tonic::Code::Unavailable,
        Code::Unimplemented => tonic::Code::Unimplemented,
        Code::Internal => tonic::Code::Internal,
        Code::DeadlineExceeded => tonic::Code::DeadlineExceeded,
    }
}

/// A status of a canonical code.
pub fn status(code: Code, message: impl Into<String>) -> Status {
    Status::new(grpc_code(code), message)
}

/// INVALID_ARGUMENT.
pub fn invalid_argument(message: impl Into<String>) -> Status {
    status(Code::InvalidArgument, message)
}

/// UNIMPLEMENTED for an RPC pg_docstore does not serve (yet), naming it.
pub fn unimplemented(rpc: &str) -> Status {
    status(
        Code::Unimplemented,
        format!(
            "google.firestore.v1.Firestore/{rpc} is not implemented by pg_docstore yet (docs/grpc.md lists what is)"
        ),
    )
}

/// The status of an operation's error: its code, its message and its hint.
pub fn from_service(error: ServiceError) -> Status {
    let message = match error.hint {
        Some(hint) => format!("{} ({hint})", error.message),
        None => error.message,
    };
    status(error.code, message)
}

/// The status of a refused protobuf value (INVALID_ARGUMENT).
pub fn from_proto(error: &ProtoError) -> Status {
    status(error.kind().code(), error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_keeps_its_name() {
        for code in Code::ALL {
            let grpc = grpc_code(code);
            let name = format!("{grpc:?}");
            let expected: String = code
                .as_str()
                .split('_')
                .map(|w| {
                    let mut w = w.to_ascii_lowercase();
                    w[..1].make_ascii_uppercase();
                    w
                })
                .collect();
            assert_eq!(name, expected, "{code}");
        }
    }

    #[test]
    fn unimplemented_names_the_rpc() {
        let s = unimplemented("PartitionQuery");
        assert_eq!(s.code(), tonic::Code::Unimplemented);
        assert!(s
            .message()
            .contains("google.firestore.v1.Firestore/PartitionQuery"));
    }
}
