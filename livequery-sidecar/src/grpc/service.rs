//! The RPCs of `google.firestore.v1.Firestore`. Each one authenticates its caller
//! ([`super::auth`]) and checks the names of its request ([`super::names`], with the
//! `google-cloud-resource-prefix`), in that order, then calls the operation. GetDocument and
//! BatchGetDocuments are served ([`super::documents`]); the others answer UNIMPLEMENTED with
//! their name (docs/grpc.md, "What is supported") until the transport-neutral service layer
//! carries their operations.

use std::pin::Pin;

use docstore_core::proto::DatabaseName;
use futures_util::Stream;
use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use tonic::{Request, Response, Status, Streaming};

use super::error::{invalid_argument, unimplemented};
use super::{auth, documents, names};
use crate::http::auth::Principal;
use crate::http::SharedState;

/// The answer stream of a server-streaming RPC.
pub type AnswerStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The Firestore service over the sidecar's state (its database pool and verifier).
#[derive(Clone)]
pub struct FirestoreService {
    state: SharedState,
    dev_mode: bool,
}

impl FirestoreService {
    /// The service; `dev_mode`: `Bearer owner` is the admin (`--dev-mode`).
    pub fn new(state: SharedState, dev_mode: bool) -> FirestoreService {
        FirestoreService { state, dev_mode }
    }

    /// The largest request message: `--max-body-bytes`, as for the HTTP API.
    pub fn max_message_bytes(&self) -> usize {
        self.state.max_body_bytes
    }

    /// The caller of `request`, then its database (from `name`, which parses the request's
    /// main name) checked against the resource prefix.
    fn admit<T>(
        &self,
        request: &Request<T>,
        name: impl FnOnce(&T) -> Result<DatabaseName, Status>,
    ) -> Result<(Principal, DatabaseName), Status> {
        let caller = auth::caller(&self.state.verifier, self.dev_mode, request.metadata())?;
        let db = name(request.get_ref())?;
        names::check_prefix(request.metadata(), &db)?;
        Ok((caller, db))
    }

    /// The caller of a client-streaming request (its names come with its messages).
    fn caller<T>(&self, request: &Request<T>) -> Result<Principal, Status> {
        auth::caller(&self.state.verifier, self.dev_mode, request.metadata())
    }
}

/// The database of a document name.
fn of_document(name: &str) -> Result<DatabaseName, Status> {
    names::document(name).map(|(db, _)| db)
}

/// The database of a parent.
fn of_parent(name: &str) -> Result<DatabaseName, Status> {
    names::parent(name).map(|(db, _)| db)
}

/// The database of a request naming its database and some documents: all in that database.
fn of_database_and_documents<'a>(
    database: &str,
    documents: impl IntoIterator<Item = &'a str>,
) -> Result<DatabaseName, Status> {
    let db = names::database(database)?;
    for name in documents {
        let (other, _) = names::document(name)?;
        if other.database != db.database {
            return Err(invalid_argument(format!(
                "document \"{name}\" is not in database \"{}\"",
                db.database
            )));
        }
    }
    Ok(db)
}

#[tonic::async_trait]
impl super::generated::firestore_server::Firestore for FirestoreService {
    async fn get_document(
        &self,
        request: Request<wire::GetDocumentRequest>,
    ) -> Result<Response<wire::Document>, Status> {
        let (caller, db) = self.admit(&request, |r| of_document(&r.name))?;
        let (_, path) = names::document(&request.get_ref().name)?;
        let doc =
            documents::get_document(&self.state, &caller, &db, &path, request.get_ref()).await?;
        Ok(Response::new(doc))
    }

    async fn list_documents(
        &self,
        request: Request<wire::ListDocumentsRequest>,
    ) -> Result<Response<wire::ListDocumentsResponse>, Status> {
        self.admit(&request, |r| of_parent(&r.parent))?;
        Err(unimplemented("ListDocuments"))
    }

    async fn update_document(
        &self,
        request: Request<wire::UpdateDocumentRequest>,
    ) -> Result<Response<wire::Document>, Status> {
        self.admit(&request, |r| match &r.document {
            Some(doc) => of_document(&doc.name),
            None => Err(invalid_argument("UpdateDocument needs a document")),
        })?;
        Err(unimplemented("UpdateDocument"))
    }

    async fn delete_document(
        &self,
        request: Request<wire::DeleteDocumentRequest>,
    ) -> Result<Response<()>, Status> {
        self.admit(&request, |r| of_document(&r.name))?;
        Err(unimplemented("DeleteDocument"))
    }

    type BatchGetDocumentsStream = AnswerStream<wire::BatchGetDocumentsResponse>;

    async fn batch_get_documents(
        &self,
        request: Request<wire::BatchGetDocumentsRequest>,
    ) -> Result<Response<Self::BatchGetDocumentsStream>, Status> {
        let (caller, db) = self.admit(&request, |r| {
            of_database_and_documents(&r.database, r.documents.iter().map(String::as_str))
        })?;
        let paths = request
            .get_ref()
            .documents
            .iter()
            .map(|name| names::document(name).map(|(_, path)| path))
            .collect::<Result<Vec<_>, _>>()?;
        let answers =
            documents::batch_get(&self.state, &caller, &db, paths, request.get_ref()).await?;
        let stream: Self::BatchGetDocumentsStream =
            Box::pin(futures_util::stream::iter(answers.into_iter().map(Ok)));
        Ok(Response::new(stream))
    }

    async fn begin_transaction(
        &self,
        request: Request<wire::BeginTransactionRequest>,
    ) -> Result<Response<wire::BeginTransactionResponse>, Status> {
        self.admit(&request, |r| names::database(&r.database))?;
        Err(unimplemented("BeginTransaction"))
    }

    async fn commit(
        &self,
        request: Request<wire::CommitRequest>,
    ) -> Result<Response<wire::CommitResponse>, Status> {
        self.admit(&request, |r| names::database(&r.database))?;
        Err(unimplemented("Commit"))
    }

    async fn rollback(
        &self,
        request: Request<wire::RollbackRequest>,
    ) -> Result<Response<()>, Status> {
        self.admit(&request, |r| names::database(&r.database))?;
        Err(unimplemented("Rollback"))
    }

    type RunQueryStream = AnswerStream<wire::RunQueryResponse>;

    async fn run_query(
        &self,
        request: Request<wire::RunQueryRequest>,
    ) -> Result<Response<Self::RunQueryStream>, Status> {
        self.admit(&request, |r| of_parent(&r.parent))?;
        Err(unimplemented("RunQuery"))
    }

    type ExecutePipelineStream = AnswerStream<wire::ExecutePipelineResponse>;

    async fn execute_pipeline(
        &self,
        request: Request<wire::ExecutePipelineRequest>,
    ) -> Result<Response<Self::ExecutePipelineStream>, Status> {
        self.admit(&request, |r| names::database(&r.database))?;
        Err(unimplemented("ExecutePipeline"))
    }

    type RunAggregationQueryStream = AnswerStream<wire::RunAggregationQueryResponse>;

    async fn run_aggregation_query(
        &self,
        request: Request<wire::RunAggregationQueryRequest>,
    ) -> Result<Response<Self::RunAggregationQueryStream>, Status> {
        self.admit(&request, |r| of_parent(&r.parent))?;
        Err(unimplemented("RunAggregationQuery"))
    }

    async fn partition_query(
        &self,
        request: Request<wire::PartitionQueryRequest>,
    ) -> Result<Response<wire::PartitionQueryResponse>, Status> {
        self.admit(&request, |r| of_parent(&r.parent))?;
        Err(unimplemented("PartitionQuery"))
    }

    type WriteStream = AnswerStream<wire::WriteResponse>;

    async fn write(
        &self,
        request: Request<Streaming<wire::WriteRequest>>,
    ) -> Result<Response<Self::WriteStream>, Status> {
        self.caller(&request)?;
        Err(unimplemented("Write"))
    }

    type ListenStream = AnswerStream<wire::ListenResponse>;

    async fn listen(
        &self,
        request: Request<Streaming<wire::ListenRequest>>,
    ) -> Result<Response<Self::ListenStream>, Status> {
        self.caller(&request)?;
        Err(unimplemented("Listen"))
    }

    async fn list_collection_ids(
        &self,
        request: Request<wire::ListCollectionIdsRequest>,
    ) -> Result<Response<wire::ListCollectionIdsResponse>, Status> {
        self.admit(&request, |r| of_parent(&r.parent))?;
        Err(unimplemented("ListCollectionIds"))
    }

    async fn batch_write(
        &self,
        request: Request<wire::BatchWriteRequest>,
    ) -> Result<Response<wire::BatchWriteResponse>, Status> {
        self.admit(&request, |r| names::database(&r.database))?;
        Err(unimplemented("BatchWrite"))
    }

    async fn create_document(
        &self,
        request: Request<wire::CreateDocumentRequest>,
    ) -> Result<Response<wire::Document>, Status> {
        self.admit(&request, |r| of_parent(&r.parent))?;
        Err(unimplemented("CreateDocument"))
    }
}
