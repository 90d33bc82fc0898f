//! The gRPC front end (src/grpc/, docs/grpc.md) over a real HTTP/2 connection, with the
//! googleapis crate's Firestore client: every RPC answers UNIMPLEMENTED naming itself for a
//! good request, INVALID_ARGUMENT for a bad name or resource prefix, UNAUTHENTICATED for a bad
//! token; `Bearer owner` is the admin only in development mode. No database is needed: the
//! checks come before any operation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Parser;
use docstore_sidecar::config::Config;
use docstore_sidecar::grpc::{self, FirestoreService};
use docstore_sidecar::http::{auth::Verifier, AppState};
use docstore_sidecar::pg::Db;
use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use googleapis_tonic_google_firestore_v1::google::firestore::v1::firestore_client::FirestoreClient;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request};

const DEFAULT_DB: &str = "projects/p/databases/(default)";
const DOC: &str = "projects/p/databases/(default)/documents/c/d";
const ROOT: &str = "projects/p/databases/(default)/documents";

/// A gRPC front end on a free port (its database pool never connects: nothing reaches it).
async fn start(dev_mode: bool) -> SocketAddr {
    let config = Config::parse_from([
        "docstore-sidecar",
        "--admin-key",
        "the-admin-key",
        "--database-url",
        "postgresql://nobody@127.0.0.1:1/none",
    ]);
    let state = Arc::new(AppState {
        db: Db::connect(&config.database_url, 1).unwrap(),
        verifier: Verifier::from_config(&config).unwrap(),
        max_body_bytes: config.max_body_bytes,
        query_write_timeout: None,
        metrics: None,
        session: None,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = FirestoreService::new(state, dev_mode);
    tokio::spawn(grpc::serve(service, listener, std::future::pending()));
    addr
}

async fn client(addr: SocketAddr) -> FirestoreClient<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    FirestoreClient::new(channel)
}

/// A request with the metadata the SDKs send to an emulator.
fn sdk<T>(message: T, token: &'static str) -> Request<T> {
    let mut request = Request::new(message);
    let m = request.metadata_mut();
    m.insert("authorization", MetadataValue::from_static(token));
    m.insert(
        "google-cloud-resource-prefix",
        MetadataValue::from_static(DEFAULT_DB),
    );
    request
}

fn get(name: &str) -> wire::GetDocumentRequest {
    wire::GetDocumentRequest {
        name: name.to_owned(),
        ..Default::default()
    }
}

/// The code and message of a failed call.
fn failure<T: std::fmt::Debug>(result: Result<T, tonic::Status>) -> (Code, String) {
    match result {
        Ok(answer) => panic!("answered {answer:?}"),
        Err(status) => (status.code(), status.message().to_owned()),
    }
}

#[tokio::test]
async fn every_rpc_answers_unimplemented_naming_itself() {
    let mut c = client(start(true).await).await;
    let owner = "Bearer owner";
    let mut answers: Vec<(&str, (Code, String))> = Vec::new();
    answers.push((
        "GetDocument",
        failure(c.get_document(sdk(get(DOC), owner)).await),
    ));
    let list = wire::ListDocumentsRequest {
        parent: ROOT.into(),
        collection_id: "c".into(),
        ..Default::default()
    };
    answers.push((
        "ListDocuments",
        failure(c.list_documents(sdk(list, owner)).await),
    ));
    let update = wire::UpdateDocumentRequest {
        document: Some(wire::Document {
            name: DOC.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    answers.push((
        "UpdateDocument",
        failure(c.update_document(sdk(update, owner)).await),
    ));
    let delete = wire::DeleteDocumentRequest {
        name: DOC.into(),
        ..Default::default()
    };
    answers.push((
        "DeleteDocument",
        failure(c.delete_document(sdk(delete, owner)).await),
    ));
    let batch = wire::BatchGetDocumentsRequest {
        database: DEFAULT_DB.into(),
        documents: vec![DOC.into()],
        ..Default::default()
    };
    answers.push((
        "BatchGetDocuments",
        failure(c.batch_get_documents(sdk(batch, owner)).await),
    ));
    let begin = wire::BeginTransactionRequest {
        database: DEFAULT_DB.into(),
        ..Default::default()
    };
    answers.push((
        "BeginTransaction",
        failure(c.begin_transaction(sdk(begin, owner)).await),
    ));
    let commit = wire::CommitRequest {
        database: DEFAULT_DB.into(),
        ..Default::default()
    };
    answers.push(("Commit", failure(c.commit(sdk(commit, owner)).await)));
    let rollback = wire::RollbackRequest {
        database: DEFAULT_DB.into(),
        transaction: vec![1],
    };
    answers.push(("Rollback", failure(c.rollback(sdk(rollback, owner)).await)));
    let query = wire::RunQueryRequest {
        parent: ROOT.into(),
        ..Default::default()
    };
    answers.push(("RunQuery", failure(c.run_query(sdk(query, owner)).await)));
    let pipeline = wire::ExecutePipelineRequest {
        database: DEFAULT_DB.into(),
        ..Default::default()
    };
    answers.push((
        "ExecutePipeline",
        failure(c.execute_pipeline(sdk(pipeline, owner)).await),
    ));
    let aggregation = wire::RunAggregationQueryRequest {
        parent: ROOT.into(),
        ..Default::default()
    };
    answers.push((
        "RunAggregationQuery",
        failure(c.run_aggregation_query(sdk(aggregation, owner)).await),
    ));
    let partition = wire::PartitionQueryRequest {
        parent: ROOT.into(),
        ..Default::default()
    };
    answers.push((
        "PartitionQuery",
        failure(c.partition_query(sdk(partition, owner)).await),
    ));
    let writes = futures_util::stream::iter(vec![wire::WriteRequest {
        database: DEFAULT_DB.into(),
        ..Default::default()
    }]);
    answers.push(("Write", failure(c.write(sdk(writes, owner)).await)));
    let listens = futures_util::stream::iter(vec![wire::ListenRequest {
        database: DEFAULT_DB.into(),
        ..Default::default()
    }]);
    answers.push(("Listen", failure(c.listen(sdk(listens, owner)).await)));
    let ids = wire::ListCollectionIdsRequest {
        parent: ROOT.into(),
        ..Default::default()
    };
    answers.push((
        "ListCollectionIds",
        failure(c.list_collection_ids(sdk(ids, owner)).await),
    ));
    let batch_write = wire::BatchWriteRequest {
        database: DEFAULT_DB.into(),
        ..Default::default()
    };
    answers.push((
        "BatchWrite",
        failure(c.batch_write(sdk(batch_write, owner)).await),
    ));
    let create = wire::CreateDocumentRequest {
        parent: ROOT.into(),
        collection_id: "c".into(),
        ..Default::default()
    };
    answers.push((
        "CreateDocument",
        failure(c.create_document(sdk(create, owner)).await),
    ));
    assert_eq!(
        answers.len(),
        17,
        "every RPC of google.firestore.v1.Firestore"
    );
    for (rpc, (code, message)) in answers {
        assert_eq!(code, Code::Unimplemented, "{rpc}: {message}");
        let route = format!("google.firestore.v1.Firestore/{rpc} ");
        assert!(message.contains(&route), "{rpc}: {message}");
    }
}

#[tokio::test]
async fn bad_names_are_invalid_argument() {
    let mut c = client(start(true).await).await;
    for name in [
        "projects/p/databases/(default)/documents/c",
        "projects/p/databases/(default)/documents",
        "projects/p/databases/Not_A_Db/documents/c/d",
        "databases/(default)/documents/c/d",
        "projects/p/databases/(default)/documents/c/__reserved__",
        "",
    ] {
        let (code, message) = failure(c.get_document(sdk(get(name), "Bearer owner")).await);
        assert_eq!(code, Code::InvalidArgument, "{name:?}: {message}");
    }
    // A collection is no parent; a document of another database is not in the batch's.
    let list = wire::ListCollectionIdsRequest {
        parent: format!("{ROOT}/c"),
        ..Default::default()
    };
    let (code, message) = failure(c.list_collection_ids(sdk(list, "Bearer owner")).await);
    assert_eq!(code, Code::InvalidArgument, "{message}");
    let batch = wire::BatchGetDocumentsRequest {
        database: DEFAULT_DB.into(),
        documents: vec!["projects/p/databases/other-db/documents/c/d".into()],
        ..Default::default()
    };
    let (code, message) = failure(c.batch_get_documents(sdk(batch, "Bearer owner")).await);
    assert_eq!(code, Code::InvalidArgument, "{message}");
    // The resource prefix must name the request's database.
    let mut request = Request::new(get("projects/p/databases/other-db/documents/c/d"));
    request
        .metadata_mut()
        .insert("authorization", MetadataValue::from_static("Bearer owner"));
    request.metadata_mut().insert(
        "google-cloud-resource-prefix",
        MetadataValue::from_static(DEFAULT_DB),
    );
    let (code, message) = failure(c.get_document(request).await);
    assert_eq!(code, Code::InvalidArgument, "{message}");
    assert!(
        message.contains("google-cloud-resource-prefix"),
        "{message}"
    );
}

#[tokio::test]
async fn bad_tokens_are_unauthenticated_and_owner_needs_dev_mode() {
    let dev = start(true).await;
    let prod = start(false).await;
    for (addr, token) in [
        (dev, "Bearer not-a-jwt"),
        (dev, "Basic b3duZXI="),
        (prod, "Bearer owner"),
        (prod, "Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl"),
    ] {
        let mut c = client(addr).await;
        let (code, message) = failure(c.get_document(sdk(get(DOC), token)).await);
        assert_eq!(code, Code::Unauthenticated, "{token}: {message}");
        // Authentication comes first: a bad name with a bad token is still UNAUTHENTICATED.
        let (code, _) = failure(c.get_document(sdk(get("nonsense"), token)).await);
        assert_eq!(code, Code::Unauthenticated, "{token}");
    }
    // The admin key and no token at all pass authentication (then: UNIMPLEMENTED).
    let mut c = client(prod).await;
    let (code, _) = failure(c.get_document(sdk(get(DOC), "Bearer the-admin-key")).await);
    assert_eq!(code, Code::Unimplemented);
    let (code, _) = failure(c.get_document(Request::new(get(DOC))).await);
    assert_eq!(code, Code::Unimplemented);
}
