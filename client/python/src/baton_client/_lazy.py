"""What the asyncio framework adapters share: the AsyncClient they use, given or made."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from baton_client._aio import AsyncClient


class LazyAsyncClient:
    """The :class:`AsyncClient` an adapter was given, or one it makes on first use from
    ``options`` (``server``, ``token``, ``ca_cert``, ``settings``, ...; else the ``baton``
    CLI's configuration).

    grpc.aio binds a channel to the event loop it was made in, so a made client is made
    again when a call comes from another loop (``asyncio.run`` per call, a framework's
    ``run_sync``). A given client is the caller's: used as is, never closed here.
    """

    def __init__(self, owner: str, client: AsyncClient | None, options: dict[str, Any]) -> None:
        if client is not None and options:
            raise TypeError(f"{owner}: pass a client or client options ({', '.join(sorted(options))}), not both")
        if client is not None and not isinstance(client, AsyncClient):
            raise TypeError(f"{owner}: client must be a baton_client.AsyncClient, not {type(client).__name__}")
        if client is None:
            try:
                inspect.signature(AsyncClient).bind(**options)
            except TypeError as e:
                raise TypeError(f"{owner}: {e} (the options are AsyncClient's)") from None
        self._given = client
        self._options = options
        self._own: AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> AsyncClient:
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        if self._own is None or self._loop is not loop:
            self._own = AsyncClient(**self._options)
            self._loop = loop
        return self._own

    async def aclose(self) -> None:
        """Closes the client made here (when it belongs to the running loop)."""
        own, self._own = self._own, None
        if own is not None and self._loop is asyncio.get_running_loop():
            await own.close()
