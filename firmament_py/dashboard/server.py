"""Serving a board's page live (`DashboardServer`): a Bokeh server on its own thread and event
loop, each browser session redrawn from `Board.frame` about once a second.

It listens on loopback only (`address.parse_address`). The server never calls into the
driver: it reads frames from the board, so a slow or stalled browser holds up only its own
session.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import TYPE_CHECKING

from firmament_py.dashboard.address import DashboardError, parse_address
from firmament_py.dashboard.board import Board

if TYPE_CHECKING:
    from bokeh.document import Document
    from bokeh.server.server import Server

__all__ = ["DashboardError", "DashboardServer", "parse_address"]

DEFAULT_INTERVAL_MS = 1_000


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class DashboardServer:
    """Serves `board`'s page at `address` (see the module) until `stop`."""

    def __init__(
        self, board: Board, address: str = "127.0.0.1:0", *, interval_ms: int = DEFAULT_INTERVAL_MS
    ) -> None:
        self.board = board
        self.host, port = parse_address(address)
        self.port = port or _free_port(self.host)
        self.interval_ms = interval_ms
        self._server: Server | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="dashboard", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def start(self) -> DashboardServer:
        """Serve from now on; DashboardError if the address cannot be bound."""
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise DashboardError(f"dashboard at {self.url}: {self._failure}") from self._failure
        return self

    def stop(self) -> None:
        server = self._server
        if server is None:
            return
        self._server = None
        loop = server.io_loop

        def close() -> None:
            server.stop()
            loop.stop()

        loop.add_callback(close)
        self._thread.join(timeout=10)

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        from bokeh.application import Application
        from bokeh.application.handlers.function import FunctionHandler
        from bokeh.server.server import Server
        from tornado.ioloop import IOLoop

        try:
            asyncio.set_event_loop(asyncio.new_event_loop())
            origins = [f"{name}:{self.port}" for name in ("localhost", "127.0.0.1", self.host)]
            server = Server(
                {"/": Application(FunctionHandler(self._document))},
                io_loop=IOLoop.current(),
                address=self.host,
                port=self.port,
                allow_websocket_origin=origins,
            )
            server.start()
        except BaseException as error:  # an address in use, say: told to start()
            self._failure = error
            self._ready.set()
            return
        self._server = server
        self._ready.set()
        server.io_loop.start()

    def _document(self, document: Document) -> None:
        from firmament_py.dashboard.page import DashboardPage

        page = DashboardPage()
        page.update(self.board.frame())
        document.title = "firmament-py dashboard"
        document.add_root(page.layout)
        document.add_periodic_callback(lambda: page.update(self.board.frame()), self.interval_ms)
