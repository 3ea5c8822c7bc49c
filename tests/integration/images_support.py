"""The images tests' stand-in upstreams: the simulator, and hosts that fail, refuse, answer too little,
too much or too late, each counting its calls in `hits`."""

from __future__ import annotations

import asyncio
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


async def _huge_generation(request: Request):
    hits["huge"] += 1
    return JSONResponse({"created": 1, "data": [{"b64_json": "A" * (7 * 1024 * 1024)}]})


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
])
