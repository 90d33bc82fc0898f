//! The gRPC front end (src/grpc/, docs/grpc.md) over a real HTTP/2 connection, with the
//! googleapis crate's Firestore client: every RPC not served yet answers UNIMPLEMENTED naming
//! itself for a good request, INVALID_ARGUMENT for a bad name or resource prefix,
//! UNAUTHENTICATED for a bad token; `Bearer owner` is the admin only in development mode. These
//! need no database (the checks come before any operation). GetDocument and BatchGetDocuments
//! read a real cluster (`DOCSTORE_TEST_DSN`, as tests/session_listen.rs; without it that test
//! says so and passes vacuously, unless `DOCSTORE_REQUIRE_CLUSTER=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Parser;
use docstore_sidecar::config::Config;
use docstore_sidecar::grpc::{self, FirestoreService};
use docstore_sidecar::pg::Db;
use docstore_sidecar::service::caller::Verifier;
use docstore_sidecar::service::transactions::{Limits as TransactionLimits, Transactions};
use docstore_sidecar::service::Service;
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
    let service = Arc::new(Service {
        db: Db::connect(&config.database_url, 1).unwrap(),
        verifier: Verifier::from_config(&config).unwrap(),
        session: None,
        transactions: Arc::new(Transactions::new(TransactionLimits::for_pool(1))),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = FirestoreService::new(service, config.max_body_bytes, dev_mode);
    tokio::spawn(grpc::serve(service, listener, None, std::future::pending()));
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
    let pipeline = wire::ExecutePipelineRequest {
        database: DEFAULT_DB.into(),
        ..Default::default()
    };
    answers.push((
        "ExecutePipeline",
        failure(c.execute_pipeline(sdk(pipeline, owner)).await),
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
    // Listen is served (listen_streams_targets_over_grpc); this sidecar has no live queries.
    let (code, message) = failure(c.listen(sdk(listens, owner)).await);
    assert_eq!(code, Code::Unavailable, "{message}");
    // 17 RPCs: these 3, Listen (listen_streams_targets_over_grpc), GetDocument and
    // BatchGetDocuments (served_reads_read_the_cluster), Commit, CreateDocument, UpdateDocument
    // and DeleteDocument (commit_writes_the_cluster), RunQuery (run_query_reads_the_cluster),
    // ListCollectionIds (collection_ids_are_paged), BatchWrite (batch_write_is_not_atomic),
    // RunAggregationQuery (aggregations_read_the_cluster), BeginTransaction and Rollback
    // (tests/grpc/test_transactions.py, through Google's SDK), ListDocuments
    // (tests/grpc/test_list_documents.py).
    assert_eq!(answers.len(), 3);
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
    // The admin key and no token at all pass authentication (then: the unknown transaction id
    // is INVALID_ARGUMENT).
    let mut c = client(prod).await;
    let (code, _) = failure(c.rollback(sdk(rollback(), "Bearer the-admin-key")).await);
    assert_eq!(code, Code::InvalidArgument);
    let (code, _) = failure(c.rollback(Request::new(rollback())).await);
    assert_eq!(code, Code::InvalidArgument);
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
    // Under the limit, the same request is read (and answered by the front end: the unknown
    // transaction id is INVALID_ARGUMENT).
    let (code, _) = failure(c.rollback(sdk(rollback(), "Bearer owner")).await);
    assert_eq!(code, Code::InvalidArgument);
}

fn rollback() -> wire::RollbackRequest {
    wire::RollbackRequest {
        database: DEFAULT_DB.into(),
        transaction: vec![1],
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

    // A read in a transaction no one began: INVALID_ARGUMENT, as Firestore.
    let in_tx = wire::GetDocumentRequest {
        name: a.clone(),
        consistency_selector: Some(
            wire::get_document_request::ConsistencySelector::Transaction(vec![1]),
        ),
        ..Default::default()
    };
    let (code, message) = failure(c.get_document(sdk(in_tx, "Bearer owner")).await);
    assert_eq!(code, Code::InvalidArgument);
    assert!(message.contains("is invalid or expired"), "{message}");
}

/// A collection id of its own for a test (the cluster is shared by the tests of this file).
fn fresh_collection() -> String {
    format!(
        "w{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 1_000_000_000
    )
}

fn int(i: i64) -> wire::Value {
    wire::Value {
        value_type: Some(wire::value::ValueType::IntegerValue(i)),
    }
}

fn double(d: f64) -> wire::Value {
    wire::Value {
        value_type: Some(wire::value::ValueType::DoubleValue(d)),
    }
}

fn update(name: &str, fields: &[(&str, wire::Value)]) -> wire::Write {
    wire::Write {
        operation: Some(wire::write::Operation::Update(wire::Document {
            name: name.to_owned(),
            fields: fields
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn transform(
    path: &str,
    t: wire::document_transform::field_transform::TransformType,
) -> wire::document_transform::FieldTransform {
    wire::document_transform::FieldTransform {
        field_path: path.to_owned(),
        transform_type: Some(t),
    }
}

fn exists(b: bool) -> Option<wire::Precondition> {
    Some(wire::Precondition {
        condition_type: Some(wire::precondition::ConditionType::Exists(b)),
    })
}

#[tokio::test]
async fn commit_writes_the_cluster() {
    use wire::document_transform::field_transform::{ServerValue, TransformType};
    let Some(dsn) = docstore_core::test_env::cluster_dsn("commit_writes_the_cluster") else {
        return;
    };
    let coll = fresh_collection();
    let mut c = client(start_on(&dsn, true).await).await;
    let a = format!("{ROOT}/{coll}/a");
    let b = format!("{ROOT}/{coll}/b");
    let owner = "Bearer owner";
    let fields_of = |doc: &wire::Document| {
        let db = docstore_core::proto::DatabaseName {
            project: "p".into(),
            database: "(default)".into(),
        };
        docstore_core::typed_json::to_json(&docstore_core::Value::Map(
            docstore_core::proto::fields_from_proto(&doc.fields, &db).unwrap(),
        ))
    };

    // A set with every transform, and a delete of a missing document: one result each, the
    // set's with an update time, the delete's without.
    let mut set = update(&a, &[("i", int(1)), ("d", double(1.5)), ("keep", int(7))]);
    set.update_transforms = vec![
        transform("i", TransformType::Increment(int(2))),
        transform("d", TransformType::Maximum(double(2.5))),
        transform("m", TransformType::Minimum(int(-1))),
        transform(
            "t",
            TransformType::SetToServerValue(ServerValue::RequestTime as i32),
        ),
        transform(
            "u",
            TransformType::AppendMissingElements(wire::ArrayValue {
                values: vec![int(1), int(1), int(2)],
            }),
        ),
    ];
    let delete = wire::Write {
        operation: Some(wire::write::Operation::Delete(b.clone())),
        ..Default::default()
    };
    let request = wire::CommitRequest {
        database: DEFAULT_DB.into(),
        writes: vec![set, delete],
        transaction: Vec::new(),
    };
    let answer = c.commit(sdk(request, owner)).await.unwrap().into_inner();
    assert_eq!(answer.write_results.len(), 2);
    assert!(answer.commit_time.is_some());
    assert_eq!(answer.write_results[0].update_time, answer.commit_time);
    assert_eq!(answer.write_results[1].update_time, None);
    let doc = c
        .get_document(sdk(get(&a), owner))
        .await
        .unwrap()
        .into_inner();
    let fields = fields_of(&doc);
    assert_eq!(fields["i"], serde_json::json!(3));
    assert_eq!(fields["d"], serde_json::json!(2.5));
    assert_eq!(fields["m"], serde_json::json!(-1));
    assert_eq!(fields["u"], serde_json::json!([1, 2]));
    assert!(fields["t"]["$timestamp"].is_string(), "{fields}");

    // An update with a mask and exists: true: masked fields set or deleted, others kept;
    // array remove, minimum on a double.
    let mut masked = update(&a, &[("i", int(10))]);
    masked.update_mask = Some(wire::DocumentMask {
        field_paths: vec!["i".into(), "keep".into()],
    });
    masked.current_document = exists(true);
    masked.update_transforms = vec![
        transform(
            "u",
            TransformType::RemoveAllFromArray(wire::ArrayValue {
                values: vec![int(1)],
            }),
        ),
        transform("d", TransformType::Minimum(double(0.5))),
    ];
    let request = wire::CommitRequest {
        database: DEFAULT_DB.into(),
        writes: vec![masked],
        transaction: Vec::new(),
    };
    c.commit(sdk(request, owner)).await.unwrap();
    let doc = c
        .get_document(sdk(get(&a), owner))
        .await
        .unwrap()
        .into_inner();
    let fields = fields_of(&doc);
    assert_eq!(fields["i"], serde_json::json!(10));
    assert!(fields.get("keep").is_none(), "{fields}");
    assert_eq!(fields["u"], serde_json::json!([2]));
    assert_eq!(fields["d"], serde_json::json!(0.5));

    // An update of a missing document: NOT_FOUND naming it, and nothing of the batch written.
    let mut missing = update(&b, &[("x", int(1))]);
    missing.update_mask = Some(wire::DocumentMask {
        field_paths: vec!["x".into()],
    });
    missing.current_document = exists(true);
    let request = wire::CommitRequest {
        database: DEFAULT_DB.into(),
        writes: vec![update(&a, &[("gone", int(1))]), missing],
        transaction: Vec::new(),
    };
    let (code, message) = failure(c.commit(sdk(request, owner)).await);
    assert_eq!(code, Code::NotFound, "{message}");
    assert_eq!(message, format!("No document to update: {b}"), "{message}");
    let doc = c
        .get_document(sdk(get(&a), owner))
        .await
        .unwrap()
        .into_inner();
    assert!(fields_of(&doc).get("gone").is_none());

    // A precondition on an update time in the future: INVALID_ARGUMENT, nothing written.
    let mut future = update(&b, &[("x", int(1))]);
    future.current_document = Some(wire::Precondition {
        condition_type: Some(wire::precondition::ConditionType::UpdateTime(
            docstore_core::proto::ProtoTimestamp {
                seconds: 32_000_000_000,
                nanos: 0,
            },
        )),
    });
    let request = wire::CommitRequest {
        database: DEFAULT_DB.into(),
        writes: vec![future],
        transaction: Vec::new(),
    };
    let (code, message) = failure(c.commit(sdk(request, owner)).await);
    assert_eq!(code, Code::InvalidArgument, "{message}");
    let (code, _) = failure(c.get_document(sdk(get(&b), owner)).await);
    assert_eq!(code, Code::NotFound);

    // CreateDocument (a second create is ALREADY_EXISTS), UpdateDocument, DeleteDocument.
    let create = wire::CreateDocumentRequest {
        parent: ROOT.into(),
        collection_id: coll.clone(),
        document_id: "b".into(),
        document: Some(wire::Document {
            fields: [("x".to_owned(), int(1))].into_iter().collect(),
            ..Default::default()
        }),
        mask: None,
    };
    let doc = c
        .create_document(sdk(create.clone(), owner))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(doc.name, b);
    assert_eq!(fields_of(&doc), serde_json::json!({"x": 1}));
    let (code, message) = failure(c.create_document(sdk(create, owner)).await);
    assert_eq!(code, Code::AlreadyExists, "{message}");
    let random = wire::CreateDocumentRequest {
        parent: ROOT.into(),
        collection_id: coll.clone(),
        ..Default::default()
    };
    let doc = c
        .create_document(sdk(random, owner))
        .await
        .unwrap()
        .into_inner();
    let id = doc.name.rsplit('/').next().unwrap();
    assert_eq!(id.len(), 20, "{}", doc.name);
    let update_request = wire::UpdateDocumentRequest {
        document: Some(wire::Document {
            name: b.clone(),
            fields: [("y".to_owned(), int(2))].into_iter().collect(),
            ..Default::default()
        }),
        update_mask: Some(wire::DocumentMask {
            field_paths: vec!["y".into()],
        }),
        ..Default::default()
    };
    let doc = c
        .update_document(sdk(update_request, owner))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(fields_of(&doc), serde_json::json!({"x": 1, "y": 2}));
    let delete = wire::DeleteDocumentRequest {
        name: b.clone(),
        current_document: exists(true),
    };
    c.delete_document(sdk(delete.clone(), owner)).await.unwrap();
    let (code, _) = failure(c.get_document(sdk(get(&b), owner)).await);
    assert_eq!(code, Code::NotFound);
    let (code, message) = failure(c.delete_document(sdk(delete, owner)).await);
    assert_eq!(code, Code::FailedPrecondition, "{message}");
}

#[tokio::test]
async fn run_query_reads_the_cluster() {
    use wire::structured_query::{
        field_filter, filter::FilterType, CollectionSelector, FieldFilter, FieldReference, Filter,
        Order,
    };
    let Some(dsn) = docstore_core::test_env::cluster_dsn("run_query_reads_the_cluster") else {
        return;
    };
    let coll = fresh_collection();
    exec(
        &dsn,
        &format!(
            r#"select docstore.set('{coll}/a', '{{"n": 1}}'), docstore.set('{coll}/b', '{{"n": 2}}'), docstore.set('{coll}/c', '{{"n": 3}}')"#
        ),
    )
    .await;
    let c = client(start_on(&dsn, true).await).await;
    let field = |p: &str| {
        Some(FieldReference {
            field_path: p.into(),
        })
    };
    let query = |op: i32| wire::RunQueryRequest {
        parent: ROOT.into(),
        query_type: Some(wire::run_query_request::QueryType::StructuredQuery(
            wire::StructuredQuery {
                from: vec![CollectionSelector {
                    collection_id: coll.clone(),
                    all_descendants: false,
                }],
                r#where: Some(Filter {
                    filter_type: Some(FilterType::FieldFilter(FieldFilter {
                        field: field("n"),
                        op,
                        value: Some(int(2)),
                    })),
                }),
                order_by: vec![Order {
                    field: field("n"),
                    direction: wire::structured_query::Direction::Descending as i32,
                }],
                limit: Some(5),
                ..Default::default()
            },
        )),
        ..Default::default()
    };
    let answers = |request| {
        let mut c = c.clone();
        async move {
            let mut stream = c
                .run_query(sdk(request, "Bearer owner"))
                .await?
                .into_inner();
            let mut out = Vec::new();
            while let Some(answer) = stream.message().await? {
                out.push(answer);
            }
            Ok::<_, tonic::Status>(out)
        }
    };
    let got = answers(query(field_filter::Operator::GreaterThanOrEqual as i32))
        .await
        .unwrap();
    let names: Vec<String> = got
        .iter()
        .map(|a| {
            a.document
                .as_ref()
                .map(|d| d.name.clone())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        names,
        [format!("{ROOT}/{coll}/c"), format!("{ROOT}/{coll}/b")]
    );
    assert!(got.iter().all(|a| a.read_time.is_some()));
    // No row: one answer with the read time and no document.
    let none = answers(query(field_filter::Operator::GreaterThan as i32))
        .await
        .unwrap();
    let none: Vec<_> = none.iter().filter(|a| a.document.is_some()).collect();
    assert_eq!(none.len(), 1, "{none:?}");
    let empty = answers(query(field_filter::Operator::Equal as i32))
        .await
        .unwrap();
    assert_eq!(empty.len(), 1);
    let empty_coll = wire::RunQueryRequest {
        parent: ROOT.into(),
        query_type: Some(wire::run_query_request::QueryType::StructuredQuery(
            wire::StructuredQuery {
                from: vec![CollectionSelector {
                    collection_id: format!("{coll}-none"),
                    all_descendants: false,
                }],
                ..Default::default()
            },
        )),
        ..Default::default()
    };
    let got = answers(empty_coll).await.unwrap();
    assert_eq!(got.len(), 1);
    assert!(got[0].document.is_none() && got[0].read_time.is_some());
    // An operator Firestore does not define: INVALID_ARGUMENT.
    let (code, message) = failure(answers(query(99)).await);
    assert_eq!(code, Code::InvalidArgument, "{message}");
}

#[tokio::test]
async fn collection_ids_are_paged() {
    let Some(dsn) = docstore_core::test_env::cluster_dsn("collection_ids_are_paged") else {
        return;
    };
    let coll = fresh_collection();
    exec(
        &dsn,
        &format!(
            r#"select docstore.set('{coll}/a/s1/x', '{{}}'), docstore.set('{coll}/a/s2/y', '{{}}'), docstore.set('{coll}/a/s3/z', '{{}}')"#
        ),
    )
    .await;
    let mut c = client(start_on(&dsn, true).await).await;
    let list = |token: &str| wire::ListCollectionIdsRequest {
        parent: format!("{ROOT}/{coll}/a"),
        page_size: 2,
        page_token: token.to_owned(),
        consistency_selector: None,
    };
    let first = c
        .list_collection_ids(sdk(list(""), "Bearer owner"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.collection_ids, ["s1", "s2"]);
    let second = c
        .list_collection_ids(sdk(list(&first.next_page_token), "Bearer owner"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.collection_ids, ["s3"]);
    assert!(second.next_page_token.is_empty());
    // Only the admin lists collections.
    let (code, message) = failure(c.list_collection_ids(Request::new(list(""))).await);
    assert_eq!(code, Code::PermissionDenied, "{message}");
}

#[tokio::test]
async fn batch_write_is_not_atomic() {
    let Some(dsn) = docstore_core::test_env::cluster_dsn("batch_write_is_not_atomic") else {
        return;
    };
    let coll = fresh_collection();
    let mut c = client(start_on(&dsn, true).await).await;
    let (a, b, d) = (
        format!("{ROOT}/{coll}/a"),
        format!("{ROOT}/{coll}/b"),
        format!("{ROOT}/{coll}/d"),
    );
    let mut missing = update(&b, &[("x", int(1))]);
    missing.update_mask = Some(wire::DocumentMask {
        field_paths: vec!["x".into()],
    });
    missing.current_document = exists(true);
    let request = wire::BatchWriteRequest {
        database: DEFAULT_DB.into(),
        writes: vec![
            update(&a, &[("x", int(1))]),
            missing,
            update(&d, &[("x", int(2))]),
        ],
        labels: Default::default(),
    };
    let answer = c
        .batch_write(sdk(request, "Bearer owner"))
        .await
        .unwrap()
        .into_inner();
    let codes: Vec<i32> = answer.status.iter().map(|s| s.code).collect();
    assert_eq!(codes, [0, Code::NotFound as i32, 0]);
    assert_eq!(answer.write_results.len(), 3);
    assert!(answer.write_results[0].update_time.is_some());
    assert!(answer.write_results[1].update_time.is_none());
    for name in [&a, &d] {
        c.get_document(sdk(get(name), "Bearer owner"))
            .await
            .unwrap();
    }
    let (code, _) = failure(c.get_document(sdk(get(&b), "Bearer owner")).await);
    assert_eq!(code, Code::NotFound);
}

/// Commit and BatchWrite answer one transform result per field
/// transform, in order: the field's value after the write.
#[tokio::test]
async fn commits_answer_transform_results() {
    use wire::document_transform::field_transform::{ServerValue, TransformType};
    let Some(dsn) = docstore_core::test_env::cluster_dsn("commits_answer_transform_results") else {
        return;
    };
    let coll = fresh_collection();
    let mut c = client(start_on(&dsn, true).await).await;
    let owner = "Bearer owner";
    let (a, b) = (format!("{ROOT}/{coll}/a"), format!("{ROOT}/{coll}/b"));
    let array = |values: Vec<wire::Value>| wire::ArrayValue { values };
    let kind = |v: &wire::Value| v.value_type.clone();
    let int_kind = |i: i64| Some(wire::value::ValueType::IntegerValue(i));

    // A set with transforms; a plain set (no results); a transform-only write of the same
    // batch on another document.
    let mut set = update(&a, &[("n", int(5)), ("m", int(1))]);
    set.update_transforms = vec![
        transform("n", TransformType::Increment(int(2))),
        transform("m", TransformType::Maximum(int(9))),
        transform(
            "u",
            TransformType::AppendMissingElements(array(vec![int(1), int(2)])),
        ),
        transform(
            "t",
            TransformType::SetToServerValue(ServerValue::RequestTime as i32),
        ),
    ];
    let request = wire::CommitRequest {
        database: DEFAULT_DB.into(),
        writes: vec![set, update(&b, &[("x", int(1))])],
        transaction: Vec::new(),
    };
    let answer = c.commit(sdk(request, owner)).await.unwrap().into_inner();
    let results = &answer.write_results[0].transform_results;
    assert_eq!(results.len(), 4, "{results:?}");
    assert_eq!(kind(&results[0]), int_kind(7));
    assert_eq!(kind(&results[1]), int_kind(9));
    assert_eq!(
        kind(&results[2]),
        Some(wire::value::ValueType::ArrayValue(array(vec![
            int(1),
            int(2)
        ])))
    );
    // The server time is the commit's.
    assert_eq!(
        kind(&results[3]),
        answer
            .commit_time
            .map(wire::value::ValueType::TimestampValue)
    );
    assert!(answer.write_results[1].transform_results.is_empty());

    // BatchWrite: each write's own results.
    let mut bump = update(&b, &[]);
    bump.update_mask = Some(wire::DocumentMask {
        field_paths: Vec::new(),
    });
    bump.current_document = exists(true);
    bump.update_transforms = vec![transform("x", TransformType::Increment(int(4)))];
    let request = wire::BatchWriteRequest {
        database: DEFAULT_DB.into(),
        writes: vec![bump],
        labels: Default::default(),
    };
    let answer = c
        .batch_write(sdk(request, owner))
        .await
        .unwrap()
        .into_inner();
    let results: Vec<_> = answer.write_results[0]
        .transform_results
        .iter()
        .map(kind)
        .collect();
    assert_eq!(results, [int_kind(5)]);
}

#[tokio::test]
async fn aggregations_read_the_cluster() {
    use wire::structured_aggregation_query::aggregation::{Avg, Count, Operator, Sum};
    use wire::structured_aggregation_query::{Aggregation, QueryType};
    use wire::structured_query::{CollectionSelector, FieldReference};
    let Some(dsn) = docstore_core::test_env::cluster_dsn("aggregations_read_the_cluster") else {
        return;
    };
    let coll = fresh_collection();
    exec(
        &dsn,
        &format!(
            r#"select docstore.set('{coll}/a', '{{"n": 1}}'), docstore.set('{coll}/b', '{{"n": 2}}'), docstore.set('{coll}/c', '{{"n": 3}}')"#
        ),
    )
    .await;
    let mut c = client(start_on(&dsn, true).await).await;
    let n = || {
        Some(FieldReference {
            field_path: "n".into(),
        })
    };
    let request = |aggregations: Vec<Aggregation>| wire::RunAggregationQueryRequest {
        parent: ROOT.into(),
        query_type: Some(
            wire::run_aggregation_query_request::QueryType::StructuredAggregationQuery(
                wire::StructuredAggregationQuery {
                    aggregations,
                    query_type: Some(QueryType::StructuredQuery(wire::StructuredQuery {
                        from: vec![CollectionSelector {
                            collection_id: coll.clone(),
                            all_descendants: false,
                        }],
                        ..Default::default()
                    })),
                },
            ),
        ),
        ..Default::default()
    };
    let agg = |alias: &str, operator: Operator| Aggregation {
        alias: alias.into(),
        operator: Some(operator),
    };
    let all = vec![
        agg("total", Operator::Count(Count { up_to: None })),
        agg("two", Operator::Count(Count { up_to: Some(2) })),
        agg("s", Operator::Sum(Sum { field: n() })),
        agg("m", Operator::Avg(Avg { field: n() })),
    ];
    let mut stream = c
        .run_aggregation_query(sdk(request(all), "Bearer owner"))
        .await
        .unwrap()
        .into_inner();
    let answer = stream.message().await.unwrap().unwrap();
    assert!(answer.read_time.is_some());
    let fields = answer.result.unwrap().aggregate_fields;
    let db = docstore_core::proto::DatabaseName {
        project: "p".into(),
        database: "(default)".into(),
    };
    let fields: std::collections::HashMap<String, wire::Value> = fields.into_iter().collect();
    let got = docstore_core::typed_json::to_json(&docstore_core::Value::Map(
        docstore_core::proto::fields_from_proto(&fields, &db).unwrap(),
    ));
    assert_eq!(
        got,
        serde_json::json!({"total": 3, "two": 2, "s": 6, "m": 2.0})
    );
    let (code, message) = failure(
        c.run_aggregation_query(sdk(request(vec![]), "Bearer owner"))
            .await,
    );
    assert_eq!(code, Code::InvalidArgument);
    assert!(
        message.contains("Aggregations can not be empty"),
        "{message}"
    );
    let twice = vec![
        agg("x", Operator::Count(Count { up_to: None })),
        agg("x", Operator::Sum(Sum { field: n() })),
    ];
    let (code, message) = failure(
        c.run_aggregation_query(sdk(request(twice), "Bearer owner"))
            .await,
    );
    assert_eq!(code, Code::InvalidArgument);
    assert!(
        message.contains("Aggregation aliases contain duplicate alias"),
        "{message}"
    );
}

// ---- Listen (src/grpc/listen.rs, docs/grpc.md "Listen") ----

/// How long one response may take before the test reports a hang (not a performance bound).
const HANG: std::time::Duration = std::time::Duration::from_secs(60);

/// A gRPC front end with live queries (a session on a slot of its own, small replay so that
/// a resume can fall out of it) over the database `dsn`.
async fn start_live(dsn: &str, slot: &str) -> SocketAddr {
    use docstore_sidecar::session::{Session, Settings, StreamCaps};
    let config = Config::parse_from([
        "docstore-sidecar",
        "--admin-key",
        "the-admin-key",
        "--database-url",
        dsn,
    ]);
    let db = Db::connect(&config.database_url, 4).unwrap();
    let session = Session::start(
        db.clone(),
        Settings {
            postgres: docstore_sidecar::pg::tls::Postgres::plain(dsn.parse().unwrap()),
            slot: slot.to_owned(),
            heartbeat: std::time::Duration::from_millis(200),
            grace: std::time::Duration::from_secs(60),
            queue: 1024,
            replay: 4,
            replay_bytes: 256 << 20,
            limits: docstore_sidecar::changelog::Limits::default(),
            matcher: docstore_sidecar::matcher::MatcherConfig::default(),
            caps: StreamCaps::default(),
        },
        Vec::new(),
        None,
    );
    let service = Arc::new(Service {
        db,
        verifier: Verifier::from_config(&config).unwrap(),
        session: Some(session),
        transactions: Arc::new(Transactions::new(TransactionLimits::for_pool(1))),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = FirestoreService::new(service, config.max_body_bytes, true);
    tokio::spawn(grpc::serve(service, listener, None, std::future::pending()));
    addr
}

/// One Listen stream of a client: its requests and its responses.
struct Listen {
    requests: tokio::sync::mpsc::Sender<wire::ListenRequest>,
    responses: tonic::Streaming<wire::ListenResponse>,
    /// The last global NO_CHANGE.
    last: Option<wire::TargetChange>,
}

impl Listen {
    async fn open(c: &mut FirestoreClient<Channel>) -> Listen {
        let (requests, rx) = tokio::sync::mpsc::channel(16);
        let outgoing =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|r| (r, rx)) },
            );
        let responses = c
            .listen(sdk(outgoing, "Bearer owner"))
            .await
            .unwrap()
            .into_inner();
        Listen {
            requests,
            responses,
            last: None,
        }
    }

    async fn add(&self, target: wire::Target) {
        self.send(wire::listen_request::TargetChange::AddTarget(target))
            .await;
    }

    async fn send(&self, change: wire::listen_request::TargetChange) {
        self.requests
            .send(wire::ListenRequest {
                database: DEFAULT_DB.into(),
                labels: Default::default(),
                target_change: Some(change),
            })
            .await
            .unwrap();
    }

    async fn next(&mut self) -> wire::ListenResponse {
        tokio::time::timeout(HANG, self.responses.message())
            .await
            .expect("no response")
            .expect("the stream failed")
            .expect("the stream ended")
    }

    /// The responses up to the next global NO_CHANGE (a snapshot, as the SDKs see it) that
    /// follows anything else, and that NO_CHANGE; global NO_CHANGEs with nothing before them
    /// (heartbeats) are checked for a monotonic read time and skipped.
    async fn batch(&mut self) -> (Vec<wire::ListenResponse>, wire::TargetChange) {
        let mut batch = Vec::new();
        loop {
            let response = self.next().await;
            match global_no_change(&response).cloned() {
                Some(change) => {
                    assert!(change.read_time.is_some() && !change.resume_token.is_empty());
                    self.last = Some(change.clone());
                    if !batch.is_empty() {
                        return (batch, change);
                    }
                }
                None => batch.push(response),
            }
        }
    }

    /// Batches until one satisfies `wanted`; returns every response seen (in order) and the
    /// last NO_CHANGE.
    async fn until(
        &mut self,
        wanted: impl Fn(&[wire::ListenResponse]) -> bool,
    ) -> (Vec<wire::ListenResponse>, wire::TargetChange) {
        let mut seen = Vec::new();
        loop {
            let (batch, change) = self.batch().await;
            seen.extend(batch);
            if wanted(&seen) {
                return (seen, change);
            }
        }
    }
}

fn global_no_change(r: &wire::ListenResponse) -> Option<&wire::TargetChange> {
    match &r.response_type {
        Some(wire::listen_response::ResponseType::TargetChange(t))
            if t.target_change_type == wire::target_change::TargetChangeType::NoChange as i32
                && t.target_ids.is_empty() =>
        {
            Some(t)
        }
        _ => None,
    }
}

/// A compact view of a response: `ADD 5`, `CURRENT 5`, `RESET 5`, `REMOVE 5`,
/// `REMOVE 5 cause 7`, `CHANGE c/a 5`, `DELETE c/a 5`, `LEAVE c/a 5`, `FILTER 5 3`.
fn show(r: &wire::ListenResponse) -> String {
    use wire::listen_response::ResponseType as R;
    use wire::target_change::TargetChangeType as T;
    let short = |name: &str| name.trim_start_matches(&format!("{ROOT}/")).to_owned();
    let ids = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    match &r.response_type {
        Some(R::TargetChange(t)) => {
            let kind = match T::try_from(t.target_change_type) {
                Ok(T::NoChange) => "NO_CHANGE",
                Ok(T::Add) => "ADD",
                Ok(T::Remove) => "REMOVE",
                Ok(T::Current) => "CURRENT",
                Ok(T::Reset) => "RESET",
                Err(_) => "?",
            };
            match &t.cause {
                Some(cause) => format!("{kind} {} cause {}", ids(&t.target_ids), cause.code),
                None => format!("{kind} {}", ids(&t.target_ids)),
            }
        }
        Some(R::DocumentChange(d)) => format!(
            "CHANGE {} {}",
            short(&d.document.as_ref().unwrap().name),
            ids(&d.target_ids)
        ),
        Some(R::DocumentDelete(d)) => {
            format!(
                "DELETE {} {}",
                short(&d.document),
                ids(&d.removed_target_ids)
            )
        }
        Some(R::DocumentRemove(d)) => {
            format!(
                "LEAVE {} {}",
                short(&d.document),
                ids(&d.removed_target_ids)
            )
        }
        Some(R::Filter(f)) => format!("FILTER {} {}", f.target_id, f.count),
        None => "?".into(),
    }
}

fn shown(responses: &[wire::ListenResponse]) -> Vec<String> {
    responses.iter().map(show).collect()
}

/// A query target on `coll` where n >= 1 order by n.
fn query_target(id: i32, coll: &str) -> wire::Target {
    use wire::structured_query::{
        field_filter, filter::FilterType, CollectionSelector, FieldFilter, FieldReference, Filter,
        Order,
    };
    let field = || {
        Some(FieldReference {
            field_path: "n".into(),
        })
    };
    wire::Target {
        target_id: id,
        target_type: Some(wire::target::TargetType::Query(wire::target::QueryTarget {
            parent: ROOT.into(),
            query_type: Some(wire::target::query_target::QueryType::StructuredQuery(
                wire::StructuredQuery {
                    from: vec![CollectionSelector {
                        collection_id: coll.into(),
                        all_descendants: false,
                    }],
                    r#where: Some(Filter {
                        filter_type: Some(FilterType::FieldFilter(FieldFilter {
                            field: field(),
                            op: field_filter::Operator::GreaterThanOrEqual as i32,
                            value: Some(int(1)),
                        })),
                    }),
                    order_by: vec![Order {
                        field: field(),
                        direction: wire::structured_query::Direction::Ascending as i32,
                    }],
                    ..Default::default()
                },
            )),
        })),
        ..Default::default()
    }
}

fn document_target(id: i32, path: &str) -> wire::Target {
    wire::Target {
        target_id: id,
        target_type: Some(wire::target::TargetType::Documents(
            wire::target::DocumentsTarget {
                documents: vec![format!("{ROOT}/{path}")],
            },
        )),
        ..Default::default()
    }
}

fn resumed(mut target: wire::Target, token: &[u8]) -> wire::Target {
    target.resume_type = Some(wire::target::ResumeType::ResumeToken(token.to_vec()));
    target
}

/// `a` comes before `b` in `seen`.
fn before(seen: &[String], a: &str, b: &str) -> bool {
    let at = |s: &str| seen.iter().position(|x| x == s);
    matches!((at(a), at(b)), (Some(x), Some(y)) if x < y)
}

fn micros(t: &docstore_core::proto::ProtoTimestamp) -> i64 {
    t.seconds * 1_000_000 + i64::from(t.nanos / 1000)
}

#[test]
fn listen_streams_targets_over_grpc() {
    let Some(dsn) = docstore_core::test_env::cluster_dsn("listen_streams_targets_over_grpc") else {
        return;
    };
    let coll = fresh_collection();
    let slot = format!("docstore_grpc_listen_{coll}");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(listen_scenarios(&dsn, &slot, &coll));
    }));
    // The hub's tasks and its replication connection end with the runtime; then the slot can go.
    drop(runtime);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(support::drop_slot_when_idle(&dsn, &slot));
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

async fn listen_scenarios(dsn: &str, slot: &str, coll: &str) {
    let set =
        |path: &str, n: i64| format!("select docstore.set('{coll}/{path}', '{{\"n\": {n}}}');");
    exec(dsn, &format!("{}{}", set("a", 1), set("b", 2))).await;
    let mut c = client(start_live(dsn, slot).await).await;
    const PY: i32 = 0x5079;

    // Two targets on one stream, Python's id and Node's: ADD, the documents, CURRENT, then
    // the global NO_CHANGE.
    let mut listen = Listen::open(&mut c).await;
    listen.add(query_target(PY, coll)).await;
    listen.add(document_target(1, &format!("{coll}/c"))).await;
    let (seen, _) = listen
        .until(|s| {
            let s = shown(s);
            s.contains(&format!("CURRENT {PY}")) && s.contains(&"CURRENT 1".to_owned())
        })
        .await;
    let seen = shown(&seen);
    let a = format!("CHANGE {coll}/a {PY}");
    let b = format!("CHANGE {coll}/b {PY}");
    assert!(before(&seen, &format!("ADD {PY}"), &a), "{seen:?}");
    assert!(before(&seen, &a, &b), "{seen:?}");
    assert!(before(&seen, &b, &format!("CURRENT {PY}")), "{seen:?}");
    assert!(before(&seen, "ADD 1", "CURRENT 1"), "{seen:?}");
    assert_eq!(
        seen.iter().filter(|s| s.starts_with("CHANGE")).count(),
        2,
        "{seen:?}"
    );

    // Changes: a document enters the document target, one leaves the query (still exists:
    // DocumentRemove), one is deleted (DocumentDelete).
    exec(dsn, &set("c", 7)).await;
    exec(dsn, &set("b", 0)).await;
    exec(dsn, &format!("select docstore.delete('{coll}/a');")).await;
    let (seen, _) = listen
        .until(|s| shown(s).contains(&format!("DELETE {coll}/a {PY}")))
        .await;
    let seen = shown(&seen);
    assert!(
        before(
            &seen,
            &format!("CHANGE {coll}/c 1"),
            &format!("LEAVE {coll}/b {PY}")
        ),
        "{seen:?}"
    );
    assert!(
        before(
            &seen,
            &format!("CHANGE {coll}/c {PY}"),
            &format!("LEAVE {coll}/b {PY}")
        ),
        "{seen:?}"
    );

    // Remove a target on the running stream: REMOVE, and nothing for it afterwards.
    listen
        .send(wire::listen_request::TargetChange::RemoveTarget(1))
        .await;
    loop {
        if show(&listen.next().await) == "REMOVE 1" {
            break;
        }
    }
    exec(dsn, &set("c", 8)).await;
    let (seen, _) = listen
        .until(|s| shown(s).contains(&format!("CHANGE {coll}/c {PY}")))
        .await;
    let seen = shown(&seen);
    assert!(
        !seen
            .iter()
            .any(|s| s.ends_with(" 1") && s.starts_with("CHANGE")),
        "{seen:?}"
    );

    // A `once` target: its results, CURRENT, then REMOVE.
    let mut once = document_target(9, &format!("{coll}/c"));
    once.once = true;
    listen.add(once).await;
    let (seen, _) = listen
        .until(|s| shown(s).contains(&"CURRENT 9".into()))
        .await;
    let mut seen = shown(&seen);
    assert!(
        before(&seen, &format!("CHANGE {coll}/c 9"), "CURRENT 9"),
        "{seen:?}"
    );
    while !seen.contains(&"REMOVE 9".to_owned()) {
        seen.push(show(&listen.next().await));
    }

    // Resume inside the retention: a new stream with the last token gets the changes since,
    // no RESET.
    let last = listen.last.clone().unwrap();
    drop(listen);
    exec(dsn, &set("d", 3)).await;
    let mut listen = Listen::open(&mut c).await;
    listen
        .add(resumed(query_target(PY, coll), &last.resume_token))
        .await;
    let (seen, last) = listen
        .until(|s| shown(s).contains(&format!("CHANGE {coll}/d {PY}")))
        .await;
    let seen = shown(&seen);
    assert!(
        before(&seen, &format!("ADD {PY}"), &format!("CURRENT {PY}")),
        "{seen:?}"
    );
    assert!(
        !seen
            .iter()
            .any(|s| s.starts_with("RESET") || s.starts_with("FILTER")),
        "{seen:?}"
    );
    assert!(!seen.contains(&format!("CHANGE {coll}/c {PY}")), "{seen:?}");

    // A token past the retention (more events than the replay keeps): RESET, the full
    // result, the ExistenceFilter with its count, CURRENT.
    // An observer on another stream: once it sees the last write, the hub has logged every
    // write for the disconnected stream too (it applies transactions in order).
    let mut observer = Listen::open(&mut c).await;
    observer.add(document_target(5, &format!("{coll}/j"))).await;
    observer
        .until(|s| shown(s).contains(&"CURRENT 5".into()))
        .await;
    drop(listen);
    for (i, doc) in ["e", "f", "g", "h", "i", "j"].iter().enumerate() {
        exec(dsn, &set(doc, 10 + i as i64)).await;
    }
    observer
        .until(|s| shown(s).contains(&format!("CHANGE {coll}/j 5")))
        .await;
    drop(observer);
    let mut listen = Listen::open(&mut c).await;
    listen
        .add(resumed(query_target(PY, coll), &last.resume_token))
        .await;
    let (seen, last) = listen
        .until(|s| shown(s).contains(&format!("CURRENT {PY}")))
        .await;
    let seen = shown(&seen);
    let reset = format!("RESET {PY}");
    let filter = format!("FILTER {PY} 8");
    assert!(
        before(&seen, &reset, &format!("CHANGE {coll}/j {PY}")),
        "{seen:?}"
    );
    assert!(
        before(&seen, &format!("CHANGE {coll}/j {PY}"), &filter),
        "{seen:?}"
    );
    assert!(before(&seen, &filter, &format!("CURRENT {PY}")), "{seen:?}");

    // A token of a stream this sidecar does not know: the same.
    let mut other = Listen::open(&mut c).await;
    other
        .add(resumed(
            query_target(4, coll),
            b"0123abcd-1.0000000000000001",
        ))
        .await;
    let (seen, _) = other
        .until(|s| shown(s).contains(&"CURRENT 4".into()))
        .await;
    let seen = shown(&seen);
    assert!(before(&seen, "RESET 4", "FILTER 4 8"), "{seen:?}");
    drop(other);

    // read_time: monotonic under concurrent writers, and never below an update time sent
    // before it, also for a document whose update time is ahead of Postgres' commit time.
    exec(
        dsn,
        &format!(
            "select docstore.set('{coll}/ahead', '{{\"n\": 50}}'); \
             update docstore.entities set update_time = now() + interval '1 hour' \
             where database_id = '(default)' and path = '{coll}/ahead';"
        ),
    )
    .await;
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let dsn = dsn.to_owned();
            let coll = coll.to_owned();
            tokio::spawn(async move {
                for k in 0..20 {
                    exec(
                        &dsn,
                        &format!(
                            "select docstore.set('{coll}/w{w}_{k}', '{{\"n\": {}}}');",
                            100 + k
                        ),
                    )
                    .await;
                }
            })
        })
        .collect();
    let mut read = micros(last.read_time.as_ref().unwrap());
    let mut newest_update = 0;
    let mut written = std::collections::HashSet::new();
    while written.len() < 80 {
        let (batch, change) = listen.batch().await;
        for r in &batch {
            if let Some(wire::listen_response::ResponseType::DocumentChange(d)) = &r.response_type {
                let doc = d.document.as_ref().unwrap();
                newest_update = newest_update.max(micros(doc.update_time.as_ref().unwrap()));
                if doc.name.rsplit('/').next().unwrap().starts_with('w') {
                    written.insert(doc.name.clone());
                }
            }
        }
        let at = micros(change.read_time.as_ref().unwrap());
        assert!(at >= read, "read_time went back: {at} < {read}");
        assert!(
            at >= newest_update,
            "read_time {at} below an update time sent {newest_update}"
        );
        read = at;
    }
    for w in writers {
        w.await.unwrap();
    }
}
