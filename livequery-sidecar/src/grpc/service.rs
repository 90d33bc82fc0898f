//! The RPCs of `google.firestore.v1.Firestore`. Each one authenticates its caller
//! ([`super::auth`]) and checks the names of its request ([`super::names`], with the
//! `google-cloud-resource-prefix`), in that order, then calls the operation of the service
//! layer: GetDocument and BatchGetDocuments ([`super::documents`]), Commit and the
//! single-document writes and BatchWrite ([`super::commit`]), RunQuery and RunAggregationQuery ([`super::query`]),
//! ListCollectionIds and ListDocuments ([`super::collections`]), BeginTransaction and Rollback
//! ([`super::transactions`]), Listen ([`super::listen`]); the others answer UNIMPLEMENTED
//! with their name
//! (docs/grpc.md, "What is supported").

use std::pin::Pin;

use docstore_core::proto::DatabaseName;
use docstore_core::ResourcePath;
use futures_util::Stream;
use googleapis_tonic_google_firestore_v1::google::firestore::v1 as wire;
use tonic::{Request, Response, Status, Streaming};

use super::encoded::Encoded;
use super::error::{from_service, invalid_argument, unimplemented};
use super::{auth, collections, commit, documents, listen, names, query, transactions};
use std::sync::Arc;

use crate::service::caller::Caller;
use crate::service::databases;
use crate::service::Service;

/// The answer stream of a server-streaming RPC.
pub type AnswerStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// Firestore's gRPC service over the sidecar's operations ([`Service`]).
#[derive(Clone)]
pub struct FirestoreService {
    service: Arc<Service>,
    max_message_bytes: usize,
    dev_mode: bool,
}

impl FirestoreService {
    /// The service; `max_message_bytes`: the largest request message (`--max-body-bytes`, as
    /// for the HTTP API); `dev_mode`: `Bearer owner` is the admin (`--dev-mode`).
    pub fn new(
        service: Arc<Service>,
        max_message_bytes: usize,
        dev_mode: bool,
    ) -> FirestoreService {
        FirestoreService {
            service,
            max_message_bytes,
            dev_mode,
        }
    }

    /// The largest request message.
    pub fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// The caller of `request`, then its database (from `name`, which parses the request's
    /// main name) checked against the resource prefix.
    async fn admit<T: Sync>(
        &self,
        rpc: &str,
        request: &Request<T>,
        name: impl FnOnce(&T) -> Result<DatabaseName, Status>,
    ) -> Result<(Caller, DatabaseName), Status> {
        self.admit_named(rpc, request, |r| name(r).map(|db| (db, ())))
            .await
            .map(|(caller, db, ())| (caller, db))
    }

    /// [`Self::admit`] with what `name` parsed besides the database (a document's path), so
    /// that the request's main name is parsed once.
    async fn admit_named<T: Sync, P>(
        &self,
        rpc: &str,
        request: &Request<T>,
        name: impl FnOnce(&T) -> Result<(DatabaseName, P), Status>,
    ) -> Result<(Caller, DatabaseName, P), Status> {
        // A unary request's message is Sync: its metadata is read in place, not copied.
        let caller = auth::caller(
            &self.service.verifier,
            self.dev_mode,
            request.metadata(),
            rpc,
        )
        .await?;
        let (db, parsed) = name(request.get_ref())?;
        names::check_prefix(request.metadata(), &db)?;
        if self.dev_mode {
            databases::create_on_first_use(&self.service, &db.database)
                .await
                .map_err(from_service)?;
        }
        Ok((caller, db, parsed))
    }

    /// The caller of a client-streaming request (its names come with its messages).
    async fn caller<T>(&self, rpc: &str, request: &Request<T>) -> Result<Caller, Status> {
        let metadata = request.metadata().clone();
        auth::caller(&self.service.verifier, self.dev_mode, &metadata, rpc).await
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

/// The database of a request naming its database and some documents, all in that database,
/// and the documents' paths.
fn database_and_documents(
    database: &str,
    documents: &[String],
) -> Result<(DatabaseName, Vec<ResourcePath>), Status> {
    let db = names::database(database)?;
    let paths = documents
        .iter()
        .map(|name| {
            let (other, path) = names::document(name)?;
            if other.database != db.database {
                return Err(invalid_argument(format!(
                    "document \"{name}\" is not in database \"{}\"",
                    db.database
                )));
            }
            Ok(path)
        })
        .collect::<Result<_, _>>()?;
    Ok((db, paths))
}

#[tonic::async_trait]
impl super::generated::firestore_server::Firestore for FirestoreService {
    async fn get_document(
        &self,
        request: Request<wire::GetDocumentRequest>,
    ) -> Result<Response<Encoded>, Status> {
        let (caller, db, path) = self
            .admit_named("GetDocument", &request, |r| names::document(&r.name))
            .await?;
        let doc =
            documents::get_document_encoded(&self.service, &caller, &db, &path, request.get_ref())
                .await?;
        Ok(Response::new(doc))
    }

    async fn list_documents(
        &self,
        request: Request<wire::ListDocumentsRequest>,
    ) -> Result<Response<wire::ListDocumentsResponse>, Status> {
        let (caller, db, parent) = self
            .admit_named("ListDocuments", &request, |r| names::parent(&r.parent))
            .await?;
        let answer = collections::list_documents(
            &self.service,
            &caller,
            &db,
            parent.as_ref(),
            request.get_ref(),
        )
        .await?;
        Ok(Response::new(answer))
    }

    async fn update_document(
        &self,
        request: Request<wire::UpdateDocumentRequest>,
    ) -> Result<Response<wire::Document>, Status> {
        let (caller, db, path) = self
            .admit_named("UpdateDocument", &request, |r| match &r.document {
                Some(doc) => names::document(&doc.name),
                None => Err(invalid_argument("UpdateDocument needs a document")),
            })
            .await?;
        let r = request.into_inner();
        let Some(doc) = r.document else {
            return Err(invalid_argument("UpdateDocument needs a document"));
        };
        let write = wire::Write {
            operation: Some(wire::write::Operation::Update(doc)),
            update_mask: r.update_mask,
            update_transforms: Vec::new(),
            current_document: r.current_document,
        };
        commit::commit(&self.service, &caller, &db, &[write]).await?;
        let get = wire::GetDocumentRequest {
            name: db.document_name(&path),
            mask: r.mask,
            consistency_selector: None,
        };
        let doc = documents::get_document(&self.service, &caller, &db, &path, &get).await?;
        Ok(Response::new(doc))
    }

    async fn delete_document(
        &self,
        request: Request<wire::DeleteDocumentRequest>,
    ) -> Result<Response<()>, Status> {
        let (caller, db) = self
            .admit("DeleteDocument", &request, |r| of_document(&r.name))
            .await?;
        let r = request.into_inner();
        let write = wire::Write {
            operation: Some(wire::write::Operation::Delete(r.name)),
            update_mask: None,
            update_transforms: Vec::new(),
            current_document: r.current_document,
        };
        commit::commit(&self.service, &caller, &db, &[write]).await?;
        Ok(Response::new(()))
    }

    type BatchGetDocumentsStream = AnswerStream<Encoded>;

    async fn batch_get_documents(
        &self,
        request: Request<wire::BatchGetDocumentsRequest>,
    ) -> Result<Response<Self::BatchGetDocumentsStream>, Status> {
        let (caller, db, paths) = self
            .admit_named("BatchGetDocuments", &request, |r| {
                database_and_documents(&r.database, &r.documents)
            })
            .await?;
        let answers =
            documents::batch_get(&self.service, &caller, &db, paths, request.get_ref()).await?;
        let stream: Self::BatchGetDocumentsStream =
            Box::pin(futures_util::stream::iter(answers.into_iter().map(Ok)));
        Ok(Response::new(stream))
    }

    async fn begin_transaction(
        &self,
        request: Request<wire::BeginTransactionRequest>,
    ) -> Result<Response<wire::BeginTransactionResponse>, Status> {
        let (caller, db) = self
            .admit("BeginTransaction", &request, |r| {
                names::database(&r.database)
            })
            .await?;
        let options = request.get_ref().options.as_ref();
        let transaction = transactions::begin(&self.service, &caller, &db, options).await?;
        Ok(Response::new(wire::BeginTransactionResponse {
            transaction,
        }))
    }

    async fn commit(
        &self,
        request: Request<wire::CommitRequest>,
    ) -> Result<Response<wire::CommitResponse>, Status> {
        let (caller, db) = self
            .admit("Commit", &request, |r| names::database(&r.database))
            .await?;
        let r = request.into_inner();
        let transaction = (!r.transaction.is_empty())
            .then(|| crate::service::transactions::text_of_bytes(&r.transaction));
        let committed = commit::commit_in(
            &self.service,
            &caller,
            &db,
            &r.writes,
            transaction.as_deref(),
        )
        .await?;
        Ok(Response::new(wire::CommitResponse {
            write_results: committed.write_results,
            commit_time: Some(committed.commit_time),
        }))
    }

    async fn rollback(
        &self,
        request: Request<wire::RollbackRequest>,
    ) -> Result<Response<()>, Status> {
        let (caller, db) = self
            .admit("Rollback", &request, |r| names::database(&r.database))
            .await?;
        transactions::rollback(&self.service, &caller, &db, &request.get_ref().transaction).await?;
        Ok(Response::new(()))
    }

    type RunQueryStream = AnswerStream<wire::RunQueryResponse>;

    async fn run_query(
        &self,
        request: Request<wire::RunQueryRequest>,
    ) -> Result<Response<Self::RunQueryStream>, Status> {
        let (caller, db, parent) = self
            .admit_named("RunQuery", &request, |r| names::parent(&r.parent))
            .await?;
        let answers = query::run_query(
            &self.service,
            &caller,
            &db,
            parent.as_ref(),
            request.get_ref(),
        )
        .await?;
        let stream: Self::RunQueryStream =
            Box::pin(futures_util::stream::iter(answers.into_iter().map(Ok)));
        Ok(Response::new(stream))
    }

    type ExecutePipelineStream = AnswerStream<wire::ExecutePipelineResponse>;

    async fn execute_pipeline(
        &self,
        request: Request<wire::ExecutePipelineRequest>,
    ) -> Result<Response<Self::ExecutePipelineStream>, Status> {
        self.admit("ExecutePipeline", &request, |r| {
            names::database(&r.database)
        })
        .await?;
        Err(unimplemented("ExecutePipeline"))
    }

    type RunAggregationQueryStream = AnswerStream<wire::RunAggregationQueryResponse>;

    async fn run_aggregation_query(
        &self,
        request: Request<wire::RunAggregationQueryRequest>,
    ) -> Result<Response<Self::RunAggregationQueryStream>, Status> {
        let (caller, db, parent) = self
            .admit_named("RunAggregationQuery", &request, |r| {
                names::parent(&r.parent)
            })
            .await?;
        let answer = query::run_aggregation_query(
            &self.service,
            &caller,
            &db,
            parent.as_ref(),
            request.get_ref(),
        )
        .await?;
        let stream: Self::RunAggregationQueryStream =
            Box::pin(futures_util::stream::iter([Ok(answer)]));
        Ok(Response::new(stream))
    }

    async fn partition_query(
        &self,
        request: Request<wire::PartitionQueryRequest>,
    ) -> Result<Response<wire::PartitionQueryResponse>, Status> {
        self.admit("PartitionQuery", &request, |r| of_parent(&r.parent))
            .await?;
        Err(unimplemented("PartitionQuery"))
    }

    type WriteStream = AnswerStream<wire::WriteResponse>;

    async fn write(
        &self,
        request: Request<Streaming<wire::WriteRequest>>,
    ) -> Result<Response<Self::WriteStream>, Status> {
        self.caller("Write", &request).await?;
        Err(unimplemented("Write"))
    }

    type ListenStream = AnswerStream<wire::ListenResponse>;

    async fn listen(
        &self,
        request: Request<Streaming<wire::ListenRequest>>,
    ) -> Result<Response<Self::ListenStream>, Status> {
        let mut caller = self.caller("Listen", &request).await?;
        // The per-caller stream cap of anonymous callers counts by client address.
        caller.peer = request.remote_addr().map(|a| a.ip());
        let metadata = request.metadata().clone();
        let answers = listen::listen(&self.service, caller, metadata, request.into_inner())?;
        let stream: Self::ListenStream = Box::pin(futures_util::stream::unfold(
            answers,
            |mut answers| async move { answers.recv().await.map(|a| (a, answers)) },
        ));
        Ok(Response::new(stream))
    }

    async fn list_collection_ids(
        &self,
        request: Request<wire::ListCollectionIdsRequest>,
    ) -> Result<Response<wire::ListCollectionIdsResponse>, Status> {
        let (caller, db, parent) = self
            .admit_named("ListCollectionIds", &request, |r| names::parent(&r.parent))
            .await?;
        let answer = collections::list_collection_ids(
            &self.service,
            &caller,
            &db,
            parent.as_ref(),
            request.get_ref(),
        )
        .await?;
        Ok(Response::new(answer))
    }

    async fn batch_write(
        &self,
        request: Request<wire::BatchWriteRequest>,
    ) -> Result<Response<wire::BatchWriteResponse>, Status> {
        let (caller, db) = self
            .admit("BatchWrite", &request, |r| names::database(&r.database))
            .await?;
        let answer =
            commit::batch_write(&self.service, &caller, &db, &request.get_ref().writes).await?;
        Ok(Response::new(answer))
    }

    async fn create_document(
        &self,
        request: Request<wire::CreateDocumentRequest>,
    ) -> Result<Response<wire::Document>, Status> {
        let (caller, db) = self
            .admit("CreateDocument", &request, |r| of_parent(&r.parent))
            .await?;
        let r = request.into_inner();
        let id = if r.document_id.is_empty() {
            random_id()?
        } else {
            r.document_id
        };
        let name = format!("{}/{}/{id}", r.parent, r.collection_id);
        let (_, path) = names::document(&name)?;
        let mut doc = r.document.unwrap_or_default();
        doc.name = db.document_name(&path);
        let write = wire::Write {
            operation: Some(wire::write::Operation::Update(doc)),
            update_mask: None,
            update_transforms: Vec::new(),
            current_document: Some(wire::Precondition {
                condition_type: Some(wire::precondition::ConditionType::Exists(false)),
            }),
        };
        commit::commit(&self.service, &caller, &db, &[write]).await?;
        let get = wire::GetDocumentRequest {
            name: db.document_name(&path),
            mask: r.mask,
            consistency_selector: None,
        };
        let doc = documents::get_document(&self.service, &caller, &db, &path, &get).await?;
        Ok(Response::new(doc))
    }
}

/// A random document id: 20 characters of `[A-Za-z0-9]`, as Firestore's (bytes past the
/// largest multiple of 62 are dropped, so every character is equally likely).
///
/// # Errors
/// UNAVAILABLE when the system has no randomness to give.
fn random_id() -> Result<String, Status> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut id = String::with_capacity(20);
    while id.len() < 20 {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| Status::unavailable(format!("no randomness for a document id: {e}")))?;
        id.extend(
            bytes
                .iter()
                .filter(|b| usize::from(**b) < 62 * 4)
                .map(|b| char::from(ALPHABET[usize::from(*b) % 62]))
                .take(20 - id.len()),
        );
    }
    Ok(id)
}
