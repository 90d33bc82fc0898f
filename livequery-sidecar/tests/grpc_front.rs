//! The gRPC front end (src/grpc/, docs/grpc.md) over a real HTTP/2 connection, with the
//! googleapis crate's Firestore client: every RPC not served yet answers UNIMPLEMENTED naming
//! itself for a good request, INVALID_ARGUMENT for a bad name or resource prefix,
//! UNAUTHENTICATED for a bad token; `Bearer owner` is the admin only in development mode. These
//! need no database (the checks come before any operation). GetDocument and BatchGetDocuments
//! read a real cluster (`DOCSTORE_TEST_DSN`, as tests/session_listen.rs; without it that test
//! says so and passes vacuously, unless `DOCSTORE_REQUIRE_CLUSTER=1`).
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
    start_on("postgresql://nobody@127.0.0.1:1/none", dev_mode).await
}

/// A gRPC front end on a free port over the database `dsn`.
async fn start_on(dsn: &str, dev_mode: bool) -> SocketAddr {
    start_with(dsn, dev_mode, &[]).await
}

/// A gRPC front end on a free port over the database `dsn`, with more flags.
async fn start_with(dsn: &str, dev_mode: bool, flags: &[&str]) -> SocketAddr {
    let mut args = vec![
        "docstore-sidecar",
        "--admin-key",
        "the-admin-key",
        "--database-url",
        dsn,
    ];
    args.extend_from_slice(flags);
    let config = Config::parse_from(args);
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
async fn every_rpc_not_served_answers_unimplemented_naming_itself() {
    let mut c = client(start(true).await).await;
    let owner = "Bearer owner";
    let mut answers: Vec<(&str, (Code, String))> = Vec::new();
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
    // 17 RPCs: these 15, GetDocument and BatchGetDocuments (served_reads_read_the_cluster).
    assert_eq!(answers.len(), 15);
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
    let (code, _) = failure(c.commit(sdk(commit(), "Bearer the-admin-key")).await);
    assert_eq!(code, Code::Unimplemented);
    let (code, _) = failure(c.commit(Request::new(commit())).await);
    assert_eq!(code, Code::Unimplemented);
}

/// A request with `Bearer owner` and no resource prefix.
trait TapOwner {
    fn tap_owner(self) -> Self;
}

impl<T> TapOwner for Request<T> {
    fn tap_owner(mut self) -> Self {
        self.metadata_mut()
            .insert("authorization", MetadataValue::from_static("Bearer owner"));
        self
    }
}

#[tokio::test]
async fn a_message_over_max_body_bytes_is_refused() {
    let addr = start_with(
        "postgresql://nobody@127.0.0.1:1/none",
        true,
        &["--max-body-bytes", "1000"],
    )
    .await;
    let mut c = client(addr).await;
    let big = format!("{ROOT}/c/{}", "x".repeat(2_000));
    let (code, message) = failure(c.get_document(sdk(get(&big), "Bearer owner")).await);
    assert_eq!(code, Code::OutOfRange, "{message}");
    // Under the limit, the same request is read (and answered by the front end).
    let (code, _) = failure(c.commit(sdk(commit(), "Bearer owner")).await);
    assert_eq!(code, Code::Unimplemented);
}

fn commit() -> wire::CommitRequest {
    wire::CommitRequest {
        database: DEFAULT_DB.into(),
        ..Default::default()
    }
}

async fn exec(dsn: &str, sql: &str) {
    let (client, connection) = tokio_postgres::connect(dsn, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap();
}

#[tokio::test]
async fn served_reads_read_the_cluster() {
    let Some(dsn) = docstore_core::test_env::cluster_dsn("served_reads_read_the_cluster") else {
        return;
    };
    let coll = format!(
        "g{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 1_000_000_000
    );
    exec(
        &dsn,
        &format!(
            r#"select docstore.set('{coll}/a', '{{"n": 1, "m": {{"x": "y", "z": true}}, "t": {{"$timestamp": "2024-01-02T03:04:05.123456Z"}}, "d": {{"$double": "-0.0"}}}}')"#
        ),
    )
    .await;
    let mut c = client(start_on(&dsn, true).await).await;
    let a = format!("{ROOT}/{coll}/a");
    let b = format!("{ROOT}/{coll}/b");

    let doc = c
        .get_document(sdk(get(&a), "Bearer owner"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(doc.name, a);
    let db = docstore_core::proto::DatabaseName {
        project: "p".into(),
        database: "(default)".into(),
    };
    let fields = docstore_core::proto::fields_from_proto(&doc.fields, &db).unwrap();
    let expected = docstore_core::typed_json::parse(
        r#"{"n": 1, "m": {"x": "y", "z": true}, "t": {"$timestamp": "2024-01-02T03:04:05.123456Z"}, "d": {"$double": "-0.0"}}"#,
    )
    .unwrap();
    assert_eq!(docstore_core::Value::Map(fields), expected);
    assert!(doc.create_time.is_some() && doc.update_time.is_some());

    // A mask keeps the named fields (nested ones in their maps).
    let masked = wire::GetDocumentRequest {
        name: a.clone(),
        mask: Some(wire::DocumentMask {
            field_paths: vec!["m.x".into(), "n".into()],
        }),
        ..Default::default()
    };
    let doc = c
        .get_document(sdk(masked, "Bearer owner"))
        .await
        .unwrap()
        .into_inner();
    let mut keys: Vec<_> = doc.fields.keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["m", "n"]);

    let (code, message) = failure(c.get_document(sdk(get(&b), "Bearer owner")).await);
    assert_eq!(code, Code::NotFound, "{message}");

    // BatchGetDocuments: found and missing, in request order, one read time.
    let batch = wire::BatchGetDocumentsRequest {
        database: DEFAULT_DB.into(),
        documents: vec![b.clone(), a.clone(), b.clone()],
        ..Default::default()
    };
    let mut stream = c
        .batch_get_documents(sdk(batch, "Bearer owner"))
        .await
        .unwrap()
        .into_inner();
    let mut answers = Vec::new();
    while let Some(answer) = stream.message().await.unwrap() {
        answers.push(answer);
    }
    use wire::batch_get_documents_response::Result as Found;
    let kinds: Vec<String> = answers
        .iter()
        .map(|r| match &r.result {
            Some(Found::Found(doc)) => format!("found {}", doc.name),
            Some(Found::Missing(name)) => format!("missing {name}"),
            None => "nothing".into(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            format!("missing {b}"),
            format!("found {a}"),
            format!("missing {b}")
        ]
    );
    assert!(answers
        .iter()
        .all(|r| r.read_time.is_some() && r.read_time == answers[0].read_time));

    // A client reads under the database's rules, as over HTTP: in a database whose rules
    // want a signed-in caller, an anonymous read is PERMISSION_DENIED, the owner's is not.
    let locked = format!("grpc-{coll}");
    exec(
        &dsn,
        &format!(
            "select docstore.create_database('{locked}'); \
             select docstore.set_rules($r$rules_version = '2';
service cloud.firestore {{
  match /databases/{{database}}/documents {{
    match /{{document=**}} {{
      allow read: if request.auth != null;
    }}
  }}
}}$r$, '{locked}'); \
             set docstore.database = '{locked}'; \
             select docstore.set('c/d', '{{\"n\": 2}}');"
        ),
    )
    .await;
    let locked_doc = format!("projects/p/databases/{locked}/documents/c/d");
    let doc = c
        .get_document(Request::new(get(&locked_doc)).tap_owner())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(doc.name, locked_doc);
    let (code, message) = failure(c.get_document(Request::new(get(&locked_doc))).await);
    assert_eq!(code, Code::PermissionDenied, "{message}");

    // A database that does not exist.
    let other = "projects/p/databases/no-such-db/documents/c/d";
    let mut request = Request::new(get(other));
    request
        .metadata_mut()
        .insert("authorization", MetadataValue::from_static("Bearer owner"));
    let (code, message) = failure(c.get_document(request).await);
    assert_eq!(code, Code::NotFound, "{message}");

    // Reads in a transaction are not served yet.
    let in_tx = wire::GetDocumentRequest {
        name: a.clone(),
        consistency_selector: Some(
            wire::get_document_request::ConsistencySelector::Transaction(vec![1]),
        ),
        ..Default::default()
    };
    let (code, _) = failure(c.get_document(sdk(in_tx, "Bearer owner")).await);
    assert_eq!(code, Code::Unimplemented);
}
