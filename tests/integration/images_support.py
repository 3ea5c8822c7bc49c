"""The images tests' stand-in upstreams: the simulator, and hosts that fail, refuse, answer too little,
too much or too late, each counting its calls in `hits`."""

from __future__ import annotations

import asyncio
import base64
import json
from collections import Counter

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from gateway_local.simulators import images as simulator

hits: Counter = Counter()


def _stand_in(name: str, status: int, message: str):
    async def answer(request: Request):
        hits[name] += 1
        return JSONResponse({"error": {"message": message, "type": "server_error", "param": None, "code": None}},
                            status_code=status)
    return [Route(path, answer, methods=["POST"]) for path in ("/v1/images/generations", "/v1/images/edits")]


async def _stingy_generation(request: Request):
    """Answers like the simulator, but with only the first image whatever `n` was."""
    hits["stingy"] += 1
    answer = json.loads((await simulator.generations(request)).body)
    return JSONResponse({**answer, "data": answer["data"][:1]})


# An image whose base64 makes an answer over Lambda's 6 MB buffered limit (about 7 MB).
HUGE_IMAGE = bytes(range(256)) * (5_300_000 // 256)


async def _huge_generation(request: Request):
    hits["huge"] += 1
    return JSONResponse({"created": 1, "data": [{"b64_json": base64.b64encode(HUGE_IMAGE).decode()}]})


async def _slow_failure(request: Request):
    """Fails (503) after a second: an error that comes after a kept-alive answer was committed."""
    hits["slow-down"] += 1
    await asyncio.sleep(1.0)
    return JSONResponse({"error": {"message": "upstream overloaded", "type": "server_error", "param": None,
                                   "code": None}}, status_code=503)


async def _slow_generation(request: Request):
    hits["slow"] += 1
    await asyncio.sleep(2.5)
    return await simulator.generations(request)


async def _counted(request: Request):
    hits["chat"] += 1
    return await simulator.generations(request)


UPSTREAMS = Starlette(routes=[
    Mount("/chat", routes=simulator.routes),
    Mount("/counted", routes=[Route("/v1/images/generations", _counted, methods=["POST"])]),
    Mount("/down", routes=_stand_in("down", 503, "upstream overloaded")),
    Mount("/refuses", routes=_stand_in("refuses", 400, "your prompt was refused by the safety system")),
    Mount("/wrong-key", routes=_stand_in("wrong-key", 401, "incorrect API key provided")),
    Mount("/stingy", routes=[Route("/v1/images/generations", _stingy_generation, methods=["POST"])]),
    Mount("/huge", routes=[Route("/v1/images/generations", _huge_generation, methods=["POST"])]),
    Mount("/slow", routes=[Route("/v1/images/generations", _slow_generation, methods=["POST"])]),
    Mount("/slow-down", routes=[Route("/v1/images/generations", _slow_failure, methods=["POST"])]),
])
