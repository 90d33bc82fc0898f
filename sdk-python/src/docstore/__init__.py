"""docstore: the Python SDK of pg_docstore, shaped like google-cloud-firestore.

Port a python-firestore app by changing its import (``from google.cloud import firestore`` ->
``import docstore as firestore``) and the client construction (``docstore.Client(url,
token=...)``). See sdk-python/README.md and docs/sdk-python.md.
"""

from docstore import exceptions
from docstore._types import (
    ExistsOption,
    GeoPoint,
    LastUpdateOption,
    Vector,
    WriteOption,
    WriteResult,
)
from docstore.aggregation import AggregationQuery
from docstore.async_aggregation import AsyncAggregationQuery
from docstore.async_batch import AsyncWriteBatch
from docstore.async_client import AsyncClient
from docstore.async_collection import AsyncCollectionReference
from docstore.async_document import AsyncDocumentReference
from docstore.async_query import AsyncCollectionGroup, AsyncQuery
from docstore.async_transaction import AsyncTransaction, async_transactional
from docstore.base_aggregation import (
    AggregationResult,
    AvgAggregation,
    CountAggregation,
    SumAggregation,
)
from docstore.base_document import DocumentSnapshot
from docstore.base_query import And, FieldFilter, Or
from docstore.batch import WriteBatch
from docstore.bulk_writer import BulkWriteFailure, BulkWriter, BulkWriterOptions, SendMode
from docstore.client import Client
from docstore.collection import CollectionReference
from docstore.document import DocumentReference
from docstore.field_path import FieldPath
from docstore.query import CollectionGroup, Query
from docstore.sql import AsyncSqlQuery, SqlQuery
from docstore.transaction import Transaction, transactional
from docstore.transforms import (
    DELETE_FIELD,
    SERVER_TIMESTAMP,
    ArrayRemove,
    ArrayUnion,
    Increment,
    Maximum,
    Minimum,
)
from docstore.watch import ChangeType, DocumentChange, QuerySnapshot, Watch

__version__ = "0.2.0"

__all__ = [
    "AggregationQuery",
    "AggregationResult",
    "And",
    "ArrayRemove",
    "ArrayUnion",
    "AsyncAggregationQuery",
    "AsyncClient",
    "AsyncCollectionGroup",
    "AsyncCollectionReference",
    "AsyncDocumentReference",
    "AsyncQuery",
    "AsyncSqlQuery",
    "AsyncTransaction",
    "AsyncWriteBatch",
    "AvgAggregation",
    "BulkWriteFailure",
    "BulkWriter",
    "BulkWriterOptions",
    "ChangeType",
    "Client",
    "CollectionGroup",
    "CollectionReference",
    "CountAggregation",
    "DELETE_FIELD",
    "DocumentChange",
    "DocumentReference",
    "DocumentSnapshot",
    "ExistsOption",
    "FieldFilter",
    "FieldPath",
    "GeoPoint",
    "Increment",
    "LastUpdateOption",
    "Maximum",
    "Minimum",
    "Or",
    "Query",
    "QuerySnapshot",
    "SERVER_TIMESTAMP",
    "SendMode",
    "SqlQuery",
    "SumAggregation",
    "Transaction",
    "Vector",
    "Watch",
    "WriteBatch",
    "WriteOption",
    "WriteResult",
    "async_transactional",
    "exceptions",
    "transactional",
]
