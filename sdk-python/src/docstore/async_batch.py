"""AsyncWriteBatch of the AsyncClient (python-firestore's ``async_batch``)."""

from __future__ import annotations

from typing import Any

from docstore._types import WriteResult
from docstore.base_batch import BaseWriteBatch


class AsyncWriteBatch(BaseWriteBatch):
    """Writes applied atomically by ``await commit()`` (all or none)."""

    async def commit(self, **_: Any) -> list[WriteResult]:
        """Apply the writes; one WriteResult per write, in order."""
        entries, visible = self._entries()
        return self._finish(await self._client._commit(entries), visible)

    async def __aenter__(self) -> AsyncWriteBatch:
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            await self.commit()
