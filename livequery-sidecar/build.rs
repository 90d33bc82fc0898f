//! The server side of `google.firestore.v1.Firestore` (src/grpc/): tonic's generated service
//! trait and router, written by `tonic_build::manual` over the wire types of the
//! `googleapis-tonic-google-firestore-v1` crate (which ships the types and a client, no server).
//! No .proto file and no protoc: the methods are declared here, one line each, as
//! google/firestore/v1/firestore.proto declares them.

use tonic_build::manual::{Builder, Method, Service};

/// Name (snake case), route name, request, response, client streaming, server streaming.
const METHODS: [(&str, &str, &str, &str, bool, bool); 17] = [
    (
        "get_document",
        "GetDocument",
        "GetDocumentRequest",
        "Document",
        false,
        false,
    ),
    (
        "list_documents",
        "ListDocuments",
        "ListDocumentsRequest",
        "ListDocumentsResponse",
        false,
        false,
    ),
    (
        "update_document",
        "UpdateDocument",
        "UpdateDocumentRequest",
        "Document",
        false,
        false,
    ),
    (
        "delete_document",
        "DeleteDocument",
        "DeleteDocumentRequest",
        "()",
        false,
        false,
    ),
    (
        "batch_get_documents",
        "BatchGetDocuments",
        "BatchGetDocumentsRequest",
        "BatchGetDocumentsResponse",
        false,
        true,
    ),
    (
        "begin_transaction",
        "BeginTransaction",
        "BeginTransactionRequest",
        "BeginTransactionResponse",
        false,
        false,
    ),
    (
        "commit",
        "Commit",
        "CommitRequest",
        "CommitResponse",
        false,
        false,
    ),
    (
        "rollback",
        "Rollback",
        "RollbackRequest",
        "()",
        false,
        false,
    ),
    (
        "run_query",
        "RunQuery",
        "RunQueryRequest",
        "RunQueryResponse",
        false,
        true,
    ),
    (
        "execute_pipeline",
        "ExecutePipeline",
        "ExecutePipelineRequest",
        "ExecutePipelineResponse",
        false,
        true,
    ),
    (
        "run_aggregation_query",
        "RunAggregationQuery",
        "RunAggregationQueryRequest",
        "RunAggregationQueryResponse",
        false,
        true,
    ),
    (
        "partition_query",
        "PartitionQuery",
        "PartitionQueryRequest",
        "PartitionQueryResponse",
        false,
        false,
    ),
    (
        "write",
        "Write",
        "WriteRequest",
        "WriteResponse",
        true,
        true,
    ),
    (
        "listen",
        "Listen",
        "ListenRequest",
        "ListenResponse",
        true,
        true,
    ),
    (
        "list_collection_ids",
        "ListCollectionIds",
        "ListCollectionIdsRequest",
        "ListCollectionIdsResponse",
        false,
        false,
    ),
    (
        "batch_write",
        "BatchWrite",
        "BatchWriteRequest",
        "BatchWriteResponse",
        false,
        false,
    ),
    (
        "create_document",
        "CreateDocument",
        "CreateDocumentRequest",
        "Document",
        false,
        false,
    ),
];

const TYPES: &str = "googleapis_tonic_google_firestore_v1::google::firestore::v1";

/// The methods whose answers are encoded before tonic sees them (their declared response
/// type, above, is what the bytes are).
const ENCODED: [&str; 2] = ["get_document", "batch_get_documents"];
const ENCODED_CODEC: &str = "crate::grpc::encoded::EncodedCodec";

fn main() {
    let mut service = Service::builder()
        .name("Firestore")
        .package("google.firestore.v1");
    for (name, route, input, output, client_streaming, server_streaming) in METHODS {
        // google.protobuf.Empty is `()` in prost; the generator takes paths only.
        let output = if output == "()" {
            "crate::grpc::Empty".to_owned()
        } else {
            format!("{TYPES}::{output}")
        };
        // The reads of documents answer wire bytes written straight from the stored typed
        // JSON (src/grpc/encoded.rs): their answers are `Encoded`, sent as they are.
        let (output, codec) = if ENCODED.contains(&name) {
            ("crate::grpc::encoded::Encoded".to_owned(), ENCODED_CODEC)
        } else {
            (output, "tonic_prost::ProstCodec")
        };
        let mut method = Method::builder()
            .name(name)
            .route_name(route)
            .input_type(format!("{TYPES}::{input}"))
            .output_type(output)
            .codec_path(codec);
        if client_streaming {
            method = method.client_streaming();
        }
        if server_streaming {
            method = method.server_streaming();
        }
        service = service.method(method.build());
    }
    Builder::new()
        .build_client(false)
        .build_transport(false)
        .compile(&[service.build()]);
    println!("cargo:rerun-if-changed=build.rs");
}
