"""Closing the session when an ASGI server stops, through the ASGI lifespan protocol.

uvicorn (like other ASGI servers) ends a graceful stop by raising the signal it
caught again, with the default action: the process dies before any exit handler
runs. Before that it sends ``lifespan.shutdown``, which Django's application does
not handle. Wrap it::

    from django.core.asgi import get_asgi_application
    from django_simba.servers.asgi import SimbaLifespan

    application = SimbaLifespan(get_asgi_application())

Every scope but ``lifespan`` goes to the wrapped application unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class SimbaLifespan:
    """An ASGI application that answers the lifespan protocol and closes the session at shutdown."""

    def __init__(self, application: ASGIApp) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.application(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await asyncio.to_thread(_close_engine)
                await send({"type": "lifespan.shutdown.complete"})
                return


def _close_engine() -> None:
    from .termination import CLOSE_TIMEOUT, close_engine

    close_engine(CLOSE_TIMEOUT)
