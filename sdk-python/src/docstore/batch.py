"""WriteBatch of the synchronous Client (python-firestore's ``batch``)."""

from __future__ import annotations

from typing import Any

from docstore._types import WriteResult
from docstore.base_batch import BaseWriteBatch


class WriteBatch(BaseWriteBatch):
    """Writes applied atomically by ``commit()`` (all or none)."""

    def commit(self, **_: Any) -> list[WriteResult]:
        """Apply the writes; one WriteResult per write, in order."""
        entries, visible = self._entries()
        return self._finish(self._client._commit(entries), visible)

    def __enter__(self) -> WriteBatch:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
