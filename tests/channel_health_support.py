"""Fake OpenAI-style upstreams that fail on command, one per name under its own path
(`{url}/{name}/v1/...`): `ok`, or any status with its headers. Each counts its chat attempts and
its probes (model lists); any other path (a task protocol's) answers the failure, else 404.
Served over real HTTP by the tests (`serve_asgi`)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


class FakeUpstreams:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modes: dict[str, tuple[int, dict[str, str]]] = {}
        self.attempts: Counter[str] = Counter()
        self.probes: Counter[str] = Counter()
        self.app = Starlette(routes=[
            Route("/{name}/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/{name}/v1/models", self._models, methods=["GET"]),
            Route("/{name}/{rest:path}", self._other, methods=["GET", "POST"]),  # a task protocol's calls
        ])

    def answer(self, name: str, status: int = 200, **headers: str) -> None:
        """From now on, `name` answers with `status` (200: a real answer) and these headers."""
        with self._lock:
            self._modes[name] = (status, {k.replace("_", "-"): v for k, v in headers.items()})

    def _failure(self, name: str) -> JSONResponse | None:
        status, headers = self._modes.get(name, (200, {}))
        if status == 200:
            return None
        code = "invalid_api_key" if status == 401 else "server_error"
        return JSONResponse({"error": {"message": f"{name} answers {status} as told", "type": "error",
                                       "code": code}}, status_code=status, headers=headers)

    async def _chat(self, request: Request) -> JSONResponse:
        name = request.path_params["name"]
        with self._lock:
            self.attempts[name] += 1
        body: dict[str, Any] = await request.json()
        failed = self._failure(name)
        if failed is not None:
            return failed
        return JSONResponse({
            "id": f"chatcmpl-{name}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model"), "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": f"served by {name}"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})

    async def _models(self, request: Request) -> JSONResponse:
        name = request.path_params["name"]
        with self._lock:
            self.probes[name] += 1
        return self._failure(name) or JSONResponse({"object": "list", "data": [{"id": "m-small", "object": "model"}]})


    async def _other(self, request: Request) -> JSONResponse:
        return self._failure(request.path_params["name"]) or JSONResponse({"error": "no such task"}, status_code=404)


def channels_document(url: str, spare_base: str | None = None) -> str:
    """Two chat channels for m-small: `main` (preferred) and `spare` (at `spare_base`, else a fake)."""
    return (f"channels:\n"
            f"  - {{name: main, protocol: chat, base_url: '{url}/main', api_key: sk-main, models: [m-small],"
            f" priority: 1}}\n"
            f"  - {{name: spare, protocol: chat, base_url: '{spare_base or url + '/spare'}', api_key: sk-spare,"
            f" models: [m-small]}}\n")
