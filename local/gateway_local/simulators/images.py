"""Simulated image endpoints of the chat protocol (dev-only).

`routes` is meant to be mounted inside the chat-protocol simulator (under `/chat`), so the
paths here are relative to it: `POST /v1/images/generations`, `POST /v1/images/edits` and
`GET /files/{name}` for the URLs it hands out. `app` runs them standalone.

Answers carry real PNG images (written with zlib and struct), whose colour is derived from the
prompt, so equal requests give equal pictures and tests can tell answers apart: 64x64, except an
iota edit, which answers pictures of the size asked (`auto`: the first image's, else 1024x1024).
An iota edit takes its images as `image`, repeated `image` or `image[]`, and an optional `mask`
that must be a PNG with alpha of the first image's size; it reports 258 image tokens per input
image (and mask) in `usage.input_tokens_details.image_tokens`.
URLs are absolute, built from the request's own base URL and mount path, and served here for
60 minutes (the spec's URL lifetime).

Like the real upstream it wants `Authorization: Bearer <anything non-empty>` and answers errors
in the chat envelope. A prompt containing `#fault=<status>` makes it fail on purpose:
`#fault=500` answers 500, `#fault=429` answers 429 with `Retry-After`. A prompt containing
`#delay=<seconds>` (up to 900) answers that much later, as a real generation takes its time: tens
of seconds to minutes per image (https://docs.apiyi.com/en/live/2026-05/gpt-image-2-all-speed.md
reports about 80 s per gpt-image-2 image), past the 29 s a buffered API Gateway integration waits.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import struct
import threading
import time
import uuid
import zlib
from collections import OrderedDict
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.errors import InvalidRequest
from gateway.imagetypes import detect_image_type, image_dimensions, png_has_alpha
from gateway.multipart import parse_multipart

IMAGE_SIDE = 64
URL_LIFETIME_SECONDS = 60 * 60
_FILES_KEPT = 512  # enough for any test run; the oldest are dropped first
_FAULT = re.compile(r"#fault=([45][0-9]{2})")
_DELAY = re.compile(r"#delay=([0-9]{1,3}(?:\.[0-9]+)?)")
MAX_DELAY_SECONDS = 900.0
_OUTPUT_TOKENS = {"low": 272, "medium": 1056, "high": 4160, "auto": 1056}
_IOTA_EDIT_SIZES = {"1024x1024": (1024, 1024), "1024x1536": (1024, 1536), "1536x1024": (1536, 1024)}
IMAGE_TOKENS_PER_INPUT = 258


def _gpt_image_fields(kind: str) -> frozenset[str]:
    """The fields the images API defines for a generation or an edit: openai-python's request
    types (`ImageGenerateParams`, `ImageEditParams`), read from the installed SDK."""
    from openai.types import image_edit_params, image_generate_params

    params = image_generate_params.ImageGenerateParamsBase if kind == "generate" \
        else image_edit_params.ImageEditParamsBase
    return frozenset(params.__annotations__) | ({"image[]"} if kind == "edit" else frozenset())


def _gpt_image_unknown_field(fields: Any, kind: str) -> Response | None:
    """A field the API does not define is a 400 "Unknown parameter", as the API answers one."""
    unknown = sorted(set(fields) - _gpt_image_fields(kind))
    if unknown:
        return _error(400, f"Unknown parameter: '{unknown[0]}'.", param=unknown[0], code="unknown_parameter")
    return None


def _gpt_image_refuses_response_format(fields: Any) -> Response | None:
    """gpt-image models always answer b64_json and refuse the field itself: OpenAI's images API
    reference ("response_format ... This parameter isn't supported for gpt-image-1 which will
    always return base64-encoded images") and openai-python's `ImageGenerateParams` /
    `ImageEditParams` docstrings say so; the live API answers 400 "Unknown parameter:
    'response_format'." with code `unknown_parameter`."""
    if "response_format" in fields:
        return _error(400, "Unknown parameter: 'response_format'.", param="response_format",
                      code="unknown_parameter")
    return None


# --- PNG -------------------------------------------------------------------------------------

def _chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def png_image(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A truecolour PNG of one colour with a darker diagonal, so it is visibly a picture."""
    shade = bytes(c // 2 for c in rgb)
    fill = bytes(rgb) * width
    rows = []
    for y in range(height):
        row = bytearray(fill)
        low, high = max(y - 2, 0), min(y + 3, width)  # the pixels with |x - y| < 3
        if low < high:
            row[3 * low:3 * high] = shade * (high - low)
        rows.append(b"\x00" + bytes(row))  # filter type 0 (None) for every scanline
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(b"".join(rows))) + _chunk(b"IEND", b""))


def picture_for(*seeds: object) -> bytes:
    digest = hashlib.sha256("\x1f".join(str(s) for s in seeds).encode()).digest()
    return png_image(IMAGE_SIDE, IMAGE_SIDE, (digest[0], digest[1], digest[2]))


# --- served files ----------------------------------------------------------------------------

_files: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
_files_lock = threading.Lock()  # uvicorn in a thread and the tests may touch it concurrently


def _store(data: bytes) -> str:
    name = f"{uuid.uuid4().hex}.png"
    with _files_lock:
        _files[name] = (time.monotonic() + URL_LIFETIME_SECONDS, data)
        while len(_files) > _FILES_KEPT:
            _files.popitem(last=False)
    return name


def _file_url(request: Request, name: str) -> str:
    # root_path holds the mount path (e.g. /chat), which request.base_url leaves out.
    root = request.scope.get("root_path", "").rstrip("/")
    return str(request.url.replace(path=f"{root}/files/{name}", query=""))


# --- answers ---------------------------------------------------------------------------------

def _error(status: int, message: str, *, type_: str = "invalid_request_error", param: str | None = None,
           code: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": type_, "param": param, "code": code}},
                        status_code=status, headers=headers)


def _unauthorized(request: Request) -> JSONResponse | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return _error(401, "missing or malformed bearer token", code="invalid_api_key")
    return None


def _fault(prompt: str) -> JSONResponse | None:
    match = _FAULT.search(prompt)
    if not match:
        return None
    status = int(match.group(1))
    if status == 429:
        return _error(429, "simulated rate limit", type_="rate_limit_error", code="rate_limit_exceeded",
                      headers={"Retry-After": "1"})
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return _error(status, f"simulated failure {status}", type_=kind)


async def _take_time(prompt: str) -> None:
    """The generation's time: `#delay=<seconds>` in the prompt, else none."""
    match = _DELAY.search(prompt)
    if match:
        await asyncio.sleep(min(float(match.group(1)), MAX_DELAY_SECONDS))


def _count(value: Any, default: int = 1) -> int | None:
    if value is None:
        return default
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10:
        return None
    return value


def _usage(prompt: str, output_tokens: int, image_tokens: int = 0) -> dict[str, Any]:
    text_tokens = max(1, len(prompt) // 4)
    return {"total_tokens": text_tokens + image_tokens + output_tokens,
            "input_tokens": text_tokens + image_tokens, "output_tokens": output_tokens,
            "input_tokens_details": {"text_tokens": text_tokens, "image_tokens": image_tokens}}


def _item(request: Request, data: bytes, response_format: str) -> dict[str, str]:
    if response_format == "b64_json":
        return {"b64_json": base64.b64encode(data).decode("ascii")}
    return {"url": _file_url(request, _store(data))}


async def generations(request: Request) -> Response:
    if (denied := _unauthorized(request)) is not None:
        return denied
    try:
        body = json.loads(await request.body())
    except ValueError:
        return _error(400, "request body is not valid JSON")
    if not isinstance(body, dict):
        return _error(400, "request body must be a JSON object")
    model, prompt = body.get("model"), body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return _error(400, "prompt is required", param="prompt")
    if (failed := _fault(prompt)) is not None:
        return failed
    await _take_time(prompt)
    n = _count(body.get("n"))
    if n is None:
        return _error(400, "n must be an integer from 1 to 10", param="n")
    created = int(time.time())
    if isinstance(model, str) and model.startswith("iota-"):
        if (refused := _gpt_image_refuses_response_format(body) or _gpt_image_unknown_field(body, "generate")):
            return refused
        quality = body.get("quality") or "auto"
        pictures = [picture_for(model, prompt, i) for i in range(n)]
        return JSONResponse({"created": created, "data": [_item(request, p, "b64_json") for p in pictures],
                             "usage": _usage(prompt, _OUTPUT_TOKENS.get(quality, 1056) * n)})
    if isinstance(model, str) and model.startswith("theta-"):
        response_format = body.get("response_format") or "url"
        if response_format not in ("url", "b64_json"):
            return _error(400, "response_format must be url or b64_json", param="response_format")
        data = [{**_item(request, picture_for(model, prompt, i), response_format),
                 "revised_prompt": f"A detailed picture of {prompt.strip()}"} for i in range(n)]
        return JSONResponse({"created": created, "data": data})
    return _error(404, f"the model {model!r} does not exist", param="model", code="model_not_found")


def _prompt_and_n(fields: dict[str, str]) -> tuple[str, int, Response | None]:
    """An edit form's prompt and n, or the answer refusing them (a `#fault=` prompt fails here)."""
    prompt = fields.get("prompt", "")
    if not prompt.strip():
        return prompt, 0, _error(400, "prompt is required", param="prompt")
    if (failed := _fault(prompt)) is not None:
        return prompt, 0, failed
    n = _count(fields.get("n"))
    if n is None:
        return prompt, 0, _error(400, "n must be an integer from 1 to 10", param="n")
    return prompt, n, None


async def edits(request: Request) -> Response:
    if (denied := _unauthorized(request)) is not None:
        return denied
    try:
        form = parse_multipart(await request.body(), request.headers.get("content-type", ""))
    except InvalidRequest as exc:
        return _error(400, exc.message, param=exc.param)
    if form.fields.get("model", "").startswith("iota-"):
        return _iota_edit(request, form)
    image = form.files.get("image")
    if image is None:
        return _error(400, "image is required", param="image")
    if detect_image_type(image.data) is None:
        return _error(400, "image is not a supported image file", param="image")
    prompt, n, refused = _prompt_and_n(form.fields)
    if refused is not None:
        return refused
    response_format = form.fields.get("response_format") or "url"
    if response_format not in ("url", "b64_json"):
        return _error(400, "response_format must be url or b64_json", param="response_format")
    source = hashlib.sha256(image.data).hexdigest()
    seed = form.fields.get("seed", "")
    data = [_item(request, picture_for("edit", source, prompt, seed, i), response_format) for i in range(n)]
    image_tokens = 194  # a fixed figure: the simulator does not look inside the input image
    return JSONResponse({"created": int(time.time()), "data": data,
                         "usage": _usage(prompt, _OUTPUT_TOKENS["auto"] * n, image_tokens)})


def _iota_edit(request: Request, form: Any) -> Response:
    """The gpt-image style edit: several images, an optional mask, pictures of the asked size."""
    if (refused := _gpt_image_refuses_response_format(form.fields)
            or _gpt_image_unknown_field([*form.fields, *form.files], "edit")):
        return refused
    images = form.files_named("image") + form.files_named("image[]")
    if not images:
        return _error(400, "image is required", param="image")
    if len(images) > 16:
        return _error(400, "at most 16 images", param="image")
    first = image_dimensions(images[0].data)
    if any(detect_image_type(i.data) not in ("png", "jpeg", "webp") or image_dimensions(i.data) is None
           for i in images):
        return _error(400, "every image must be a png, jpeg or webp file", param="image")
    mask = form.files.get("mask")
    if mask is not None and (not png_has_alpha(mask.data) or image_dimensions(mask.data) != first):
        return _error(400, "mask must be a PNG with alpha of the first image's size", param="mask")
    prompt, n, refused = _prompt_and_n(form.fields)
    if refused is not None:
        return refused
    size = form.fields.get("size") or "auto"
    if size == "auto":
        width, height = first if first is not None and first in _IOTA_EDIT_SIZES.values() else (1024, 1024)
    elif size in _IOTA_EDIT_SIZES:
        width, height = _IOTA_EDIT_SIZES[size]
    else:
        return _error(400, f"size must be one of {', '.join(_IOTA_EDIT_SIZES)} or auto", param="size")
    quality = form.fields.get("quality") or "auto"
    sources = hashlib.sha256(b"".join(hashlib.sha256(i.data).digest() for i in images)).hexdigest()
    pictures = []
    for index in range(n):
        digest = hashlib.sha256(f"{sources}\x1f{prompt}\x1f{index}".encode()).digest()
        pictures.append(png_image(width, height, (digest[0], digest[1], digest[2])))
    inputs = len(images) + (mask is not None)
    return JSONResponse({"created": int(time.time()), "data": [_item(request, p, "b64_json") for p in pictures],
                         "usage": _usage(prompt, _OUTPUT_TOKENS.get(quality, 1056) * n,
                                         IMAGE_TOKENS_PER_INPUT * inputs),
                         "size": f"{width}x{height}", "quality": quality})


async def files(request: Request) -> Response:
    name = request.path_params["name"]
    with _files_lock:
        entry = _files.get(name)
    if entry is None or entry[0] < time.monotonic():
        return _error(404, "no such file (image URLs expire after 60 minutes)", code="not_found")
    return Response(entry[1], media_type="image/png")


routes = [
    Route("/v1/images/generations", generations, methods=["POST"]),
    Route("/v1/images/edits", edits, methods=["POST"]),
    Route("/files/{name}", files, methods=["GET"]),
]

app = Starlette(routes=routes)
