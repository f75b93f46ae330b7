"""The ``"local"`` model provider: a small open model served by ``llama-server`` on this machine.

Why this module exists: an agent should run with no account, key or network after a one-time download.
``"local"`` (SmolLM2-135M) and ``"local:qwen2.5-coder-0.5b"`` resolve to a ``LocalModel``; its first
``stream`` fetches and verifies the GGUF (``_local_files``), starts this process's ``llama-server`` for it
(``_local_server``) and then streams through the very same ``OpenAICompatibleModel`` adapter as any hosted
OpenAI-compatible provider. If the server dies, the request fails with a ``LocalServerError`` (a retryable
``ModelError``) and the next request starts a fresh server.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

from ._errors import ModelError
from ._events import ModelEvent
from ._local_catalog import LocalModelSpec, local_model_spec
from ._local_files import Downloader, Progress, ensure_model_file
from ._local_server import (
    LlamaServer,
    LlamaServerBinary,
    LocalServerError,
    find_llama_server,
    ready_server,
    server_for,
)
from ._pydantic_ai import OpenAICompatibleModel, require_extra
from ._types import ModelRequest

__all__ = ["LocalModel", "local_model"]

logger = logging.getLogger("ponder.models.local")


class LocalModel:
    """A ``ModelClient`` for a model from ponder's local catalog, served by a process-wide ``llama-server``.

    Construction is cheap and checks only that the server binary and the OpenAI SDK exist; the download
    (announced on stderr, with progress) and the server start happen on the first ``stream``, or on
    ``await model.start()`` / ``model.start_sync()`` when you want them up front.
    """

    def __init__(
        self,
        model: str | LocalModelSpec = "",
        *,
        binary: LlamaServerBinary | None = None,
        downloader: Downloader | None = None,
        progress: Progress | None = None,
    ) -> None:
        require_extra("openai", "local", "Local")
        self.spec = model if isinstance(model, LocalModelSpec) else local_model_spec(model)
        self.name = f"local:{self.spec.name}"
        self.binary = binary or find_llama_server()
        self._downloader = downloader
        self._progress = progress
        self._client: OpenAICompatibleModel | None = None
        self._client_key: tuple[str, str] | None = None
        self._stale: list[OpenAICompatibleModel] = []
        self._warned_tools = False

    def __repr__(self) -> str:
        return f"LocalModel({self.spec.name!r})"

    # -- the server ---------------------------------------------------------------------------------

    def model_path_sync(self) -> Path:
        """The verified GGUF, fetched first if needed (blocking)."""
        return ensure_model_file(self.spec, downloader=self._downloader, progress=self._progress)

    async def start(self) -> LlamaServer:
        """Fetch the model if needed and make sure this process's server for it is up and healthy."""
        server = ready_server(self.spec)
        if server is not None:
            return server
        path = await asyncio.to_thread(self.model_path_sync)
        server, _launched = server_for(self.spec, path, binary=self.binary)
        await server.wait_ready()
        return server

    def start_sync(self) -> LlamaServer:
        """``start`` for synchronous code (the CLI, benchmarks)."""
        server, _launched = server_for(self.spec, self.model_path_sync(), binary=self.binary)
        server.wait_ready_sync()
        return server

    def _client_for(self, server: LlamaServer) -> OpenAICompatibleModel:
        key = (server.base_url, server.api_key)
        if self._client is None or self._client_key != key:
            if self._client is not None:
                self._stale.append(self._client)
            self._client = OpenAICompatibleModel("local", base_url=server.base_url, api_key=server.api_key)
            self._client.name = self.name
            self._client_key = key
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP pools (the server keeps running for the other agents of this process)."""
        clients, self._stale = self._stale, []
        if self._client is not None:
            clients.append(self._client)
        self._client, self._client_key = None, None
        for client in clients:
            await client.aclose()

    # -- streaming ----------------------------------------------------------------------------------

    def _adapt(self, request: ModelRequest) -> ModelRequest:
        if request.tools and not self.spec.supports_tools:
            if not self._warned_tools:
                self._warned_tools = True
                logger.warning(
                    "local model %s cannot call tools; its requests are sent without the %d tool(s). "
                    "Use 'local:qwen2.5-coder-0.5b' for tool calls.",
                    self.spec.name,
                    len(request.tools),
                )
            return ModelRequest(system=request.system, messages=request.messages, settings=request.settings)
        return request

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self._stale:
            stale, self._stale = self._stale, []
            for old in stale:
                await old.aclose()
        server = await self.start()
        client = self._client_for(server)
        try:
            async for event in client.stream(self._adapt(request)):
                yield event
        except Exception as exc:
            if isinstance(exc, ModelError) and exc.status_code is not None:
                raise  # the server answered: it is alive
            if not await asyncio.to_thread(_has_exited, server):
                raise
            raise LocalServerError(
                f"{self.name}: the local model server (llama-server, pid {_pid(server)}) "
                f"{server.exit_description()} during the request; it is restarted on the next request "
                f"(log: {server.log_path})",
                retryable=True,
            ) from exc


def _pid(server: LlamaServer) -> str:
    return str(server.pid) if server.pid is not None else "?"


def _has_exited(server: LlamaServer, grace: float = 0.5) -> bool:
    """Whether the server process is gone, allowing a moment for a killed process to be reaped."""
    process = server.process
    if process is None:
        return True
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        return False
    return True


def local_model(model: str = "") -> LocalModel:
    """The provider factory behind ``"local"`` and ``"local:<name>"``."""
    return LocalModel(model)
