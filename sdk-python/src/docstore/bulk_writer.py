"""BulkWriter (python-firestore's ``bulk_writer``): many independent writes sent in parallel,
each its own single-write ``:commit`` (not atomic together), failures reported per write.

``client.bulk_writer()`` returns one; ``create/set/update/delete`` enqueue, ``flush()`` waits
for everything enqueued, ``close()`` flushes and stops. Writes to the same document are sent in
the order they were enqueued. A failed write calls ``on_write_error(failure, bulk_writer)``:
True retries it (the default retries ABORTED and UNAVAILABLE up to 15 attempts in all). The
AsyncClient's bulk writer works the same way on a synchronous copy of the client, as in
python-firestore.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from docstore import base_batch
from docstore._types import WriteOption, WriteResult
from docstore.base_transaction import backoff
from docstore.exceptions import Aborted, DocstoreError, Unavailable

DEFAULT_MAX_RETRIES = 15


class SendMode(enum.Enum):
    """python-firestore's send modes; both send in parallel here, keeping per-document order."""

    parallel = "parallel"
    serial = "serial"


@dataclass
class BulkWriterOptions:
    """Options of a BulkWriter: ``max_workers`` parallel requests (``serial`` mode: 1)."""

    initial_ops_per_second: int = 500
    max_ops_per_second: int = 500
    mode: SendMode = SendMode.parallel
    retry: Any = None
    max_workers: int = 8


@dataclass
class BulkWriteFailure:
    """A write that failed: its ``operation`` (the enqueued write), ``code`` (canonical),
    ``message``, the ``error`` raised and how many ``attempts`` were made."""

    operation: Any
    code: str
    message: str
    error: DocstoreError
    attempts: int


@dataclass
class _Operation:
    reference: Any
    entries: list[dict[str, Any]]
    attempts: int = 0
    done: threading.Event = field(default_factory=threading.Event)


def _default_on_error(failure: BulkWriteFailure, bulk_writer: BulkWriter) -> bool:
    return (
        isinstance(failure.error, (Aborted, Unavailable)) and failure.attempts < DEFAULT_MAX_RETRIES
    )


class BulkWriter:
    """Independent writes sent in parallel (see the module docstring)."""

    def __init__(
        self, client: Any, options: BulkWriterOptions | None = None, *, _owns_client: bool = False
    ) -> None:
        self._client = client
        self._owns_client = _owns_client
        self._options = options or BulkWriterOptions()
        workers = 1 if self._options.mode is SendMode.serial else self._options.max_workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bulk-writer")
        self._lock = threading.Condition()
        self._pending = 0
        self._last_by_path: dict[str, _Operation] = {}
        self._closed = False
        self._on_write_result: Callable[[Any, WriteResult, BulkWriter], None] | None = None
        self._on_write_error: Callable[[BulkWriteFailure, BulkWriter], bool] = _default_on_error

    def on_write_result(self, callback: Callable[[Any, WriteResult, BulkWriter], None]) -> None:
        """Call ``callback(reference, write_result, bulk_writer)`` after each successful write."""
        self._on_write_result = callback

    def on_write_error(self, callback: Callable[[BulkWriteFailure, BulkWriter], bool]) -> None:
        """Call ``callback(failure, bulk_writer)`` after each failed attempt; True retries."""
        self._on_write_error = callback

    def create(self, reference: Any, document_data: dict[str, Any]) -> None:
        """Enqueue a create."""
        self._enqueue(reference, [base_batch.create_entry(reference.path, document_data)])

    def set(self, reference: Any, document_data: dict[str, Any], merge: Any = False) -> None:
        """Enqueue a set (``merge`` as in ``DocumentReference.set``)."""
        self._enqueue(reference, base_batch.set_entries(reference.path, document_data, merge))

    def update(
        self, reference: Any, field_updates: dict[str, Any], option: WriteOption | None = None
    ) -> None:
        """Enqueue an update."""
        self._enqueue(reference, [base_batch.update_entry(reference.path, field_updates, option)])

    def delete(self, reference: Any, option: WriteOption | None = None) -> None:
        """Enqueue a delete."""
        self._enqueue(reference, [base_batch.delete_entry(reference.path, option)])

    def _enqueue(self, reference: Any, entries: list[dict[str, Any]]) -> None:
        op = _Operation(reference, entries)
        with self._lock:
            if self._closed:
                raise RuntimeError("the BulkWriter is closed")
            self._pending += 1
            before = self._last_by_path.get(reference.path)
            self._last_by_path[reference.path] = op
        self._pool.submit(self._run, op, before)

    def _run(self, op: _Operation, before: _Operation | None) -> None:
        try:
            if before is not None:
                before.done.wait()
            self._send(op)
        finally:
            op.done.set()
            with self._lock:
                if self._last_by_path.get(op.reference.path) is op:
                    del self._last_by_path[op.reference.path]
                self._pending -= 1
                self._lock.notify_all()

    def _send(self, op: _Operation) -> None:
        while True:
            op.attempts += 1
            try:
                answer = self._client._commit(op.entries)
            except DocstoreError as error:
                failure = BulkWriteFailure(op, error.code, error.message, error, op.attempts)
                if self._on_write_error(failure, self):
                    time.sleep(backoff(op.attempts))
                    continue
                return
            _, results = base_batch.write_results(answer)
            if self._on_write_result is not None and results:
                self._on_write_result(op.reference, results[-1], self)
            return

    def flush(self) -> None:
        """Wait until every write enqueued so far has finished (succeeded or failed)."""
        with self._lock:
            while self._pending:
                self._lock.wait()

    def close(self) -> None:
        """Flush, then stop accepting writes."""
        self.flush()
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.shutdown(wait=True)
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> BulkWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
