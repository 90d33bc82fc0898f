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
from docstore.async_batch import AsyncWriteBatch
from docstore.async_client import AsyncClient
from docstore.async_collection import AsyncCollectionReference
from docstore.async_document import AsyncDocumentReference
from docstore.async_query import AsyncCollectionGroup, AsyncQuery
from docstore.async_transaction import AsyncTransaction, async_transactional
from docstore.base_document import DocumentSnapshot
from docstore.batch import WriteBatch
from docstore.bulk_writer import BulkWriteFailure, BulkWriter, BulkWriterOptions, SendMode
from docstore.client import Client
from docstore.collection import CollectionReference
from docstore.document import DocumentReference
from docstore.field_path import FieldPath
from docstore.query import CollectionGroup, Query
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

__version__ = "0.2.0"

__all__ = [
    "ArrayRemove",
    "ArrayUnion",
    "AsyncClient",
    "AsyncCollectionGroup",
    "AsyncCollectionReference",
    "AsyncDocumentReference",
    "AsyncQuery",
    "AsyncTransaction",
    "AsyncWriteBatch",
    "BulkWriteFailure",
    "BulkWriter",
    "BulkWriterOptions",
    "Client",
    "CollectionGroup",
    "CollectionReference",
    "DELETE_FIELD",
    "DocumentReference",
    "DocumentSnapshot",
    "ExistsOption",
    "FieldPath",
    "GeoPoint",
    "Increment",
    "LastUpdateOption",
    "Maximum",
    "Minimum",
    "Query",
    "SERVER_TIMESTAMP",
    "SendMode",
    "Transaction",
    "Vector",
    "WriteBatch",
    "WriteOption",
    "WriteResult",
    "async_transactional",
    "exceptions",
    "transactional",
]
